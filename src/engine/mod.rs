//! The engine: runs and iterations, and every decision about them.
//!
//! `run/` drives a run through its steps with collaborators that each own
//! one concern (the run in the store, GitHub as the App, the status comment
//! and labels, the workspace, the agents, the checks, the budget); the other
//! modules are the judgment (`judge`, `completion_check`, `question`, `asked`,
//! `handlers/`, `classify`) and the evidence (`artifacts`, `goals/`,
//! `baseline`, `tolerance`, `reproduction`, `task_rules`, `fingerprint/`,
//! `scope`, `convergence`, `verify`, `evidence`), pure where they can be.
//! The engine reaches GitHub through the installation client of
//! `crate::github`, the LLM through the `LlmClient` trait and agents through
//! `crate::agent`; it must never take an agent's words as evidence.

pub mod artifacts;
pub mod asked;
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
pub mod triage;
pub mod verify;
