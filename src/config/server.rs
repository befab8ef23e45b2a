//! The operator's server configuration, typed once at start.
//!
//! Sources, strongest first: command-line flags, environment variables, the
//! TOML file named by `--config` / `CLOSER_CONFIG`, built-in defaults. Secrets
//! become `SecretString` as soon as they are read and are never logged or
//! printed (`Debug` shows `[REDACTED]`). The rest of closer reads the
//! environment only at start (`PATH`, `HOME`, `HOSTNAME`, an agent's
//! `pass_env`), never while serving.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use super::agents::Agents;
use super::retention::{FileRetention, RetentionConfig};
use super::secrets::{private_key, read_key, secret, trimmed, webhook_secret};
use crate::agent::confine::{ConfineError, Confinement, SandboxConfig};
use crate::agent::process::BaseEnv;
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
    max_output_tokens: Option<u64>,
    timeout_secs: Option<u64>,
}

/// `[queue]` in the TOML file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileQueue {
    lease_secs: Option<u64>,
    max_attempts: Option<i64>,
}

/// `[http]` in the TOML file: the limits of the HTTP edge.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileHttp {
    header_read_timeout_secs: Option<u64>,
    request_timeout_secs: Option<u64>,
    max_connections: Option<usize>,
    body_memory_mb: Option<u64>,
    shutdown_grace_secs: Option<u64>,
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
    sandbox: SandboxConfig,
    #[serde(default)]
    http: FileHttp,
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
    /// The longest answer asked for (`[llm] max_output_tokens`, 8192).
    pub max_output_tokens: u32,
    /// How long one request may take (`[llm] timeout_secs`, 120 s).
    pub timeout: Duration,
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

/// The limits of the HTTP edge (`[http]`), see `server::listen`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpLimits {
    /// A request's head must arrive within this; also how long a keep-alive
    /// connection may sit idle.
    pub header_read_timeout: Duration,
    /// A request is answered within this (its body read included), or 503.
    pub request_timeout: Duration,
    /// Connections served at once; more are accepted and closed at once.
    pub max_connections: usize,
    /// Bytes of webhook bodies held in memory at once, all requests together.
    pub body_memory_bytes: usize,
    /// From the shutdown signal to exit: in-flight requests and jobs get
    /// this long, then connections are dropped and jobs given back.
    pub shutdown_grace: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        Self {
            header_read_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_connections: 1024,
            body_memory_bytes: 32 * 1024 * 1024,
            shutdown_grace: Duration::from_secs(25),
        }
    }
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
    /// `[sandbox]`, with closer's own files added to `hide`.
    pub sandbox: SandboxConfig,
    /// How often the status comment shows what a working agent is doing
    /// (`progress_interval_secs`, default 30; 0 turns it off).
    pub progress_every: Option<Duration>,
    pub http: HttpLimits,
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

    /// The agents' names in the configuration file, and nothing else of
    /// the server's configuration: what `closer check-config` needs, run
    /// where the App key, the database or the agents' files may not be.
    pub fn agent_names(settings: &Settings) -> Result<Vec<String>, ConfigError> {
        Ok(match &settings.config {
            Some(path) => read_file(path)?.agents.into_keys().collect(),
            None => Vec::new(),
        })
    }

    /// The webhook secret, or the error `closer serve` stops with: unset,
    /// or set but empty (an empty HMAC key is one anybody can sign with).
    pub fn require_webhook_secret(&self) -> Result<&SecretString, ConfigError> {
        match &self.github.webhook_secret {
            Some(secret) if !secret.expose_secret().is_empty() => Ok(secret),
            Some(_) => Err(ConfigError::Invalid(
                "GITHUB_WEBHOOK_SECRET (or [github] webhook_secret) is set but empty: \
                 anybody could sign a delivery with an empty secret. Set it to the secret \
                 configured on the GitHub App."
                    .to_owned(),
            )),
            None => Err(ConfigError::Invalid(
                "GITHUB_WEBHOOK_SECRET is not set: closer refuses to accept unsigned webhooks. \
                 Set it (or `webhook_secret` under [github] in the config file) to the secret \
                 configured on the GitHub App."
                    .to_owned(),
            )),
        }
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

fn resolve(s: &Settings, file: FileConfig) -> Result<ServerConfig, ConfigError> {
    let key_file = file.github.private_key_path.clone();
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
    let queue = resolve_queue(s.workers.or(file.workers), &file.queue)?;
    let mut store = StoreOptions::new(
        s.database_url
            .clone()
            .or(file.database_url)
            .unwrap_or_else(|| DEFAULT_DATABASE_URL.to_owned()),
    );
    store.durability = s.durability.or(file.durability).unwrap_or_default();
    store.max_connections = (queue.workers as u32 + 4).max(8);
    crate::store::Backend::from_url(&store.url)
        .map_err(|e| ConfigError::Invalid(format!("DATABASE_URL: {e}")))?;
    if let Some(problem) = file.sandbox.limits.problem() {
        return Err(ConfigError::Invalid(problem));
    }
    check_agents(&file.agents)?;
    let progress = bounded(
        "progress_interval_secs",
        file.progress_interval_secs,
        30,
        0,
        86_400,
    )?;
    let data_dir = absolute(
        "data_dir",
        s.data_dir
            .clone()
            .or(file.data_dir)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_DATA_DIR)),
    )?;
    let mut sandbox = file.sandbox;
    sandbox
        .hide
        .extend(own_files(s, key_file, &store.url, &data_dir));
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
        queue,
        retention: RetentionConfig::resolve(
            &file.retention,
            s.retention_days,
            file.retention_days,
        )?,
        data_dir,
        limits: resolve_limits(file.limits)?,
        sandbox,
        progress_every: (progress > 0).then(|| Duration::from_secs(progress)),
        http: resolve_http(&file.http)?,
    })
}

