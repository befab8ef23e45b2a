//! The repository configuration, `.github/closer.yml`: the typed shape every
//! other module reads.
//!
//! Parsing and validation (line/column errors, `deny_unknown_fields`, the
//! operator's agent list) live beside these types in `repo_parse.rs` and
//! `repo_goal.rs`; the engine only ever sees a validated [`RepoConfig`]. Every
//! field is optional in the file and has the default documented here and in
//! `docs/closer.example.yml`. Range checks that need no context run while
//! deserializing (so they carry the value's line and column); this file must
//! never accept a value the engine cannot act on.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::config::repo_goal::RawGoal;
use crate::config::repo_parse::{
    at_least_one_u64, iteration_limit, line_budget, positive_f64, setup_commands, setup_timeout,
    stagnation_limit, unit_interval, valid_globs,
};
pub use crate::model::CompletionType;
use crate::model::TaskType;

/// The whole validated `.github/closer.yml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RepoConfig {
    /// The label that starts a run (default `closer`).
    #[serde(deserialize_with = "crate::config::repo_parse::label_name")]
    pub trigger_label: String,
    /// The operator's agent this repository uses (default `default`).
    pub agent: String,
    /// How a run decides it is complete.
    pub completion: CompletionConfig,
    /// What the goals' clean checkout needs before they run (dependencies).
    pub setup: SetupConfig,
    /// Definition of Done: level-1 goals every change must pass.
    pub dod: Vec<GoalSpec>,
    /// Level-2 goals per task type.
    pub task_types: BTreeMap<TaskType, TaskTypeRules>,
    /// The convergence controller's knobs.
    pub convergence: ConvergenceConfig,
    /// Which failures already present at the base commit are tolerated
    /// (default: none — a required goal passes only when it passes).
    pub baseline: BaselineConfig,
    /// Whether a `bug` must come with a test that fails at the base commit
    /// and passes with the fix (default: required for bugs when a
    /// `tests_pass` goal exists).
    pub reproduction: Option<ReproductionMode>,
    /// Globs that recognise test files (default: the common conventions of
    /// Python, Go, JavaScript/TypeScript, Rust, Ruby, Java and shell).
    #[serde(deserialize_with = "valid_globs")]
    pub test_files: Vec<String>,
    /// When the issue is closed: once verified, or once the pull request merges.
    pub close_on: CloseOn,
    /// Per-run budget; the operator's ceiling wins.
    pub budget: BudgetConfig,
    /// Who may steer the bot with comments.
    pub commands: CommandsConfig,
    /// A GitHub Projects (v2) board whose Status follows the phases.
    pub project: Option<ProjectConfig>,
}

impl Default for RepoConfig {
    fn default() -> Self {
        Self {
            trigger_label: crate::model::DEFAULT_TRIGGER_LABEL.to_owned(),
            agent: "default".to_owned(),
            completion: CompletionConfig::default(),
            setup: SetupConfig::default(),
            dod: Vec::new(),
            task_types: BTreeMap::new(),
            convergence: ConvergenceConfig::default(),
            baseline: BaselineConfig::default(),
            reproduction: None,
            test_files: Vec::new(),
            close_on: CloseOn::Verified,
            budget: BudgetConfig::default(),
            commands: CommandsConfig::default(),
            project: None,
        }
    }
}

/// `completion:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompletionConfig {
    /// Which completion handler decides.
    #[serde(rename = "type")]
    pub kind: CompletionType,
    /// The most iterations a run may take (default 10, 1 to 1000).
    #[serde(deserialize_with = "iteration_limit")]
    pub max_iterations: u32,
    /// The completion check's minimum confidence, 0 to 1 (default 0.8).
    #[serde(deserialize_with = "unit_interval")]
    pub confidence_threshold: f64,
    /// `manual`: the keyword the agent's output must contain.
    pub keyword: String,
    /// `custom`: path of an executable in the repository (JSON in, JSON out).
    pub handler: Option<String>,
}

impl Default for CompletionConfig {
    fn default() -> Self {
        Self {
            kind: CompletionType::Issue,
            max_iterations: 10,
            confidence_threshold: 0.8,
            keyword: "TASK_COMPLETE".to_owned(),
            handler: None,
        }
    }
}

/// `close_on:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CloseOn {
    /// Close the issue as soon as completion is verified.
    #[default]
    Verified,
    /// Close it when the pull request merges.
    Merged,
}

/// One goal. Which fields a goal needs depends on its type; the
/// parser checks that (through `RawGoal`, which names the missing or stray
/// field), so the engine can rely on [`GoalKind`] being complete.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawGoal")]
pub struct GoalSpec {
    /// What is checked, with the fields that type needs.
    #[serde(flatten)]
    pub kind: GoalKind,
    /// A goal that is not required is reported but does not block
    /// completion (default true).
    pub required: bool,
    /// Overrides the default goal timeout (seconds).
    pub timeout_secs: Option<u64>,
}

