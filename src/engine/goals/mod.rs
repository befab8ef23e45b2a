//! Goals: the repo's Definition of Done, the task type's rules and
//! the acceptance criteria, all ten goal types, one function each.
//!
//! A goal result is evidence: passed or not, required or not, how long it
//! took, and a short string that says why (exit code, matched files, failing
//! tests). A goal never passes on the agent's word.

mod command;
mod files;
mod http;
pub mod probe;
mod sandbox;
mod setup;

pub use http::json_path_get;
pub use setup::{SETUP, setup};

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::artifacts::Artifacts;
use super::diff::AddedLine;
use super::fingerprint::Failure;
use crate::agent::confine::Confinement;
use crate::agent::process::BaseEnv;
use crate::config::repo::{GoalKind, GoalSpec, RepoConfig};
use crate::model::TaskType;

/// Which level a goal comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GoalLevel {
    /// The repo's `dod`.
    Dod,
    /// `task_types.<type>.goals`.
    TaskType,
    /// The acceptance criteria.
    Acceptance,
}

impl GoalLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            GoalLevel::Dod => "dod",
            GoalLevel::TaskType => "task_type",
            GoalLevel::Acceptance => "acceptance",
        }
    }
}

/// How goal commands run.
#[derive(Debug, Clone)]
pub struct GoalSettings {
    pub base_env: BaseEnv,
    /// The sandbox goal commands run in.
    pub confinement: Confinement,
    /// Where a goal command's own home is made when its check gives it
    /// none (`GoalContext::home`).
    pub scratch: PathBuf,
    /// When the goal sets no `timeout_secs`.
    pub default_timeout: Duration,
    /// Cap on captured output per stream.
    pub max_output_bytes: usize,
    /// closer's own binary, run beside a live goal's server as its probe
    /// (`closer goal-probe`), so that under bwrap the server has a network
    /// of its own; `None`: the server shares the host's network.
    pub prober: Option<PathBuf>,
}

impl GoalSettings {
    /// Ten minutes per goal, 1 MiB of output per stream.
    pub fn new(base_env: BaseEnv, confinement: Confinement, scratch: PathBuf) -> GoalSettings {
        GoalSettings {
            base_env,
            confinement,
            scratch,
            default_timeout: Duration::from_secs(600),
            max_output_bytes: 1024 * 1024,
            prober: None,
        }
    }

    /// These settings with `prober` as closer's binary for live goals.
    pub fn with_prober(self, prober: Option<PathBuf>) -> GoalSettings {
        GoalSettings { prober, ..self }
    }
}

/// What a goal can look at.
#[derive(Debug, Clone, Copy)]
pub struct GoalContext<'a> {
    /// Where the goals run: a clean checkout of the commit under test.
    pub worktree: &'a Path,
    /// Its git metadata, visible read-only to goal commands.
    pub mirror: Option<&'a Path>,
    /// The home the setup and the goals of one check share; `None`: a
    /// fresh one per command.
    pub home: Option<&'a Path>,
    pub artifacts: &'a Artifacts,
    pub added_lines: &'a [AddedLine],
    pub settings: &'a GoalSettings,
}

/// One goal's verdict with its evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalResult {
    pub level: GoalLevel,
    /// The goal type (`tests_pass`, …).
    pub goal_type: String,
    /// What was checked: the command, pattern, path or URL.
    pub target: String,
    pub passed: bool,
    pub required: bool,
    pub duration_ms: u64,
    /// Short: exit code, matched files, failing tests.
    pub evidence: String,
    /// Fingerprinted failures of a failed command goal.
    pub failures: Vec<Failure>,
    /// The tests a command goal's output names as passed (see
    /// `fingerprint::passed_tests`): what tells a fixed test from a deleted
    /// or skipped one.
    #[serde(default)]
    pub passed_tests: Vec<String>,
    /// The tests a command goal's output shows starting or running, not
    /// skipped, whatever their result (`fingerprint::started_tests`): a
    /// test whose result line was split by its own output still ran.
    #[serde(default)]
    pub started_tests: Vec<String>,
    /// The command's output went past the cap: what it names is partial.
    #[serde(default)]
    pub output_cut: bool,
    /// The goal could not be evaluated at all (command missing, timed out,
    /// bad pattern): a baseline with such a goal is refused.
    pub not_runnable: bool,
    /// A failed command goal whose every failure was already there at the
    /// base commit and is tolerated by the repository (`baseline.tolerate`):
    /// it does not block completion (set by the verification).
    #[serde(alias = "baseline_only")]
    pub tolerated: bool,
}

