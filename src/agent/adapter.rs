//! The one interface the engine uses to run an agent, whatever the tool.
//!
//! An [`AgentAdapter`] only knows its tool's argv and output shape; running
//! the process (process group, deadline, output cap, scrubbed environment) is
//! shared in [`run_agent`]. The agent's words are reported, never trusted:
//! nothing here decides whether the work is done.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::adapters;
use super::process::{self, BaseEnv, ProcessError, ProcessSpec};
use crate::config::agents::{AdapterKind, AgentConfig};

/// How many lines of output the log excerpt keeps.
const LOG_EXCERPT_LINES: usize = 60;

/// Environment names the agent never receives, even when the operator lists
/// them in `pass_env`: the App key, the webhook secret, tokens,
/// the LLM key and the database. `CLOSER_*` is reserved for closer's own.
const FORBIDDEN_PASS_ENV: &[&str] = &[
    "GITHUB_PRIVATE_KEY",
    "GITHUB_PRIVATE_KEY_PATH",
    "GITHUB_WEBHOOK_SECRET",
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "DATABASE_URL",
];

/// One iteration's invocation of the agent.
#[derive(Debug, Clone)]
pub struct AgentRequest {
    pub run_id: String,
    /// 1, 2, …
    pub iteration: u32,
    /// `owner/repo#number`.
    pub issue: String,
    pub prompt: String,
    /// The run's worktree: the agent's working directory.
    pub worktree: PathBuf,
    /// A directory outside the worktree for the prompt file.
    pub scratch_dir: PathBuf,
}

/// How a tool is invoked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub argv: Vec<String>,
    /// Bytes for stdin (the prompt, for every adapter).
    pub stdin: Vec<u8>,
}

/// What an adapter read from its tool's stdout.
#[derive(Debug, Clone, PartialEq)]
pub struct Interpretation {
    /// The final message (the agent's report).
    pub message: String,
    /// The structured output: the tool's JSON, or `{"message": …}`.
    pub structured: serde_json::Value,
    /// The tool itself reported a failure (besides its exit status).
    pub error: Option<String>,
}

/// A tool's argv and output shape.
pub trait AgentAdapter: Send + Sync {
    /// The adapter's name in the operator config.
    fn kind(&self) -> AdapterKind;
    /// The argv and stdin for this request. `prompt_file` already holds the prompt.
    fn invocation(&self, config: &AgentConfig, request: &AgentRequest) -> Invocation;
    /// Maps the tool's stdout onto the common result.
    fn interpret(&self, stdout: &str) -> Interpretation;
}

/// The adapter for a configured kind.
pub fn adapter_for(kind: AdapterKind) -> &'static dyn AgentAdapter {
    match kind {
        AdapterKind::ClaudeCode => &adapters::claude_code::ClaudeCode,
        AdapterKind::Codex => &adapters::codex::Codex,
        AdapterKind::Opencode => &adapters::opencode::Opencode,
        AdapterKind::Command => &adapters::command::CommandAdapter,
    }
}

/// OK or ERROR (a non-zero exit or a timeout is an ERROR iteration).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    Ok,
    Error,
}

/// The result of one agent run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentResult {
    pub status: AgentStatus,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub duration_ms: u64,
    pub message: String,
    pub structured: serde_json::Value,
    /// The last lines of stdout and stderr.
    pub log_excerpt: String,
    /// Output dropped past the cap, per stream (0 = nothing dropped).
    pub stdout_dropped_bytes: u64,
    pub stderr_dropped_bytes: u64,
    /// Why the iteration is an ERROR, when it is.
    pub error: Option<String>,
}

/// Errors before the agent ran at all.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("writing the prompt file failed: {0}")]
    PromptFile(std::io::Error),
    #[error(transparent)]
    Process(#[from] ProcessError),
}

/// The values of the operator's `pass_env` names, looked up once (at start)
/// with `lookup`. Forbidden and `CLOSER_*` names are skipped with a warning.
pub fn resolve_pass_env(
    config: &AgentConfig,
    lookup: impl Fn(&str) -> Option<String>,
) -> BTreeMap<String, String> {
    let mut passed = BTreeMap::new();
    for name in &config.pass_env {
        if FORBIDDEN_PASS_ENV.contains(&name.as_str()) || name.starts_with("CLOSER_") {
            tracing::warn!(name = %name, "pass_env name refused: closer never passes it to an agent");
            continue;
        }
        if let Some(value) = lookup(name) {
            passed.insert(name.clone(), value);
        }
    }
    passed
}

