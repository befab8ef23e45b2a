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
use super::confine::{Confinement, Kind, View};
use super::observe::{Observed, observe};
use super::outcome::{
    AgentFailure, AgentUsage, fatal_cause, last_line, outage_cause, outside_events, tail_lines,
};
use super::process::{self, BaseEnv, ProcessError, ProcessOutput, ProcessSpec};
use crate::config::agents::{AdapterKind, AgentConfig, refused_env_name};

/// How many lines of output the log excerpt keeps.
const LOG_EXCERPT_LINES: usize = 60;

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
    /// The run's own HOME (tool state, transcripts, TMPDIR), outside the
    /// worktree; `None` keeps the base environment's.
    pub home: Option<PathBuf>,
    /// The run's git metadata (the mirror), read-only in the sandbox.
    pub mirror: Option<PathBuf>,
    /// The tool's session to continue, from the previous iteration.
    pub resume: Option<String>,
    /// Receives what the agent is doing while it works (live progress).
    pub progress: Option<tokio::sync::mpsc::UnboundedSender<Progress>>,
    /// Stops the agent when it turns `true` (its run was stopped): the tool
    /// is killed with its process group, and what it printed so far (its
    /// usage) is still read. The result's failure is then
    /// [`AgentFailure::Stopped`].
    pub stop: Option<tokio::sync::watch::Receiver<bool>>,
}

/// What the agent is doing, read from its event stream while it works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// "editing src/parser.rs", "running `cargo test`".
    pub activity: Option<String>,
    /// Tokens the tool reported since the last progress event.
    pub tokens: u64,
}

/// One line of the tool's event stream, as the adapter reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    Progress(Progress),
    /// A condition every further moment would repeat (the credentials were
    /// refused): the tool is stopped at once.
    Fatal(AgentFailure),
    /// The tool says it cannot reach its model provider and keeps waiting
    /// for it (Codex waits for the network without end): after
    /// [`UNREACHABLE_NOTICES`] such lines in a row, with no progress between
    /// them, the tool is stopped and the iteration ends as
    /// [`AgentFailure::ModelUnavailable`].
    Unreachable(String),
    /// The tool printed its final report: it is given [`FINISH_GRACE`] to
    /// exit, then stopped (a tool that lingers must not hold the run up).
    /// Progress after it (OpenCode goes on after compacting its context)
    /// calls the grace off until the tool reports again.
    Finished,
}

/// How long a tool may take to exit after its final report.
pub const FINISH_GRACE: Duration = Duration::from_secs(10);

/// How many "cannot reach the model" notices in a row stop the tool. Codex
/// announces its wait for the network 0, 5, 15, 35 and 75 s into an
/// outage (then every minute): the fifth, about 75 s of no connection.
pub const UNREACHABLE_NOTICES: u32 = 5;

/// How a tool is invoked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    pub argv: Vec<String>,
    /// Bytes for stdin (the prompt, for every adapter).
    pub stdin: Vec<u8>,
    /// Variables the tool needs to run unattended (the operator's
    /// `pass_env` values win over these).
    pub env: Vec<(String, String)>,
}

/// What an adapter read from its tool's stdout.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Interpretation {
    /// The final message (the agent's report).
    pub message: String,
    /// The structured output: the tool's JSON, or `{"message": …}`.
    pub structured: serde_json::Value,
    /// The tool itself reported a failure (besides its exit status).
    pub failure: Option<AgentFailure>,
    /// What the tool reported spending.
    pub usage: AgentUsage,
    /// The tool's session, to continue in the next iteration.
    pub session_id: Option<String>,
}

/// A tool's argv and output shape.
pub trait AgentAdapter: Send + Sync {
    /// The adapter's name in the operator config.
    fn kind(&self) -> AdapterKind;
    /// The argv and stdin for this request. `prompt_file` already holds the prompt.
    fn invocation(&self, config: &AgentConfig, request: &AgentRequest) -> Invocation;
    /// Maps the tool's stdout onto the common result.
    fn interpret(&self, stdout: &str) -> Interpretation;
    /// Directories under the run's HOME the tool needs to exist (each in
    /// `config::agents::HOME_RESERVED`).
    fn home_dirs(&self) -> &'static [&'static str] {
        &[]
    }
    /// What one stdout line says while the tool runs, if anything.
    fn observe(&self, line: &str) -> Option<Observation> {
        let _ = line;
        None
    }
    /// The argv that prints the tool's version (`closer doctor`); `None`
    /// for an operator's command, which closer never runs for a check.
    fn version_argv(&self, config: &AgentConfig) -> Option<Vec<String>> {
        let _ = config;
        None
    }
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
    /// Why the iteration is an ERROR, when it is, in a sentence.
    pub error: Option<String>,
    /// Why the iteration is an ERROR, by name.
    #[serde(default)]
    pub failure: Option<AgentFailure>,
    /// What the tool reported spending.
    #[serde(default)]
    pub usage: AgentUsage,
    /// The tool's session, to continue in the next iteration.
    #[serde(default)]
    pub session_id: Option<String>,
}

