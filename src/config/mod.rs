//! Configuration: the operator's server configuration (TOML file + environment,
//! read once at start) and the repository's `.github/closer.yml`.

pub mod agents;
pub mod repo;
pub mod server;
