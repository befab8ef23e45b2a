//! Configuration: the operator's server configuration (TOML file + environment,
//! read once at start) and the repository's `.github/closer.yml`.

pub mod agents;
pub mod repo;
pub mod repo_goal;
pub mod repo_parse;
pub mod retention;
mod secrets;
pub mod server;

pub use repo_parse::{ConfigError, ConfigErrors, check_config_file, parse_repo_config};