/// The agent's whole environment: base, `CLOSER_*`, and the passed names.
pub fn agent_env(
    base: &BaseEnv,
    passed: &BTreeMap<String, String>,
    request: &AgentRequest,
    prompt_file: &std::path::Path,
) -> BTreeMap<String, String> {
    let mut env = base.vars();
    env.extend(passed.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.insert("CLOSER_RUN_ID".into(), request.run_id.clone());
    env.insert("CLOSER_ITERATION".into(), request.iteration.to_string());
    env.insert("CLOSER_ISSUE".into(), request.issue.clone());
    env.insert(
        "CLOSER_PROMPT_FILE".into(),
        prompt_file.display().to_string(),
    );
    env
}

/// Runs the configured agent once in the request's worktree.
pub async fn run_agent(
    config: &AgentConfig,
    base: &BaseEnv,
    passed: &BTreeMap<String, String>,
    request: &AgentRequest,
) -> Result<AgentResult, AgentError> {
    let adapter = adapter_for(config.adapter);
    tokio::fs::create_dir_all(&request.scratch_dir)
        .await
        .map_err(AgentError::PromptFile)?;
    let prompt_file = request
        .scratch_dir
        .join(format!("prompt-{}.md", request.iteration));
    tokio::fs::write(&prompt_file, &request.prompt)
        .await
        .map_err(AgentError::PromptFile)?;
    let invocation = adapter.invocation(config, request);
    let spec = ProcessSpec {
        argv: invocation.argv,
        cwd: request.worktree.clone(),
        env: agent_env(base, passed, request, &prompt_file),
        stdin: Some(invocation.stdin),
        timeout: Duration::from_secs(config.timeout_secs),
        max_output_bytes: config.max_output_bytes,
    };
    let output = process::run(&spec).await?;
    let interpretation = adapter.interpret(&output.stdout.text);
    let error = if output.timed_out {
        Some(format!(
            "timed out after {} s; process group killed",
            config.timeout_secs
        ))
    } else if output.exit_code != Some(0) {
        Some(match output.exit_code {
            Some(code) => format!("exited with status {code}"),
            None => "killed by a signal".to_owned(),
        })
    } else {
        interpretation.error.clone()
    };
    Ok(AgentResult {
        status: if error.is_some() {
            AgentStatus::Error
        } else {
            AgentStatus::Ok
        },
        exit_code: output.exit_code,
        timed_out: output.timed_out,
        duration_ms: output.duration_ms,
        message: interpretation.message,
        structured: interpretation.structured,
        log_excerpt: output.tail(LOG_EXCERPT_LINES),
        stdout_dropped_bytes: output.stdout.dropped_bytes,
        stderr_dropped_bytes: output.stderr.dropped_bytes,
        error,
    })
}

/// The argv for a tool adapter: the operator's `command` (replacing the
/// executable and leading flags) or `default_program`, then `flags`.
pub(super) fn tool_argv(
    config: &AgentConfig,
    default_program: &str,
    flags: &[&str],
) -> Vec<String> {
    let mut argv = if config.command.is_empty() {
        vec![default_program.to_owned()]
    } else {
        config.command.clone()
    };
    argv.extend(flags.iter().map(|f| (*f).to_owned()));
    argv
}

/// `{"message": text}` for output that is not the expected JSON.
pub(super) fn plain(stdout: &str) -> Interpretation {
    Interpretation {
        message: stdout.trim().to_owned(),
        structured: serde_json::json!({ "message": stdout.trim() }),
        error: None,
    }
}

/// The JSON objects with a `type` field among stdout's lines (JSON Lines
/// event streams; other lines are ignored).
pub(super) fn json_events(stdout: &str) -> Vec<serde_json::Value> {
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line.trim()).ok())
        .filter(|v| v.get("type").and_then(|t| t.as_str()).is_some())
        .collect()
}
