//! The operator's server configuration, typed once at start.
//!
//! Sources, strongest first: command-line flags, environment variables, the
//! TOML file named by `--config` / `CLOSER_CONFIG`, built-in defaults. Secrets
//! become `SecretString` as soon as they are read and are never logged or
//! printed (`Debug` shows `[REDACTED]`). Nothing reads the environment after
//! this module has run.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::SecretString;
use serde::Deserialize;

use super::agents::Agents;
use super::retention::{FileRetention, RetentionConfig};
use crate::cli::Settings;
use crate::store::{Durability, StoreOptions};

/// A configuration problem the operator must fix; the process exits with it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the configuration file {path}: {source}")]
    ReadFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid configuration file {path}: {message}")]
    ParseFile { path: PathBuf, message: String },
    #[error("cannot read the GitHub App private key from {path}: {source}")]
    ReadKey {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(String),
}

/// `[github]` in the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileGitHub {
    app_id: Option<u64>,
    private_key: Option<SecretString>,
    private_key_path: Option<PathBuf>,
    webhook_secret: Option<SecretString>,
    api_url: Option<String>,
}

/// `[llm]` in the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileLlm {
    provider: Option<String>,
    base_url: Option<String>,
    api_key: Option<SecretString>,
    model: Option<String>,
    input_usd_per_mtok: Option<f64>,
    output_usd_per_mtok: Option<f64>,
}

/// `[queue]` in the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileQueue {
    lease_secs: Option<u64>,
    max_attempts: Option<i64>,
}

/// The whole TOML file; every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    bind: Option<SocketAddr>,
    webhook_path: Option<String>,
    database_url: Option<String>,
    durability: Option<Durability>,
    workers: Option<usize>,
    retention_days: Option<u64>,
    data_dir: Option<PathBuf>,
    progress_interval_secs: Option<u64>,
    #[serde(default)]
    github: FileGitHub,
    #[serde(default)]
    llm: FileLlm,
    #[serde(default)]
    agents: Agents,
    #[serde(default)]
    queue: FileQueue,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    retention: FileRetention,
}

/// GitHub settings.
#[derive(Debug, Clone)]
pub struct GitHubConfig {
    pub app_id: Option<u64>,
    /// PEM text of the App's private key.
    pub private_key: Option<SecretString>,
    pub webhook_secret: Option<SecretString>,
    pub api_url: String,
}

/// Which wire format the LLM speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmProvider {
    OpenAi,
    Anthropic,
}

/// LLM settings; absent when no provider is configured.
#[derive(Debug, Clone)]
pub struct LlmConfig {
    pub provider: LlmProvider,
    pub base_url: String,
    pub api_key: Option<SecretString>,
    pub model: String,
    /// The price of a million input tokens in US dollars, for run budgets
    /// (`[llm] input_usd_per_mtok`; unset counts as free).
    pub input_usd_per_mtok: Option<f64>,
    /// The price of a million output tokens in US dollars.
    pub output_usd_per_mtok: Option<f64>,
}

/// Job queue settings.
#[derive(Debug, Clone, Copy)]
pub struct QueueConfig {
    /// Worker tasks in this process.
    pub workers: usize,
    /// How long a claimed job is leased before another worker may take it.
    pub lease: Duration,
    /// Attempts before a job is dead-lettered.
    pub max_attempts: i64,
}

/// The operator's ceilings; no repository configuration can raise them.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    pub max_tokens_per_run: Option<u64>,
    pub max_cost_usd_per_run: Option<f64>,
}

/// The resolved configuration.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub bind: SocketAddr,
    pub webhook_path: String,
    pub store: StoreOptions,
    pub github: GitHubConfig,
    pub llm: Option<LlmConfig>,
    pub agents: Agents,
    pub queue: QueueConfig,
    pub retention: RetentionConfig,
    pub data_dir: PathBuf,
    pub limits: Limits,
    /// How often the status comment shows what a working agent is doing
    /// (`progress_interval_secs`, default 30; 0 turns it off).
    pub progress_every: Option<Duration>,
}

