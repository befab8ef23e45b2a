//! A run as the store keeps it: one per (repository, issue), every column
//! typed. The engine's working data between steps (`data`) is its own JSON,
//! opaque here and read once per step by the engine.

use super::{
    CompletionType, InstallationId, IssueNumber, Outcome, Phase, RepoName, RepositoryId, RunId,
    RunState, Stage, TaskType,
};
use crate::clock::Millis;

/// A run.
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    pub id: RunId,
    pub installation_id: InstallationId,
    pub repository: RepoName,
    /// GitHub's id of the repository, from the event that started (or
    /// restarted) the run; `None` for runs stored before closer kept it.
    /// A name can pass to another repository; the id cannot.
    pub repository_id: Option<RepositoryId>,
    pub issue_number: IssueNumber,
    pub state: RunState,
    pub phase: Phase,
    pub completion_type: CompletionType,
    /// Classified at the start step.
    pub task_type: Option<TaskType>,
    pub stage: Stage,
    /// The iteration last started (0 before the first).
    pub iteration: u32,
    pub max_iterations: u32,
    /// `closer/issue-<n>`.
    pub branch: String,
    pub base_commit: Option<String>,
    pub clone_url: Option<String>,
    pub default_branch: Option<String>,
    pub pull_request: Option<IssueNumber>,
    pub status_comment_id: Option<u64>,
    pub tokens_used: u64,
    pub cost_usd: f64,
    pub outcome: Option<Outcome>,
    /// The engine's JSON (its `RunData`).
    pub data: String,
    pub created_at: Millis,
    pub updated_at: Millis,
    /// Which life of the run this is: each restart adds one, and a step's
    /// save lands only on the generation it loaded.
    pub generation: u32,
}

/// What a set-aside run's repository name carries after the name: `~` and
/// the run's id (`store/replaced.rs`). `~` is in no GitHub name, so no
/// event finds such a run.
pub const SET_ASIDE_MARK: char = '~';

impl Run {
    /// Whether the run was set aside: its repository's name passed to
    /// another repository. Nothing is done for it any more.
    pub fn is_set_aside(&self) -> bool {
        self.repository.name().contains(SET_ASIDE_MARK)
    }
}

/// The branch closer works an issue on.
pub fn issue_branch(issue: IssueNumber) -> String {
    format!("{BRANCH_PREFIX}{issue}")
}

/// The issue a branch name of ours is for, if it is one of ours.
pub fn branch_issue(branch: &str) -> Option<IssueNumber> {
    branch
        .strip_prefix(BRANCH_PREFIX)
        .and_then(|n| n.parse().ok())
        .map(IssueNumber)
}

/// The prefix of the branches closer pushes.
pub const BRANCH_PREFIX: &str = "closer/issue-";

/// The label that starts a run when the repository names no other.
pub const DEFAULT_TRIGGER_LABEL: &str = "closer";