impl AgentResult {
    /// A failed run with no output (it never started, or was stopped).
    pub fn failed(failure: AgentFailure) -> AgentResult {
        AgentResult {
            status: AgentStatus::Error,
            exit_code: None,
            timed_out: false,
            duration_ms: 0,
            message: String::new(),
            structured: serde_json::json!({}),
            log_excerpt: String::new(),
            stdout_dropped_bytes: 0,
            stderr_dropped_bytes: 0,
            error: Some(failure.describe()),
            failure: Some(failure),
            usage: AgentUsage::default(),
            session_id: None,
        }
    }

    /// Marks the result failed for `failure`.
    pub fn fail(&mut self, failure: AgentFailure) {
        self.status = AgentStatus::Error;
        self.error = Some(failure.describe());
        self.failure = Some(failure);
    }
}

/// Errors before the agent ran at all.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("writing the prompt file failed: {0}")]
    PromptFile(std::io::Error),
    #[error("preparing the run's HOME failed: {0}")]
    Home(std::io::Error),
    #[error(transparent)]
    Process(#[from] ProcessError),
}

/// The operator's `env` values, then the values of its `pass_env` names,
/// looked up once (at start) with `lookup`. Forbidden and `CLOSER_*` names
/// are skipped with a warning.
pub fn resolve_pass_env(
    config: &AgentConfig,
    lookup: impl Fn(&str) -> Option<String>,
) -> BTreeMap<String, String> {
    let mut passed = BTreeMap::new();
    for (name, value) in &config.env {
        if refused_env_name(name) {
            tracing::warn!(name = %name, "env name refused: closer never sets it for an agent");
            continue;
        }
        passed.insert(name.clone(), value.clone());
    }
    for name in &config.pass_env {
        if refused_env_name(name) {
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
    if let Some(home) = &request.home {
        env.extend(home_vars(home));
    }
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

/// HOME, TMPDIR and the XDG directories under the run's own HOME, so tool
/// state and transcripts stay with the run.
fn home_vars(home: &std::path::Path) -> [(String, String); 6] {
    let at = |sub: &str| home.join(sub).display().to_string();
    [
        ("HOME".into(), home.display().to_string()),
        ("TMPDIR".into(), at("tmp")),
        ("XDG_CONFIG_HOME".into(), at(".config")),
        ("XDG_DATA_HOME".into(), at(".local/share")),
        ("XDG_STATE_HOME".into(), at(".local/state")),
        ("XDG_CACHE_HOME".into(), at(".cache")),
    ]
}

/// Runs the configured agent once in the request's worktree.
pub async fn run_agent(
    config: &AgentConfig,
    base: &BaseEnv,
    passed: &BTreeMap<String, String>,
    request: &AgentRequest,
    confinement: &Confinement,
) -> Result<AgentResult, AgentError> {
    if let Some(reason) = confinement.unavailable() {
        return Ok(AgentResult::failed(AgentFailure::NoSandbox {
            detail: reason.to_owned(),
        }));
    }
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
    if let Some(home) = &request.home {
        super::home::prepare_home(home, config, adapter.home_dirs())
            .await
            .map_err(AgentError::Home)?;
    }
    let mut env = agent_env(base, passed, request, &prompt_file);
    for (name, value) in invocation.env {
        env.entry(name).or_insert(value);
    }
    let spec = ProcessSpec {
        argv: invocation.argv,
        cwd: request.worktree.clone(),
        env,
        stdin: Some(invocation.stdin),
        timeout: Duration::from_secs(config.timeout_secs),
        max_output_bytes: config.max_output_bytes,
        keep_end: true,
        jail: Some(confinement.jail(Kind::Agent, view(request))),
        fd3: None,
    };
    let program = spec.argv.first().cloned().unwrap_or_default();
    let (watch, observer) = observe(adapter, request.progress.clone(), request.stop.clone());
    let output = process::run_watched(&spec, watch).await;
    let seen = observer.await.unwrap_or_default();
    let output = match output {
        Ok(output) => output,
        Err(ProcessError::Spawn { source, .. }) => {
            let detail = source.to_string();
            return Ok(AgentResult::failed(AgentFailure::NotInstalled {
                program,
                detail,
            }));
        }
        Err(ProcessError::Escaped { .. }) => {
            return Ok(AgentResult::failed(AgentFailure::Escaped));
        }
        Err(e) => return Err(e.into()),
    };
    Ok(result(adapter, &output, seen, config.timeout_secs))
}

/// What the agent sees of the run: its worktree and home read-write, its
/// git metadata and prompt file read-only.
fn view(request: &AgentRequest) -> View {
    View {
        read_write: [Some(&request.worktree), request.home.as_ref()]
            .into_iter()
            .flatten()
            .cloned()
            .collect(),
        read_only: [request.mirror.as_ref(), Some(&request.scratch_dir)]
            .into_iter()
            .flatten()
            .cloned()
            .collect(),
    }
}

/// The result of a run the tool finished (or was stopped in): its report,
/// its failure by name, its usage and session.
fn result(
    adapter: &dyn AgentAdapter,
    output: &ProcessOutput,
    seen: Observed,
    timeout_secs: u64,
) -> AgentResult {
    let mut interpretation = adapter.interpret(&output.stdout.text);
    // A tool that ends without a word has failed (OpenCode does that when
    // it rejects a permission); a `command` agent may be a silent script.
    if interpretation.message.trim().is_empty()
        && interpretation.failure.is_none()
        && adapter.kind() != AdapterKind::Command
    {
        interpretation.failure = Some(AgentFailure::EmptyReport);
    }
    if let Some(failure) = seen.stopped_for {
        interpretation.failure = Some(failure);
    }
    // Stopped because it lingered after its final report: not a failure.
    let lingered = seen.finished && output.stopped;
    let failure = failure_of(output, &interpretation, timeout_secs, lingered);
    AgentResult {
        status: if failure.is_some() {
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
        error: failure.as_ref().map(AgentFailure::describe),
        failure,
        usage: interpretation.usage,
        session_id: interpretation.session_id,
    }
}

/// Why the run failed, by name: the deadline, what the tool itself said
/// (a denial, an error, an empty report), a credential or start-up problem
/// named in its own words (outside its event stream), its model provider
/// being down (named in the tool's own error, never in what the agent's
/// commands printed), or a non-zero exit with its last lines.
fn failure_of(
    output: &ProcessOutput,
    interpretation: &Interpretation,
    timeout_secs: u64,
    lingered: bool,
) -> Option<AgentFailure> {
    if output.timed_out {
        return Some(AgentFailure::TimedOut { secs: timeout_secs });
    }
    let failed = output.exit_code != Some(0) && !lingered;
    // What a failed tool said in its own words, its event stream left out
    // (the results of the agent's commands travel in it). Read only when
    // needed: a run that went well can leave megabytes of events.
    let said = || fatal_cause(&outside_events(&output.combined()));
    // The tool's own last words: its error stream, else its output.
    let own = match output.stderr.text.trim().is_empty() {
        true => &output.stdout.text,
        false => &output.stderr.text,
    };
    match &interpretation.failure {
        // The tool's own words name the cause best; else all it said itself.
        Some(AgentFailure::ToolError { detail }) => Some(
            fatal_cause(detail)
                .or_else(|| failed.then(said).flatten())
                .or_else(|| last_line(detail).and_then(outage_cause))
                .unwrap_or_else(|| AgentFailure::ToolError {
                    detail: detail.clone(),
                }),
        ),
        Some(other) => Some(other.clone()),
        None if failed => Some(
            said()
                .or_else(|| last_line(own).and_then(outage_cause))
                .unwrap_or_else(|| AgentFailure::Exited {
                    code: output.exit_code,
                    tail: tail_lines(own, 3, 400),
                }),
        ),
        None => None,
    }
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

/// A file as a progress line or a denial names it: its last component.
pub(super) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A command as a progress line or a denial shows it: its first 80 characters.
pub(super) fn short_command(command: &str) -> String {
    command.chars().take(80).collect()
}

/// `{"message": text}` for output that is not the expected JSON.
pub(super) fn plain(stdout: &str) -> Interpretation {
    Interpretation {
        message: stdout.trim().to_owned(),
        structured: serde_json::json!({ "message": stdout.trim() }),
        ..Interpretation::default()
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

#[cfg(test)]
mod tests {
    use super::*;

    use crate::agent::process::Captured;

    #[test]
    fn the_directories_closer_names_in_home_are_reserved_from_config_files() {
        let home = std::path::Path::new("/home-of-run");
        for (name, value) in home_vars(home).into_iter().skip(1) {
            let relative = value.strip_prefix("/home-of-run/").unwrap();
            assert!(
                crate::config::agents::HOME_RESERVED.contains(&relative),
                "{name}={value}"
            );
        }
        assert!(crate::config::agents::HOME_RESERVED.contains(&super::super::home::HOME_MARKER));
        // A new adapter fails to compile here until it is listed.
        let listed = |kind: AdapterKind| match kind {
            AdapterKind::ClaudeCode
            | AdapterKind::Codex
            | AdapterKind::Opencode
            | AdapterKind::Command => kind,
        };
        for kind in [
            AdapterKind::ClaudeCode,
            AdapterKind::Codex,
            AdapterKind::Opencode,
            AdapterKind::Command,
        ] {
            for dir in adapter_for(listed(kind)).home_dirs() {
                assert!(
                    crate::config::agents::HOME_RESERVED.contains(dir),
                    "{kind:?}: {dir}"
                );
            }
        }
    }

    /// What a `command` agent left: its exit code and two streams.
    fn exited(code: i32, stdout: &str, stderr: &str) -> ProcessOutput {
        let captured = |text: &str| Captured {
            text: text.into(),
            dropped_bytes: 0,
        };
        ProcessOutput {
            exit_code: Some(code),
            timed_out: false,
            stopped: false,
            duration_ms: 1,
            stdout: captured(stdout),
            stderr: captured(stderr),
        }
    }

    fn command_failure(output: &ProcessOutput) -> Option<AgentFailure> {
        let interpretation = adapters::command::CommandAdapter.interpret(&output.stdout.text);
        failure_of(output, &interpretation, 60, false)
    }

    #[test]
    fn a_command_whose_last_words_name_an_outage_met_the_provider_down() {
        let out = exited(
            1,
            "",
            "calling the model\nError: 503 Service Unavailable (upstream overloaded)\n",
        );
        assert_eq!(
            command_failure(&out),
            Some(AgentFailure::ModelUnavailable {
                detail: "Error: 503 Service Unavailable (upstream overloaded)".into()
            })
        );
        // Said on stdout when stderr is empty.
        let out = exited(2, "connect ECONNREFUSED 127.0.0.1:4000\n", "");
        assert!(matches!(
            command_failure(&out),
            Some(AgentFailure::ModelUnavailable { .. })
        ));
    }

    /// The control: its tests printed a refused connection, and its last
    /// words are the test summary: an ordinary failed exit. The same words
    /// with exit 0 are no failure at all.
    #[test]
    fn an_outage_the_agents_tests_printed_is_not_the_providers() {
        let out = exited(
            1,
            "",
            "test_fetch ... ERROR\nConnectionRefusedError: [Errno 111] Connection refused\n503 Service Unavailable\nFAILED (errors=1)\n",
        );
        assert_eq!(
            command_failure(&out),
            Some(AgentFailure::Exited {
                code: Some(1),
                tail: "ConnectionRefusedError: [Errno 111] Connection refused | 503 Service Unavailable | FAILED (errors=1)".into()
            })
        );
        let out = exited(0, "", "Error: 503 Service Unavailable\n");
        assert_eq!(command_failure(&out), None);
    }

    /// A tool's run that failed for its own reason (here Claude Code out of
    /// turns) is not a refused key because the agent's test printed "401
    /// Unauthorized": that travels in the tool's event stream. The control:
    /// the same words in the tool's own error stream are.
    #[test]
    fn a_refused_key_the_agents_tests_printed_is_not_the_tools() {
        let stream = concat!(
            r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"FAILED test_login - 401 Unauthorized"}]}}"#,
            "\n",
            r#"{"type":"result","subtype":"error_max_turns","is_error":true,"result":""}"#,
            "\n"
        );
        let claude = adapters::claude_code::ClaudeCode;
        let failure =
            |out: &ProcessOutput| failure_of(out, &claude.interpret(&out.stdout.text), 60, false);
        assert_eq!(
            failure(&exited(1, stream, "")),
            Some(AgentFailure::ToolError {
                detail: "error_max_turns".into()
            })
        );
        assert!(matches!(
            failure(&exited(1, stream, "Error: 401 Unauthorized\n")),
            Some(AgentFailure::Authentication { .. })
        ));
    }

    /// Output that names a refused key is an authentication failure even
    /// when its last line says 5xx.
    #[test]
    fn a_refused_key_wins_over_an_outage() {
        let out = exited(1, "", "Error: 401 Unauthorized\nstatus 503\n");
        assert!(matches!(
            command_failure(&out),
            Some(AgentFailure::Authentication { .. })
        ));
    }
}
