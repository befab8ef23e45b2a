//! Agent adapters and the git worktree sandbox they run in.
//!
//! Everything that starts a process on behalf of a repository goes through
//! [`process`]: own process group, deadline, output cap, empty environment.

pub mod adapter;
pub mod adapters;
mod capture;
pub mod confine;
pub mod fork_lock;
pub mod home;
mod observe;
pub mod outcome;
pub mod process;
pub mod reaper;
pub mod sandbox;
pub mod search_path;