pub const DEFAULT_BIND: &str = "127.0.0.1:3000";
pub const DEFAULT_DATABASE_URL: &str = "sqlite://closer.db";
pub const DEFAULT_API_URL: &str = "https://api.github.com";
/// Where mirrors, worktrees and prompt files live, relative to the directory
/// closer was started in (made absolute at load).
pub const DEFAULT_DATA_DIR: &str = "closer-data";

/// A path from the configuration made absolute against the directory closer
/// was started in, once, at load: git and the agents run in other working
/// directories, where a relative path would name another place.
fn absolute(key: &str, path: PathBuf) -> Result<PathBuf, ConfigError> {
    std::path::absolute(&path)
        .map_err(|e| ConfigError::Invalid(format!("{key} {}: {e}", path.display())))
}

impl ServerConfig {
    /// Resolves flags and environment (already merged by clap) over the file.
    pub fn load(settings: &Settings) -> Result<ServerConfig, ConfigError> {
        let file = match &settings.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        resolve(settings, file)
    }

    /// The webhook secret, or the error `closer serve` stops with.
    pub fn require_webhook_secret(&self) -> Result<&SecretString, ConfigError> {
        self.github.webhook_secret.as_ref().ok_or_else(|| {
            ConfigError::Invalid(
                "GITHUB_WEBHOOK_SECRET is not set: closer refuses to accept unsigned webhooks. \
                 Set it (or `webhook_secret` under [github] in the config file) to the secret \
                 configured on the GitHub App."
                    .to_owned(),
            )
        })
    }
}

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile {
        path: path.to_owned(),
        source,
    })?;
    toml::from_str(&text).map_err(|e| ConfigError::ParseFile {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

fn read_key(path: &Path) -> Result<SecretString, ConfigError> {
    std::fs::read_to_string(path)
        .map(SecretString::from)
        .map_err(|source| ConfigError::ReadKey {
            path: path.to_owned(),
            source,
        })
}

fn secret(value: &Option<String>) -> Option<SecretString> {
    value.as_deref().map(|s| SecretString::from(s.to_owned()))
}

fn resolve(s: &Settings, file: FileConfig) -> Result<ServerConfig, ConfigError> {
    let github = resolve_github(s, file.github)?;
    let llm = resolve_llm(s, file.llm)?;
    let webhook_path = s
        .webhook_path
        .clone()
        .or(file.webhook_path)
        .unwrap_or_else(|| "/webhooks".to_owned());
    if !webhook_path.starts_with('/') {
        return Err(ConfigError::Invalid(format!(
            "webhook_path must start with '/', got {webhook_path:?}"
        )));
    }
    let workers = s.workers.or(file.workers).unwrap_or(4);
    let lease_secs = file.queue.lease_secs.unwrap_or(300);
    if lease_secs < 5 {
        return Err(ConfigError::Invalid(
            "queue.lease_secs must be at least 5".to_owned(),
        ));
    }
    let mut store = StoreOptions::new(
        s.database_url
            .clone()
            .or(file.database_url)
            .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned()),
    );
    store.durability = s.durability.or(file.durability).unwrap_or_default();
    store.max_connections = (workers as u32 + 4).max(8);
    crate::store::Backend::from_url(&store.url)
        .map_err(|e| ConfigError::Invalid(format!("DATABASE_URL: {e}")))?;
    for (name, agent) in &file.agents {
        if agent.adapter == super::agents::AdapterKind::Command && agent.command.is_empty() {
            return Err(ConfigError::Invalid(format!(
                "[agents.{name}]: the command adapter needs `command = [\"program\", …]`"
            )));
        }
        if let Some(problem) = agent.config_file_problems().first() {
            return Err(ConfigError::Invalid(format!("[agents.{name}]: {problem}")));
        }
    }
    Ok(ServerConfig {
        bind: s
            .bind
            .or(file.bind)
            .unwrap_or_else(|| DEFAULT_BIND.parse().expect("constant address")),
        webhook_path,
        store,
        github,
        llm,
        agents: file.agents,
        queue: QueueConfig {
            workers,
            lease: Duration::from_secs(lease_secs),
            max_attempts: file.queue.max_attempts.unwrap_or(8).max(1),
        },
        retention: RetentionConfig::resolve(
            &file.retention,
            s.retention_days,
            file.retention_days,
        )?,
        data_dir: absolute(
            "data_dir",
            s.data_dir
                .clone()
                .or(file.data_dir)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)),
        )?,
        limits: file.limits,
        progress_every: match file.progress_interval_secs.unwrap_or(30) {
            0 => None,
            secs => Some(Duration::from_secs(secs)),
        },
    })
}

