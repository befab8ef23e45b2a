//! The engine: runs and iterations, and every decision about them. It talks to
//! GitHub, the LLM and the agent only through narrow traits.

pub mod artifacts;
pub mod baseline;
pub mod convergence;
pub mod diff;
pub mod fingerprint;
pub mod goals;
pub mod paths;
pub mod scope;
pub mod secrets;
pub mod task_type;
pub mod verify;
