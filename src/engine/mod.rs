//! The engine: runs and iterations, and every decision about them. It talks to
//! GitHub, the LLM and the agent only through narrow traits.

pub mod classify;
pub mod closer;
pub mod command;
pub mod goal_outcome;
pub mod handlers;
pub mod judge;
pub mod question;
pub mod task_type;
pub mod tasklist;