/// A number from the configuration, `default` when unset, refused with a
/// clear error outside `min..=max`: every duration, count and size is
/// bounded here, once, so no arithmetic later can overflow on it.
pub(crate) fn bounded(
    key: &str,
    value: Option<u64>,
    default: u64,
    min: u64,
    max: u64,
) -> Result<u64, ConfigError> {
    match value.unwrap_or(default) {
        v if (min..=max).contains(&v) => Ok(v),
        v => Err(ConfigError::Invalid(format!(
            "{key} must be between {min} and {max}, got {v}"
        ))),
    }
}

/// `workers` and `[queue]`.
fn resolve_queue(workers: Option<usize>, file: &FileQueue) -> Result<QueueConfig, ConfigError> {
    let workers = bounded("workers", workers.map(|w| w as u64), 4, 0, 256)?;
    let lease_secs = bounded("queue.lease_secs", file.lease_secs, 300, 5, 86_400)?;
    let max_attempts = file.max_attempts.map(|n| n.max(0) as u64);
    let max_attempts = bounded("queue.max_attempts", max_attempts, 8, 1, 100)?;
    Ok(QueueConfig {
        workers: workers as usize,
        lease: Duration::from_secs(lease_secs),
        max_attempts: max_attempts as i64,
    })
}

/// `[http]`, see [`HttpLimits`].
fn resolve_http(file: &FileHttp) -> Result<HttpLimits, ConfigError> {
    let d = HttpLimits::default();
    let secs = |key: &str, value: Option<u64>, default: Duration, max: u64| {
        bounded(key, value, default.as_secs(), 1, max).map(Duration::from_secs)
    };
    let max_connections = file.max_connections.map(|n| n as u64);
    let body_mb = (d.body_memory_bytes / (1024 * 1024)) as u64;
    Ok(HttpLimits {
        header_read_timeout: secs(
            "http.header_read_timeout_secs",
            file.header_read_timeout_secs,
            d.header_read_timeout,
            300,
        )?,
        request_timeout: secs(
            "http.request_timeout_secs",
            file.request_timeout_secs,
            d.request_timeout,
            600,
        )?,
        max_connections: bounded(
            "http.max_connections",
            max_connections,
            d.max_connections as u64,
            16,
            65_536,
        )? as usize,
        body_memory_bytes: bounded(
            "http.body_memory_mb",
            file.body_memory_mb,
            body_mb,
            25,
            4096,
        )? as usize
            * 1024
            * 1024,
        shutdown_grace: secs(
            "http.shutdown_grace_secs",
            file.shutdown_grace_secs,
            d.shutdown_grace,
            3600,
        )?,
    })
}