impl GoalResult {
    /// Whether this goal was not run because the setup before it failed
    /// (see [`not_run`]): it says nothing of its own, and shows as not run.
    pub fn not_run_after_setup(&self) -> bool {
        self.not_runnable && self.evidence == NOT_RUN_AFTER_SETUP
    }

    /// The result of a check closer makes itself (a built-in task-type rule,
    /// the reproduction): no command, no failures of its own.
    pub fn check(
        level: GoalLevel,
        goal_type: &str,
        target: &str,
        passed: bool,
        evidence: String,
    ) -> GoalResult {
        GoalResult {
            level,
            goal_type: goal_type.to_owned(),
            target: target.to_owned(),
            passed,
            required: true,
            duration_ms: 0,
            evidence,
            failures: Vec::new(),
            passed_tests: Vec::new(),
            started_tests: Vec::new(),
            output_cut: false,
            not_runnable: false,
            tolerated: false,
        }
    }

    fn new(level: GoalLevel, spec: &GoalSpec, target: impl Into<String>) -> GoalResult {
        GoalResult {
            level,
            goal_type: goal_type(&spec.kind).to_owned(),
            target: target.into(),
            passed: false,
            required: spec.required,
            duration_ms: 0,
            evidence: String::new(),
            failures: Vec::new(),
            passed_tests: Vec::new(),
            started_tests: Vec::new(),
            output_cut: false,
            not_runnable: false,
            tolerated: false,
        }
    }

    /// `type: target`, the goal's display name (e.g. `tests_pass: cargo test`);
    /// a check with no target is named by its type alone (`Reproduction`).
    pub fn name(&self) -> String {
        match self.target.is_empty() {
            true => self.goal_type.clone(),
            false => format!("{}: {}", self.goal_type, self.target),
        }
    }

    /// Whether this result stands in the way of completion.
    pub fn blocks(&self) -> bool {
        self.required && !self.passed && !self.tolerated
    }
}

/// The config name of a goal type.
pub fn goal_type(kind: &GoalKind) -> &'static str {
    match kind {
        GoalKind::LintPasses { .. } => "lint_passes",
        GoalKind::BuildSucceeds { .. } => "build_succeeds",
        GoalKind::TestsPass { .. } => "tests_pass",
        GoalKind::TestAdded { .. } => "test_added",
        GoalKind::FilesChanged { .. } => "files_changed",
        GoalKind::FileExists { .. } => "file_exists",
        GoalKind::NoSecrets {} => "no_secrets",
        GoalKind::EndpointResponds { .. } => "endpoint_responds",
        GoalKind::ResponseContains { .. } => "response_contains",
        GoalKind::CustomScript { .. } => "custom_script",
    }
}

/// Whether a goal runs a command whose failures can be compared with the
/// baseline (the others are about the run's diff or a live server).
pub fn is_command_goal(kind: &GoalKind) -> bool {
    matches!(
        kind,
        GoalKind::LintPasses { .. }
            | GoalKind::BuildSucceeds { .. }
            | GoalKind::TestsPass { .. }
            | GoalKind::CustomScript { .. }
    )
}

/// The goals that apply, by level: the repo's `dod` for code-changing
/// tasks (an answer-only task has no code to check), the rules the
/// repository set for the task's type whatever the type (a repository that
/// configured `task_types.report.goals` wants them run), and the
/// acceptance criteria always.
pub fn applicable<'a>(
    config: &'a RepoConfig,
    task: TaskType,
    acceptance: &'a [GoalSpec],
) -> Vec<(GoalLevel, &'a GoalSpec)> {
    let mut goals = Vec::new();
    if task.changes_code() {
        goals.extend(config.dod.iter().map(|g| (GoalLevel::Dod, g)));
    }
    if let Some(rules) = config.task_types.get(&task) {
        goals.extend(rules.goals.iter().map(|g| (GoalLevel::TaskType, g)));
    }
    goals.extend(acceptance.iter().map(|g| (GoalLevel::Acceptance, g)));
    goals
}

