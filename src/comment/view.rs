//! The plain view-model structs the texts are rendered from. The engine maps
//! its own state into these; nothing here knows how a run is decided, and
//! nothing here does I/O. Every `String` in these structs is treated as
//! untrusted by the renderers (escaped, quoted or fenced).

use crate::model::IssueNumber;
use crate::model::TaskType;

pub use crate::model::{Phase, RunState, Stage};

/// A small sign in front of a run's state, readable without colour.
pub fn state_icon(state: RunState) -> &'static str {
    match state {
        RunState::Queued => "⏳",
        RunState::Running => "🔄",
        RunState::AwaitingResponse => "❓",
        RunState::Verifying => "🔍",
        RunState::Done => "✅",
        RunState::Failed => "❌",
        RunState::Stopped => "⏹️",
    }
}

/// One item of the closer's checklist.
#[derive(Debug, Clone, PartialEq)]
pub struct ChecklistRow {
    pub description: String,
    pub completed: bool,
    /// Why the item is (not) done; may be long.
    pub evidence: String,
}

/// The outcome of one goal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoalStatus {
    Passed,
    Failed,
    /// Failed only with failures the repository tolerates (they were there
    /// at the base commit; `baseline.tolerate`).
    Tolerated,
    /// Not run yet (or skipped because an earlier step failed).
    NotRun,
}

impl GoalStatus {
    pub fn label(self) -> &'static str {
        match self {
            GoalStatus::Passed => "✅ passed",
            GoalStatus::Failed => "❌ failed",
            GoalStatus::Tolerated => "⚠️ tolerated",
            GoalStatus::NotRun => "⏸️ not run",
        }
    }
}

/// One row of the verification table.
#[derive(Debug, Clone, PartialEq)]
pub struct GoalRow {
    /// e.g. `tests_pass: cargo test`.
    pub name: String,
    pub status: GoalStatus,
    pub required: bool,
    /// What was observed; may be long (command output).
    pub evidence: String,
}

/// New failures compared with the baseline taken on the base commit.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BaselineRow {
    /// A short description of each failure that was not there at baseline.
    pub new_failures: Vec<String>,
    /// How many failures were already there at baseline.
    pub already_failing: usize,
    /// Failures of required checks that were there at the base commit too
    /// and are not tolerated: they block.
    pub failing_since_base: Vec<String>,
    /// Failures there at the base commit that the repository tolerates.
    pub tolerated: Vec<String>,
    /// Tests that failed at the base commit and pass now.
    pub fixed_since_base: Vec<String>,
}

/// The scope guard's verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum ScopeRow {
    Ok,
    /// Files changed outside the allowed paths.
    OutOfScope(Vec<String>),
}

/// The verification table: goals, baseline comparison, scope.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct VerificationView {
    pub goals: Vec<GoalRow>,
    /// `None` before a baseline was taken.
    pub baseline: Option<BaselineRow>,
    /// `None` when no scope guard applies.
    pub scope: Option<ScopeRow>,
    /// Why the head is not verified, when it is not (the verdict's
    /// reasons); empty when it is. Shown as a row of its own when no other
    /// row fails: a test no longer run, output past its cap, a missing
    /// artifact have no row (decision 256).
    pub blockers: Vec<String>,
}

/// One signal that made question detection fire.
#[derive(Debug, Clone, PartialEq)]
pub struct SignalRow {
    /// e.g. `question mark at the end`, `asks for confirmation`.
    pub kind: String,
    pub weight: f64,
    /// The text that matched.
    pub excerpt: String,
}

/// Why the bot thinks the agent asked a question.
#[derive(Debug, Clone, PartialEq)]
pub struct QuestionView {
    pub score: f64,
    pub threshold: f64,
    pub signals: Vec<SignalRow>,
    /// The agent said so in its structured output.
    pub stated_by_agent: bool,
}

/// Tokens and cost spent so far, and the budget when one is set.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct UsageView {
    pub tokens: u64,
    pub cost_usd: f64,
    pub max_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
}

/// The one line that says what happens next.
#[derive(Debug, Clone, PartialEq)]
pub enum NextStep {
    /// Waiting for a worker to pick the run up.
    Queued,
    /// Preparing: config, clone, baseline.
    Preparing,
    /// The agent is working on this iteration.
    Working { iteration: u32 },
    /// Checking the goals of this iteration.
    Verifying { iteration: u32 },
    /// Paused until the issue author answers.
    WaitingFor { author: String },
    /// Paused because the agent's model provider is down: this iteration
    /// runs again, uncounted, once it answers.
    WaitingForModel { iteration: u32 },
    /// Verified; the pull request is open for review; closing when merged
    /// (`close_on: merged`) or right away.
    PullRequestOpen {
        number: IssueNumber,
        close_on_merge: bool,
    },
    /// Done: the issue is closed.
    Closed,
    /// Done: a maintainer merged the pull request at `head`, a commit
    /// closer did not verify; the issue is closed.
    MergedUnverified { head: String },
    /// Failed: the issue stays open until someone retries.
    Failed,
    /// Failed: a maintainer closed the run's pull request without merging
    /// it; the issue stays open until someone retries.
    PullClosed { number: IssueNumber },
    /// Stopped by a maintainer or by the issue being closed.
    Stopped,
}

/// Everything the status comment shows.
#[derive(Debug, Clone, PartialEq)]
pub struct StatusView {
    pub run_id: String,
    pub state: RunState,
    /// `None` once the run holds no phase (its pull request was closed
    /// unmerged: the `phase:*` label is gone too).
    pub phase: Option<Phase>,
    pub task_type: Option<TaskType>,
    /// The current iteration (0 before the first).
    pub iteration: u32,
    pub max_iterations: u32,
    pub stage: Stage,
    /// The closer's one-paragraph summary of the last iteration.
    pub summary: Option<String>,
    pub checklist: Vec<ChecklistRow>,
    pub pending_actions: Vec<String>,
    pub verification: Option<VerificationView>,
    /// Set when the last iteration was judged to ask a question.
    pub question: Option<QuestionView>,
    pub usage: UsageView,
    /// The run on the dashboard, when the operator configured a public URL.
    pub dashboard_url: Option<String>,
    pub next: NextStep,
    /// Short notices for the maintainer (e.g. a project board field that
    /// does not exist). Written by the engine, not by the agent.
    pub notices: Vec<String>,
    /// Why the last iteration's agent run failed, by name ("the agent was
    /// denied permission to edit calc.py").
    pub agent_problem: Option<String>,
    /// What the agent is doing right now (live progress while it works).
    pub progress: Option<String>,
}
