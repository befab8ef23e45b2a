//! The baseline: the command goals that apply to the run's task (the
//! Definition of Done's and the task type's) run once on a
//! clean worktree of the base commit (after the repository's `setup`),
//! before the first iteration; the failures found there were already there
//! (they block unless the repository tolerates them, see `tolerance`).
//!
//! A baseline that cannot be taken (setup failed, command missing, timed
//! out) is an error that stops the run: judging against nothing would call
//! every old failure new.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::artifacts;
use super::fingerprint::Failure;
use super::goals::{self, GoalContext, GoalResult, GoalSettings};
use crate::agent::sandbox::Worktree;
use crate::agent::sandbox::git::{GitError, GitRunner};
use crate::config::repo::RepoConfig;
use crate::model::TaskType;

/// The failures present before the agent touched anything.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Baseline {
    pub base_commit: String,
    pub failures: Vec<Failure>,
    /// The DoD command goals as they ran on the base commit.
    pub goals: Vec<GoalResult>,
}

/// Why no baseline could be taken.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    #[error("baseline not available: goal `{goal}` could not run: {reason}")]
    Unavailable { goal: String, reason: String },
    #[error("baseline not available: {0}")]
    Git(#[from] GitError),
}

impl Baseline {
    /// A baseline with no failures (no DoD configured).
    pub fn empty(base_commit: &str) -> Baseline {
        Baseline {
            base_commit: base_commit.to_owned(),
            failures: Vec::new(),
            goals: Vec::new(),
        }
    }

    pub fn contains(&self, fingerprint: &str) -> bool {
        self.failures.iter().any(|f| f.fingerprint == fingerprint)
    }

    /// The failures of `current` the baseline did not have.
    pub fn new_failures<'a>(&self, current: impl IntoIterator<Item = &'a Failure>) -> Vec<Failure> {
        current
            .into_iter()
            .filter(|f| !self.contains(&f.fingerprint))
            .cloned()
            .collect()
    }
}

/// Runs the repository's setup, then the command goals that apply to
/// `task` (the DoD's and the task type's), in `clean` (a worktree of the
/// base commit), with `home` shared by them (`None`: a fresh one per
/// command). Every command goal an iteration runs has its base to be
/// compared with: a test that passed at base and is no longer run is
/// named whichever rules the goal came from.
pub async fn take(
    git: &GitRunner,
    clean: &Worktree,
    home: Option<&Path>,
    (config, task): (&RepoConfig, TaskType),
    settings: &GoalSettings,
) -> Result<Baseline, BaselineError> {
    let collected = artifacts::collect(git, clean).await?;
    let ctx = GoalContext {
        worktree: &clean.path,
        mirror: Some(&clean.mirror),
        home,
        artifacts: &collected.artifacts,
        added_lines: &collected.added_lines,
        settings,
    };
    if let Some(setup) = goals::setup(ctx, &config.setup).await.filter(|s| !s.passed) {
        return Err(BaselineError::Unavailable {
            goal: format!("setup `{}`", setup.target),
            reason: setup.evidence,
        });
    }
    let mut results = Vec::new();
    for (level, spec) in goals::applicable(config, task, &[])
        .into_iter()
        .filter(|(_, g)| goals::is_command_goal(&g.kind))
    {
        let result = goals::evaluate(ctx, level, spec).await;
        if result.not_runnable {
            return Err(BaselineError::Unavailable {
                goal: format!("{} `{}`", result.goal_type, result.target),
                reason: result.evidence,
            });
        }
        results.push(result);
    }
    let mut failures: Vec<Failure> = results
        .iter()
        .flat_map(|r| r.failures.iter().cloned())
        .collect();
    failures.dedup_by(|a, b| a.fingerprint == b.fingerprint);
    Ok(Baseline {
        base_commit: clean.base_commit.clone(),
        failures,
        goals: results,
    })
}
