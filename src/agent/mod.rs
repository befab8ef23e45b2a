//! Agent adapters and the git worktree sandbox they run in.
