//! One iteration's verification, end to end: given the worktree, the base
//! commit, the repo config, the task type, the baseline and the convergence
//! state → artifacts, goal results with evidence, new failures against the
//! baseline, the scope verdict and the convergence decision.
//!
//! This is the objective half of "verified complete" (DESIGN §3); the
//! the completion check's AI checklist is judged elsewhere and both must agree.

use serde::{Deserialize, Serialize};

use super::artifacts::{self, ArtifactKind, Artifacts};
use super::baseline::Baseline;
use super::convergence::{CheckId, ConvergenceState, Observation, Verdict};
use super::fingerprint::Failure;
use super::goals::{self, GoalContext, GoalResult, GoalSettings};
use super::scope::{self, ScopeVerdict};
use crate::agent::sandbox::Worktree;
use crate::agent::sandbox::git::{GitError, GitRunner};
use crate::config::repo::{GoalSpec, RepoConfig};
use crate::model::TaskType;

/// What one iteration is checked against.
#[derive(Debug, Clone, Copy)]
pub struct VerifyContext<'a> {
    pub git: &'a GitRunner,
    pub worktree: &'a Worktree,
    pub repo: &'a RepoConfig,
    pub task: TaskType,
    /// Level-3 goals from the issue.
    pub acceptance: &'a [GoalSpec],
    pub baseline: &'a Baseline,
    pub settings: &'a GoalSettings,
}

/// Everything one iteration's verification found; what is stored and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterationVerification {
    pub iteration: u32,
    pub artifacts: Artifacts,
    pub missing_artifacts: Vec<ArtifactKind>,
    pub goals: Vec<GoalResult>,
    /// Every failure the command goals reported.
    pub failures: Vec<Failure>,
    /// Failures of required goals that the baseline did not have.
    pub new_failures: Vec<Failure>,
    pub scope: ScopeVerdict,
    pub decision: Verdict,
}

impl IterationVerification {
    /// Objectively complete: the decision says so (no missing artifact, no
    /// blocking goal, no new failure, no scope violation).
    pub fn complete(&self) -> bool {
        self.decision.decision == super::convergence::VerdictKind::Complete
    }
}

/// Verification could not be carried out (not: the work failed it).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("reading the worktree failed: {0}")]
    Git(#[from] GitError),
    #[error("the repository config is invalid: {0}")]
    Config(#[from] super::paths::PatternError),
}

/// Runs the checks of one iteration and advances the convergence state.
pub async fn verify_iteration(
    ctx: VerifyContext<'_>,
    state: &mut ConvergenceState,
    iteration: u32,
    check_id: CheckId,
) -> Result<IterationVerification, VerifyError> {
    let collected = artifacts::collect(ctx.git, ctx.worktree).await?;
    let artifacts = collected.artifacts;
    let missing_artifacts = artifacts::missing(ctx.task, &artifacts, &ctx.worktree.branch);
    let goal_ctx = GoalContext {
        worktree: &ctx.worktree.path,
        artifacts: &artifacts,
        added_lines: &collected.added_lines,
        settings: ctx.settings,
    };
    let applicable = goals::applicable(ctx.repo, ctx.task, ctx.acceptance);
    let mut goal_results = goals::evaluate_all(goal_ctx, &applicable).await;
    for goal in goal_results
        .iter_mut()
        .filter(|g| !g.passed && !g.failures.is_empty())
    {
        goal.baseline_only = ctx.baseline.new_failures(goal.failures.iter()).is_empty();
    }
    let scope = scope::check(&ctx.repo.convergence, &artifacts, state.stage)?;

    let failures: Vec<Failure> = goal_results
        .iter()
        .flat_map(|g| g.failures.iter().cloned())
        .collect();
    let new_failures = ctx.baseline.new_failures(
        goal_results
            .iter()
            .filter(|g| g.required)
            .flat_map(|g| g.failures.iter()),
    );

    let mut reasons = Vec::new();
    let mut blocking = Vec::new();
    for kind in &missing_artifacts {
        reasons.push(format!("missing artifact: {}", kind.as_str()));
        blocking.push(Failure::closer(
            "artifacts",
            &format!("missing {}", kind.as_str()),
        ));
    }
    for goal in goal_results.iter().filter(|g| g.blocks()) {
        reasons.push(format!(
            "goal {} `{}` failed: {}",
            goal.goal_type, goal.target, goal.evidence
        ));
        if goal.failures.is_empty() {
            blocking.push(Failure::closer(&goal.goal_type, &goal.target));
        }
    }
    if !new_failures.is_empty() {
        reasons.push(format!(
            "{} new failure(s) against the baseline",
            new_failures.len()
        ));
        blocking.extend(new_failures.iter().cloned());
    }
    reasons.extend(scope.reasons());
    blocking.extend(scope.failures());

    let evidence = goal_results
        .iter()
        .filter(|g| !g.passed)
        .map(|g| format!("{} `{}`: {}", g.goal_type, g.target, g.evidence))
        .chain(scope.reasons())
        .collect();
    let decision = state.observe(
        Observation {
            iteration,
            blocking,
            reasons,
            diff_hash: artifacts.diff_hash.clone(),
            evidence,
        },
        &ctx.repo.convergence,
        check_id,
    );
    Ok(IterationVerification {
        iteration,
        artifacts,
        missing_artifacts,
        goals: goal_results,
        failures,
        new_failures,
        scope,
        decision,
    })
}
