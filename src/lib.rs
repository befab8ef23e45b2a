//! closer: a self-hosted GitHub App that drives coding agents on issues until
//! the work is verified done. See `docs/architecture.md` for the map.

pub mod agent;
#[cfg(test)]
mod alone;
pub mod body;
pub mod cli;
pub mod clock;
pub mod comment;
pub mod config;
pub mod doctor;
pub mod engine;
pub mod events;
pub mod github;
pub mod llm;
pub mod model;
pub mod panic;
pub mod prompts;
pub mod redact;
pub mod replay;
pub mod retention;
pub mod server;
pub mod service;
pub mod store;
pub mod work_runtime;
pub mod worker;

/// Installs rustls' `ring` provider as the process default (reqwest is built
/// without one, to avoid compiling a second crypto library). Idempotent; call
/// before building any HTTP client.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