/// The ten goal types.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum GoalKind {
    /// A lint command exits 0.
    LintPasses { command: String },
    /// A build command exits 0.
    BuildSucceeds { command: String },
    /// A test command exits 0 (failures are fingerprinted against the baseline).
    TestsPass { command: String },
    /// The run's diff adds a file matching `pattern`.
    TestAdded { pattern: String },
    /// The run's diff changes a file matching `pattern`.
    FilesChanged { pattern: String },
    /// `path` exists in the worktree.
    FileExists { path: String },
    /// The run's diff contains no credentials.
    NoSecrets {},
    /// Start `command`, wait for `url`, expect `status` (default 200).
    EndpointResponds {
        command: String,
        url: String,
        #[serde(default)]
        status: Option<u16>,
    },
    /// Start `command`, request `url`, expect `json_path` to equal `expected`
    /// (or the body to contain `contains`).
    ResponseContains {
        command: String,
        url: String,
        #[serde(default)]
        json_path: Option<String>,
        #[serde(default)]
        expected: Option<serde_json::Value>,
        #[serde(default)]
        contains: Option<String>,
    },
    /// Any command in the worktree; exit 0 passes.
    CustomScript { command: String },
}

/// `task_types.<type>:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct TaskTypeRules {
    /// Goals that apply to issues of this type, on top of `dod`.
    pub goals: Vec<GoalSpec>,
}

/// The longest `timeout_secs` a goal may have (a day).
pub const MAX_GOAL_TIMEOUT_SECS: u64 = 86_400;

/// `setup:`. The goals run on a clean checkout of the commit under test
/// (and the baseline on one of the base commit), with no network; these
/// commands run there first, with the network, to install what the goals
/// need (`npm ci`, `cargo fetch`). They share one fresh home with the goals
/// of the same check. Default: none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SetupConfig {
    /// Shell commands, run in order in the checkout; the first to fail
    /// fails the setup.
    #[serde(deserialize_with = "setup_commands")]
    pub commands: Vec<String>,
    /// Per command (default 900, 1 to 86 400).
    #[serde(deserialize_with = "setup_timeout")]
    pub timeout_secs: u64,
}

impl Default for SetupConfig {
    fn default() -> Self {
        SetupConfig {
            commands: Vec::new(),
            timeout_secs: 900,
        }
    }
}

/// `convergence:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConvergenceConfig {
    /// Iterations with the same failure set before the next stage (default 2, 1 to 100).
    #[serde(deserialize_with = "stagnation_limit")]
    pub stagnation_threshold: u32,
    /// Globs the change may touch; empty means anywhere.
    #[serde(deserialize_with = "valid_globs")]
    pub allowed_paths: Vec<String>,
    /// Changed lines allowed in stage 2 (default 400, 1 to 10 000 000).
    #[serde(deserialize_with = "line_budget")]
    pub diff_budget: u32,
    /// `false` switches the controller off: no minimal-fix stage, no stop
    /// for going round in circles (the iteration limit still holds).
    pub enabled: bool,
}

impl Default for ConvergenceConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            stagnation_threshold: 2,
            allowed_paths: Vec::new(),
            diff_budget: 400,
        }
    }
}

/// `baseline:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct BaselineConfig {
    /// Which failures present at the base commit do not block completion.
    pub tolerate: Tolerate,
    /// With `tolerate: listed`: the tolerated tests, as ids or globs over
    /// ids (`test_calc.py::test_legacy`, `tests/legacy_*`).
    #[serde(deserialize_with = "valid_globs")]
    pub known_failures: Vec<String>,
    /// Tests that passed at the base commit and a change may stop running
    /// (the issue asks for their removal), as ids or globs over ids; any
    /// other such test blocks completion.
    #[serde(deserialize_with = "valid_globs")]
    pub removed_tests: Vec<String>,
}

/// `baseline.tolerate:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Tolerate {
    /// Strict: a failure that was already there blocks like any other.
    #[default]
    None,
    /// Only the failures named in `known_failures`.
    Listed,
    /// Every failure already present at the base commit (new failures only
    /// block).
    Preexisting,
}

/// `reproduction:`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReproductionMode {
    /// A bug is complete only with a test that fails at the base commit
    /// and passes with the fix.
    Required,
    /// Shown in the verification table, never blocking.
    Report,
    /// Not computed.
    Off,
}

/// `budget:`; `None` means no repository limit (the operator's ceiling still applies).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct BudgetConfig {
    /// Most LLM and agent tokens one run may spend; at least 1 (0 would
    /// refuse every run; no limit is the key left out).
    #[serde(deserialize_with = "crate::config::repo_parse::at_least_one")]
    pub max_tokens: Option<u64>,
    /// Most US dollars one run may spend; must be positive.
    #[serde(deserialize_with = "positive_f64")]
    pub max_cost_usd: Option<f64>,
}

/// `commands:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields, default)]
pub struct CommandsConfig {
    /// The lowest repository permission allowed to use `/closer` commands
    /// (default `write`; `none` is refused, it would let anyone steer the bot).
    #[serde(deserialize_with = "crate::config::repo_parse::some_permission")]
    pub min_permission: crate::model::Permission,
}

/// `project:`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProjectConfig {
    /// The user or organisation that owns the board.
    pub owner: String,
    /// The board's number (at least 1).
    #[serde(deserialize_with = "at_least_one_u64")]
    pub number: u64,
    /// The single-select field that follows the phases (default `Status`).
    #[serde(default = "default_status_field")]
    pub status_field: String,
}

fn default_status_field() -> String {
    "Status".to_owned()
}
