//! The engine: runs and iterations, and every decision about them. It talks to
//! GitHub, the LLM and the agent only through narrow traits.

pub mod fingerprint;
pub mod task_type;
