//! The engine: runs and iterations, and every decision about them. It talks to
//! GitHub, the LLM and the agent only through narrow traits.

pub mod artifacts;
pub mod baseline;
pub mod classify;
pub mod command;
pub mod completion_check;
pub mod convergence;
pub mod diff;
pub mod evidence;
pub mod file_kinds;
pub mod fingerprint;
pub mod goal_outcome;
pub mod goals;
pub mod handlers;
pub mod judge;
pub mod paths;
pub mod question;
pub mod reproduction;
pub mod run;
pub mod scope;
pub mod secrets;
pub mod task_rules;
pub mod tasklist;
pub mod tolerance;
pub mod verify;