/// `[github]` under the flags and environment; the key from its text or
/// its file, flags first.
fn resolve_github(s: &Settings, file: FileGitHub) -> Result<GitHubConfig, ConfigError> {
    let private_key = if let Some(key) = secret(&s.github_private_key) {
        Some(key)
    } else if let Some(path) = &s.github_private_key_path {
        Some(read_key(path)?)
    } else if let Some(key) = file.private_key {
        Some(key)
    } else if let Some(path) = &file.private_key_path {
        Some(read_key(path)?)
    } else {
        None
    };
    Ok(GitHubConfig {
        app_id: s.github_app_id.or(file.app_id),
        private_key,
        webhook_secret: secret(&s.github_webhook_secret).or(file.webhook_secret),
        api_url: s
            .github_api_url
            .clone()
            .or(file.api_url)
            .unwrap_or_else(|| DEFAULT_API_URL.to_owned())
            .trim_end_matches('/')
            .to_owned(),
    })
}

fn resolve_llm(s: &Settings, file: FileLlm) -> Result<Option<LlmConfig>, ConfigError> {
    let Some(provider) = s.llm_provider.clone().or(file.provider) else {
        return Ok(None);
    };
    let provider = match provider.as_str() {
        "openai" => LlmProvider::OpenAi,
        "anthropic" => LlmProvider::Anthropic,
        other => {
            return Err(ConfigError::Invalid(format!(
                "CLOSER_LLM_PROVIDER must be `openai` or `anthropic`, got {other:?}"
            )));
        }
    };
    let default_base = match provider {
        LlmProvider::OpenAi => "https://api.openai.com/v1",
        LlmProvider::Anthropic => "https://api.anthropic.com",
    };
    let model = s.llm_model.clone().or(file.model).ok_or_else(|| {
        ConfigError::Invalid("CLOSER_LLM_MODEL is required when an LLM provider is set".to_owned())
    })?;
    Ok(Some(LlmConfig {
        provider,
        base_url: s
            .llm_base_url
            .clone()
            .or(file.base_url)
            .unwrap_or_else(|| default_base.to_owned())
            .trim_end_matches('/')
            .to_owned(),
        api_key: secret(&s.llm_api_key).or(file.api_key),
        model,
        input_usd_per_mtok: price("input_usd_per_mtok", file.input_usd_per_mtok)?,
        output_usd_per_mtok: price("output_usd_per_mtok", file.output_usd_per_mtok)?,
    }))
}