/// `[limits]`: a ceiling is above zero (a ceiling of 0 would refuse every
/// run at its first step; no ceiling is the key left out), a cost a
/// finite number.
fn resolve_limits(limits: Limits) -> Result<Limits, ConfigError> {
    price("[limits] max_cost_usd_per_run", limits.max_cost_usd_per_run)?;
    if limits.max_cost_usd_per_run == Some(0.0) || limits.max_tokens_per_run == Some(0) {
        return Err(ConfigError::Invalid(
            "[limits] max_tokens_per_run and max_cost_usd_per_run must be above 0 \
             (leave a key out for no ceiling): a ceiling of 0 refuses every run"
                .to_owned(),
        ));
    }
    Ok(limits)
}

/// Every agent is runnable as configured.
fn check_agents(agents: &Agents) -> Result<(), ConfigError> {
    for (name, agent) in agents {
        if let Some(problem) = agent.problems().first() {
            return Err(ConfigError::Invalid(format!("[agents.{name}]: {problem}")));
        }
    }
    Ok(())
}

/// closer's own files, hidden from every sandboxed process: the data
/// directory (mirrors, worktrees, prompts), the SQLite database, the
/// configuration file, the App key file, and the credential files of
/// closer's own home that a toolchain directory may contain.
fn own_files(s: &Settings, key_file: Option<PathBuf>, url: &str, data_dir: &Path) -> Vec<PathBuf> {
    let mut files = vec![data_dir.to_path_buf()];
    files.extend(s.config.clone());
    files.extend(s.github_private_key_path.clone());
    files.extend(key_file);
    if let Some(db) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    {
        let db = db.split('?').next().unwrap_or(db);
        for suffix in ["", "-wal", "-shm", "-journal"] {
            files.push(PathBuf::from(format!("{db}{suffix}")));
        }
    }
    if let Some(home) = std::env::var_os("HOME").map(PathBuf::from) {
        for secret in [
            ".cargo/credentials",
            ".cargo/credentials.toml",
            ".npmrc",
            ".netrc",
        ] {
            files.push(home.join(secret));
        }
    }
    let mut hidden: Vec<PathBuf> = Vec::new();
    for file in files {
        for path in [
            std::path::absolute(&file).ok(),
            std::fs::canonicalize(&file).ok(),
        ] {
            if let Some(path) = path.filter(|p| !hidden.contains(p)) {
                hidden.push(path);
            }
        }
    }
    hidden
}

impl ServerConfig {
    /// The sandbox `[sandbox]` asks for, or why closer must not start.
    pub fn confinement(&self) -> Result<Confinement, ConfineError> {
        Confinement::detect(&self.sandbox, &BaseEnv::from_process().path)
    }
}

/// `[github]` under the flags and environment; the key from its text or
/// its file, flags first.
fn resolve_github(s: &Settings, file: FileGitHub) -> Result<GitHubConfig, ConfigError> {
    let key = if let Some(key) = secret(&s.github_private_key) {
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
        private_key: private_key(key)?,
        webhook_secret: webhook_secret(secret(&s.github_webhook_secret).or(file.webhook_secret)),
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
        // Empty is no key: a local model may need none.
        api_key: secret(&s.llm_api_key)
            .or(file.api_key)
            .as_ref()
            .and_then(trimmed),
        model,
        input_usd_per_mtok: price("[llm] input_usd_per_mtok", file.input_usd_per_mtok)?,
        output_usd_per_mtok: price("[llm] output_usd_per_mtok", file.output_usd_per_mtok)?,
        max_output_tokens: bounded(
            "[llm] max_output_tokens",
            file.max_output_tokens,
            8_192,
            256,
            1_000_000,
        )? as u32,
        timeout: Duration::from_secs(bounded(
            "[llm] timeout_secs",
            file.timeout_secs,
            120,
            5,
            3_600,
        )?),
    }))
}

/// A price from `[llm]`: a finite, non-negative number.
fn price(key: &str, value: Option<f64>) -> Result<Option<f64>, ConfigError> {
    match value {
        Some(v) if !v.is_finite() || v < 0.0 => Err(ConfigError::Invalid(format!(
            "{key} must be a non-negative number of US dollars, got {v}"
        ))),
        v => Ok(v),
    }
}

#[cfg(test)]
#[path = "server_tests.rs"]
mod tests;
