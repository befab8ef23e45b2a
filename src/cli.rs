//! The command line: `closer serve | migrate | doctor | check-config |
//! replay`.
//!
//! The settings an operator most often sets (the database, the App, the
//! LLM, the address) are global flags with an environment variable
//! (`env = …`), so `closer --config closer.toml serve` and
//! `closer serve --config closer.toml` mean the same, and the environment
//! overrides the TOML file; the rest (`[queue]`, `[http]`, `[sandbox]`,
//! `[retention]`, `[agents]`, …) is in the TOML file only. Values are only parsed here; `config::server`
//! turns them into the typed configuration once, at start.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::store::Durability;

/// A self-hosted GitHub App that drives coding agents on issues until the
/// work is verified done.
#[derive(Debug, Parser)]
#[command(name = "closer", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub settings: Settings,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the webhook intake and the workers.
    Serve(ServeArgs),
    /// Apply the database migrations and exit.
    Migrate,
    /// Check this setup (configuration, data directory, database, webhook
    /// secret, App credentials, LLM, sandbox, git, agent tools) and say
    /// what is wrong; exit 0 only when everything holds.
    Doctor,
    /// Validate a `.github/closer.yml` the way the bot would.
    CheckConfig {
        /// The file to check.
        file: PathBuf,
    },
    /// Feed a webhook payload through the pipeline, printing the GitHub
    /// writes it would make instead of sending them.
    Replay {
        /// The payload (the JSON body of a delivery).
        payload: PathBuf,
        /// The event name, as in `X-GitHub-Event` (e.g. `issues`).
        #[arg(long)]
        event: String,
    },
    /// Renders one prompt override read from standard input, under limits
    /// (closer runs it itself: `prompts::confined`).
    #[command(hide = true)]
    RenderPrompt,
    /// Runs one live goal's server and requests its URL, from inside the
    /// goal's sandbox (closer runs it itself: `engine::goals::probe`).
    #[command(hide = true)]
    GoalProbe,
}

/// Flags of `closer serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// What this process runs: intake and workers, or one of them (scale-out).
    #[arg(long, value_enum, env = "CLOSER_ROLE", default_value_t = Role::All)]
    pub role: Role,
    /// Log and record every GitHub write instead of sending it; App
    /// credentials become optional. `CLOSER_DRY_RUN` takes true/false,
    /// yes/no, on/off or 1/0.
    #[arg(long, env = "CLOSER_DRY_RUN", value_parser = clap::builder::BoolishValueParser::new())]
    pub dry_run: bool,
}

/// The parts of the service a `closer serve` process runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Role {
    All,
    Intake,
    Worker,
}

impl Role {
    pub fn runs_intake(self) -> bool {
        matches!(self, Role::All | Role::Intake)
    }

    pub fn runs_workers(self) -> bool {
        matches!(self, Role::All | Role::Worker)
    }
}

/// Server settings: each from a flag, its environment variable, or the TOML
/// file given with `--config` (in that order of precedence). `Debug` shows
/// whether a secret is set, never its value.
#[derive(Default, Args)]
pub struct Settings {
    /// A TOML configuration file (see docs/configuration.md).
    #[arg(long, global = true, env = "CLOSER_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address the HTTP server listens on [default: 127.0.0.1:3000].
    #[arg(long, global = true, env = "CLOSER_BIND")]
    pub bind: Option<SocketAddr>,
    /// Path of the webhook endpoint [default: /webhooks].
    #[arg(long, global = true, env = "CLOSER_WEBHOOK_PATH")]
    pub webhook_path: Option<String>,
    /// `sqlite://…` or `postgres://…` [default: sqlite://closer.db].
    #[arg(long, global = true, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    /// SQLite commit durability: `process` survives kill -9, `fsync` also a
    /// power loss [default: process].
    #[arg(long, global = true, value_enum, env = "CLOSER_DURABILITY")]
    pub durability: Option<Durability>,
    /// The GitHub App's id.
    #[arg(long, global = true, env = "GITHUB_APP_ID")]
    pub github_app_id: Option<u64>,
    /// The App's private key, PEM text.
    #[arg(
        long,
        global = true,
        env = "GITHUB_PRIVATE_KEY",
        hide_env_values = true
    )]
    pub github_private_key: Option<String>,
    /// A file holding the App's private key (PEM).
    #[arg(long, global = true, env = "GITHUB_PRIVATE_KEY_PATH")]
    pub github_private_key_path: Option<PathBuf>,
    /// The secret GitHub signs webhook deliveries with (required to serve).
    #[arg(
        long,
        global = true,
        env = "GITHUB_WEBHOOK_SECRET",
        hide_env_values = true
    )]
    pub github_webhook_secret: Option<String>,
    /// GitHub's REST API; GitHub Enterprise Server is
    /// `https://HOST/api/v3` [default: https://api.github.com].
    #[arg(long, global = true, env = "GITHUB_API_URL")]
    pub github_api_url: Option<String>,
    /// `openai` (any OpenAI-compatible server) or `anthropic`.
    #[arg(long, global = true, env = "CLOSER_LLM_PROVIDER")]
    pub llm_provider: Option<String>,
    /// The LLM API's base URL.
    #[arg(long, global = true, env = "CLOSER_LLM_BASE_URL")]
    pub llm_base_url: Option<String>,
    /// The LLM API key.
    #[arg(
        long,
        global = true,
        env = "CLOSER_LLM_API_KEY",
        hide_env_values = true
    )]
    pub llm_api_key: Option<String>,
    /// The LLM model name.
    #[arg(long, global = true, env = "CLOSER_LLM_MODEL")]
    pub llm_model: Option<String>,
    /// Worker tasks in this process [default: 4].
    #[arg(long, global = true, env = "CLOSER_WORKERS")]
    pub workers: Option<usize>,
    /// Days a handled delivery is kept [default: 14].
    #[arg(long, global = true, env = "CLOSER_RETENTION_DAYS")]
    pub retention_days: Option<u64>,
    /// Where mirrors and worktrees live [default: ./closer-data].
    #[arg(long, global = true, env = "CLOSER_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |v: &Option<String>| v.as_ref().map(|_| "[REDACTED]");
        let database_url = self
            .database_url
            .as_deref()
            .map(crate::store::without_password);
        f.debug_struct("Settings")
            .field("config", &self.config)
            .field("bind", &self.bind)
            .field("webhook_path", &self.webhook_path)
            .field("database_url", &database_url)
            .field("durability", &self.durability)
            .field("github_app_id", &self.github_app_id)
            .field("github_private_key", &hidden(&self.github_private_key))
            .field("github_private_key_path", &self.github_private_key_path)
            .field(
                "github_webhook_secret",
                &hidden(&self.github_webhook_secret),
            )
            .field("github_api_url", &self.github_api_url)
            .field("llm_provider", &self.llm_provider)
            .field("llm_base_url", &self.llm_base_url)
            .field("llm_api_key", &hidden(&self.llm_api_key))
            .field("llm_model", &self.llm_model)
            .field("workers", &self.workers)
            .field("retention_days", &self.retention_days)
            .field("data_dir", &self.data_dir)
            .finish()
    }
}