/// A price from `[llm]`: a finite, non-negative number.
fn price(key: &str, value: Option<f64>) -> Result<Option<f64>, ConfigError> {
    match value {
        Some(v) if !v.is_finite() || v < 0.0 => Err(ConfigError::Invalid(format!(
            "[llm] {key} must be a non-negative number of US dollars, got {v}"
        ))),
        v => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    fn settings() -> Settings {
        Settings::default()
    }

    fn parse(toml_text: &str) -> FileConfig {
        toml::from_str(toml_text).expect("valid test TOML")
    }

    #[test]
    fn defaults_apply_without_file_or_flags() {
        let config = resolve(&settings(), FileConfig::default()).unwrap();
        assert_eq!(config.bind.to_string(), DEFAULT_BIND);
        assert_eq!(config.store.url, DEFAULT_DATABASE_URL);
        assert_eq!(config.webhook_path, "/webhooks");
        assert_eq!(config.github.api_url, DEFAULT_API_URL);
        assert!(config.llm.is_none());
        assert!(config.require_webhook_secret().is_err());
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(config.data_dir, cwd.join(DEFAULT_DATA_DIR));
    }

    #[test]
    fn a_relative_data_dir_is_made_absolute_against_the_start_directory() {
        let file = parse(r#"data_dir = "var/closer""#);
        let config = resolve(&settings(), file).unwrap();
        assert!(config.data_dir.is_absolute(), "{:?}", config.data_dir);
        assert!(config.data_dir.ends_with("var/closer"));
        let file = parse(r#"data_dir = "/srv/closer""#);
        let config = resolve(&settings(), file).unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/srv/closer"));
    }

    #[test]
    fn flags_and_environment_override_the_file() {
        let file = parse(
            r#"
            bind = "0.0.0.0:8080"
            database_url = "sqlite://file.db"
            [github]
            webhook_secret = "from-file"
            app_id = 1
            "#,
        );
        let s = Settings {
            database_url: Some("postgres://localhost/x".into()),
            github_webhook_secret: Some("from-env".into()),
            ..settings()
        };
        let config = resolve(&s, file).unwrap();
        assert_eq!(config.bind.to_string(), "0.0.0.0:8080");
        assert_eq!(config.store.url, "postgres://localhost/x");
        assert_eq!(config.github.app_id, Some(1));
        assert_eq!(
            config.require_webhook_secret().unwrap().expose_secret(),
            "from-env"
        );
    }

    #[test]
    fn the_design_example_file_parses() {
        let file = parse(
            r#"
            bind = "127.0.0.1:3000"
            database_url = "sqlite://closer.db"
            [github]
            app_id = 12345
            webhook_secret = "s"
            api_url = "https://api.github.com"
            [llm]
            provider = "openai"
            base_url = "https://api.openai.com/v1"
            api_key = "k"
            model = "m"
            input_usd_per_mtok = 3.0
            output_usd_per_mtok = 15.0
            [agents.default]
            adapter = "command"
            command = ["/usr/local/bin/my-agent", "--flag"]
            timeout_secs = 1800
            pass_env = ["MY_AGENT_API_KEY"]
            "#,
        );
        let config = resolve(&settings(), file).unwrap();
        assert_eq!(config.agents["default"].command[1], "--flag");
        let llm = config.llm.unwrap();
        assert_eq!(llm.provider, LlmProvider::OpenAi);
        assert_eq!(llm.input_usd_per_mtok, Some(3.0));
        assert_eq!(llm.output_usd_per_mtok, Some(15.0));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        assert!(toml::from_str::<FileConfig>("bnd = \"x\"").is_err());
        let file = parse("[llm]\nprovider = \"gemini\"\nmodel = \"m\"");
        let err = resolve(&settings(), file).unwrap_err().to_string();
        assert!(err.contains("gemini"), "{err}");
        let file = parse("database_url = \"mysql://x\"");
        assert!(resolve(&settings(), file).is_err());
        let file = parse("[agents.a]\nadapter = \"command\"");
        let err = resolve(&settings(), file).unwrap_err().to_string();
        assert!(err.contains("agents.a"), "{err}");
        let file = parse("[llm]\nprovider = \"openai\"\nmodel = \"m\"\ninput_usd_per_mtok = -1.0");
        let err = resolve(&settings(), file).unwrap_err().to_string();
        assert!(err.contains("input_usd_per_mtok"), "{err}");
    }

    #[test]
    fn secrets_do_not_show_in_debug_output() {
        let s = Settings {
            github_webhook_secret: Some("hunter2-secret".into()),
            ..settings()
        };
        let config = resolve(&s, FileConfig::default()).unwrap();
        assert!(!format!("{config:?}").contains("hunter2"));
    }
}
