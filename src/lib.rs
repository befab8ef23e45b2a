//! closer: a self-hosted GitHub App that drives coding agents on issues until
//! the work is verified done. See `docs/architecture.md` for the map.

pub mod agent;
pub mod clock;
pub mod config;
pub mod engine;
pub mod github;
pub mod llm;
pub mod prompts;
pub mod store;