/// Evaluates one goal.
pub async fn evaluate(ctx: GoalContext<'_>, level: GoalLevel, spec: &GoalSpec) -> GoalResult {
    let started = std::time::Instant::now();
    let timeout = spec
        .timeout_secs
        .map_or(ctx.settings.default_timeout, Duration::from_secs);
    let mut result = match &spec.kind {
        GoalKind::LintPasses { command } => command::run(ctx, level, spec, command, timeout).await,
        GoalKind::BuildSucceeds { command } => {
            command::run(ctx, level, spec, command, timeout).await
        }
        GoalKind::TestsPass { command } => command::run(ctx, level, spec, command, timeout).await,
        GoalKind::CustomScript { command } => {
            command::run(ctx, level, spec, command, timeout).await
        }
        GoalKind::TestAdded { pattern } => files::test_added(ctx, level, spec, pattern),
        GoalKind::FilesChanged { pattern } => files::files_changed(ctx, level, spec, pattern),
        GoalKind::FileExists { path } => files::file_exists(ctx, level, spec, path).await,
        GoalKind::NoSecrets {} => files::no_secrets(ctx, level, spec),
        GoalKind::EndpointResponds {
            command,
            url,
            status,
        } => {
            http::endpoint_responds(
                ctx,
                level,
                spec,
                command,
                url,
                status.unwrap_or(200),
                timeout,
            )
            .await
        }
        GoalKind::ResponseContains { command, url, .. } => {
            http::response_contains(ctx, level, spec, command, url, timeout).await
        }
    };
    result.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    result
}

/// A goal that runs a command (a check's, or a server's): what a failed
/// setup leaves without its dependencies.
pub fn runs_a_command(kind: &GoalKind) -> bool {
    match kind {
        GoalKind::EndpointResponds { .. } | GoalKind::ResponseContains { .. } => true,
        other => is_command_goal(other),
    }
}

/// The evidence of a goal not run because the setup before it failed.
pub const NOT_RUN_AFTER_SETUP: &str = "not run: the setup failed";

/// The result of a goal that was not run because the setup before it
/// failed: not runnable, with [`NOT_RUN_AFTER_SETUP`] as its evidence. The
/// setup's own failure is what blocks (see `verify::blocking`).
pub fn not_run(level: GoalLevel, spec: &GoalSpec) -> GoalResult {
    let target = match &spec.kind {
        GoalKind::LintPasses { command }
        | GoalKind::BuildSucceeds { command }
        | GoalKind::TestsPass { command }
        | GoalKind::CustomScript { command } => command.as_str(),
        GoalKind::EndpointResponds { url, .. } | GoalKind::ResponseContains { url, .. } => {
            url.as_str()
        }
        _ => "",
    };
    let mut result = GoalResult::new(level, spec, target);
    result.not_runnable = true;
    result.evidence = NOT_RUN_AFTER_SETUP.to_owned();
    result
}

/// At most `n` items joined, with a `(+k more)` tail.
fn list(items: &[String], n: usize) -> String {
    let mut s = items.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > n {
        s.push_str(&format!(" (+{} more)", items.len() - n));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::repo::TaskTypeRules;

    fn script(command: &str) -> GoalSpec {
        GoalSpec {
            kind: GoalKind::CustomScript {
                command: command.into(),
            },
            required: true,
            timeout_secs: None,
        }
    }

    /// An answer-only task runs no DoD (no code to check) but does run the
    /// goals the repository set for its type. Before, those were parsed,
    /// counted by `check-config`, and never run.
    #[test]
    fn an_answer_only_task_runs_its_types_goals_but_not_the_dod() {
        let mut config = RepoConfig {
            dod: vec![script("make test")],
            ..RepoConfig::default()
        };
        let rules = TaskTypeRules {
            goals: vec![script("./check-report")],
        };
        config.task_types.insert(TaskType::Report, rules);
        let names = |task| {
            applicable(&config, task, &[])
                .into_iter()
                .map(|(level, g)| match &g.kind {
                    GoalKind::CustomScript { command } => (level, command.clone()),
                    other => panic!("only scripts here: {other:?}"),
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(TaskType::Report),
            [(GoalLevel::TaskType, "./check-report".to_owned())]
        );
        assert_eq!(names(TaskType::ReadInfo), []);
        assert_eq!(
            names(TaskType::Bug),
            [(GoalLevel::Dod, "make test".to_owned())]
        );
    }
}
