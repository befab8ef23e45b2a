//! One iteration's verification: given the worktree, the base commit, the
//! repo config, the task type, the baseline and the convergence state →
//! artifacts, goal results with evidence (the task type's built-in rule and
//! the reproduction among them), failures sorted against the baseline (new,
//! failing since base, tolerated, fixed), the scope verdict and the
//! convergence decision. In two halves: [`evaluate`] runs the checks at
//! head, [`conclude`] judges them; between the two the engine runs the
//! reproduction on the base commit's code.
//!
//! This is the objective half of "verified complete"; the completion
//! check's AI checklist is judged elsewhere and both must agree. Strict: a
//! required goal passes only when it passes.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::artifacts::{self, ArtifactKind, Artifacts};
use super::baseline::Baseline;
use super::convergence::{CheckId, ConvergenceState, Observation, Verdict};
use super::file_kinds::FileKinds;
use super::fingerprint::Failure;
use super::goals::{self, GoalContext, GoalResult, GoalSettings};
use super::reproduction::Reproduction;
use super::scope::{self, ScopeVerdict};
use super::task_rules;
use super::tolerance::{
    Removable, Sorted, Tolerance, cut_since_base, dropped_since_base, failure_id, fixed_since_base,
    silent_since_base, vanished_since_base,
};
use crate::agent::sandbox::Worktree;
use crate::agent::sandbox::git::{GitError, GitRunner};
use crate::config::repo::{GoalSpec, RepoConfig};
use crate::model::TaskType;

/// What one iteration is checked against.
#[derive(Debug, Clone, Copy)]
pub struct VerifyContext<'a> {
    pub git: &'a GitRunner,
    /// The agent's worktree, its work committed: the artifacts are read
    /// from it.
    pub worktree: &'a Worktree,
    /// Where the setup and the goals run: a clean checkout of the
    /// worktree's head in the engine (never the agent's worktree, where
    /// build output the commit does not carry would be trusted).
    pub checkout: &'a Path,
    /// The home the setup and the goals share; `None`: one per command.
    pub home: Option<&'a Path>,
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
    /// Failures of required goals that were there at the base commit too
    /// and are not tolerated: they block like new ones.
    #[serde(default)]
    pub since_base: Vec<Failure>,
    /// Failures there at the base commit that the repository tolerates.
    #[serde(default)]
    pub tolerated: Vec<Failure>,
    /// Named tests that failed at the base commit and pass now.
    #[serde(default)]
    pub fixed_since_base: Vec<Failure>,
    /// The bug's fail-to-pass evidence, when the run needs one.
    #[serde(default)]
    pub reproduction: Option<Reproduction>,
    pub scope: ScopeVerdict,
    pub decision: Verdict,
}

impl IterationVerification {
    /// Objectively complete: the decision says so (no missing artifact, no
    /// blocking goal, no untolerated failure, a reproduction where one is
    /// required, no scope violation).
    pub fn complete(&self) -> bool {
        self.decision.decision == super::convergence::VerdictKind::Complete
    }
}

/// What the checks found at head, before it is judged.
#[derive(Debug, Clone)]
pub struct Evaluated {
    pub artifacts: Artifacts,
    pub missing_artifacts: Vec<ArtifactKind>,
    pub goals: Vec<GoalResult>,
}

/// Verification could not be carried out (not: the work failed it).
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("reading the worktree failed: {0}")]
    Git(#[from] GitError),
    #[error("the repository config is invalid: {0}")]
    Config(#[from] super::paths::PatternError),
}

/// Runs the checks of one iteration at head: artifacts, the setup, the
/// goals that apply (those that run a command only when the setup passed)
/// and the task type's built-in rule.
pub async fn evaluate(ctx: VerifyContext<'_>) -> Result<Evaluated, VerifyError> {
    let collected = artifacts::collect(ctx.git, ctx.worktree).await?;
    let artifacts = collected.artifacts;
    let missing_artifacts = artifacts::missing(ctx.task, &artifacts, &ctx.worktree.branch);
    let goal_ctx = GoalContext {
        worktree: ctx.checkout,
        mirror: Some(&ctx.worktree.mirror),
        home: ctx.home,
        artifacts: &artifacts,
        added_lines: &collected.added_lines,
        settings: ctx.settings,
    };
    let setup = goals::setup(goal_ctx, &ctx.repo.setup).await;
    let set_up = setup.as_ref().is_none_or(|s| s.passed);
    let mut goals: Vec<GoalResult> = setup.into_iter().collect();
    // Without what the setup installs, a command's failure says nothing
    // about the change: such goals are not run, and the setup's own
    // failure is the evidence.
    for (level, spec) in goals::applicable(ctx.repo, ctx.task, ctx.acceptance) {
        goals.push(match set_up || !goals::runs_a_command(&spec.kind) {
            true => goals::evaluate(goal_ctx, level, spec).await,
            false => goals::not_run(level, spec),
        });
    }
    let kinds = FileKinds::new(&ctx.repo.test_files)?;
    goals.extend(task_rules::builtin(ctx.repo, ctx.task, &kinds, &artifacts));
    Ok(Evaluated {
        artifacts,
        missing_artifacts,
        goals,
    })
}

/// Judges what [`evaluate`] found (with the reproduction, when the run
/// needs one) against the baseline and the scope, and advances the
/// convergence state.
pub fn conclude(
    ctx: VerifyContext<'_>,
    found: Evaluated,
    reproduction: Option<Reproduction>,
    state: &mut ConvergenceState,
    iteration: u32,
    check_id: CheckId,
) -> Result<IterationVerification, VerifyError> {
    let Evaluated {
        artifacts,
        missing_artifacts,
        mut goals,
    } = found;
    let tolerance = Tolerance::new(&ctx.repo.baseline)?;
    for goal in goals.iter_mut() {
        goal.tolerated = tolerance.excuses_goal(ctx.baseline, goal);
    }
    goals.extend(reproduction.as_ref().map(Reproduction::as_goal));
    let mut sorted = tolerance.sort(
        ctx.baseline,
        goals
            .iter()
            .filter(|g| g.required)
            .flat_map(|g| g.failures.iter()),
    );
    // A tolerated test that no longer runs (deleted, skipped) stays a
    // tolerated failure: listed for reviewers, and judged against the
    // issue's scope by the completion check like one still failing.
    let (excused, vanished) = tolerance.split(vanished_since_base(ctx.baseline, &goals));
    sorted.tolerated.extend(excused);
    let scope = scope::check(&ctx.repo.convergence, &artifacts, state.stage)?;
    let (mut reasons, mut blocking) = blocking(&missing_artifacts, &goals, &sorted, &scope);
    if !vanished.is_empty() {
        reasons.push(vanished_reason(&vanished));
        blocking.extend(vanished.iter().cloned());
    }
    no_longer_run(&ctx, &goals, &mut reasons, &mut blocking)?;
    let evidence = goals
        .iter()
        .filter(|g| !g.passed)
        .map(|g| format!("{}: {}", g.name(), g.evidence))
        .chain(scope.reasons())
        .chain((!sorted.since_base.is_empty()).then(|| since_base_reason(&sorted.since_base)))
        .collect();
    let observation = Observation {
        iteration,
        blocking,
        reasons,
        diff_hash: artifacts.diff_hash.clone(),
        evidence,
    };
    let decision = state.observe(observation, &ctx.repo.convergence, check_id);
    Ok(IterationVerification {
        iteration,
        fixed_since_base: fixed_since_base(ctx.baseline, &goals),
        failures: goals
            .iter()
            .flat_map(|g| g.failures.iter().cloned())
            .collect(),
        artifacts,
        missing_artifacts,
        goals,
        new_failures: sorted.new,
        since_base: sorted.since_base,
        tolerated: sorted.tolerated,
        reproduction,
        scope,
        decision,
    })
}

/// Everything that stands in the way of completion: readable reasons, and
/// the same as fingerprinted failures for the convergence controller.
fn blocking(
    missing: &[ArtifactKind],
    goals: &[GoalResult],
    sorted: &Sorted,
    scope: &ScopeVerdict,
) -> (Vec<String>, Vec<Failure>) {
    let mut reasons = Vec::new();
    let mut blocking = Vec::new();
    for kind in missing {
        reasons.push(format!("missing artifact: {}", kind.as_str()));
        blocking.push(Failure::closer(
            "artifacts",
            &format!("missing {}", kind.as_str()),
        ));
    }
    // A goal not run after a failed setup says nothing of its own: the
    // setup's failure is the reason and the fingerprint.
    for goal in goals
        .iter()
        .filter(|g| g.blocks() && !g.not_run_after_setup())
    {
        reasons.push(format!("{} failed: {}", goal.name(), goal.evidence));
        if goal.failures.is_empty() {
            // A check closer makes itself has no target: its evidence names it.
            let detail = match goal.target.is_empty() {
                true => &goal.evidence,
                false => &goal.target,
            };
            blocking.push(Failure::closer(&goal.goal_type, detail));
        }
    }
    if !sorted.new.is_empty() {
        reasons.push(format!(
            "{} new failure(s) against the baseline",
            sorted.new.len()
        ));
        blocking.extend(sorted.new.iter().cloned());
    }
    if !sorted.since_base.is_empty() {
        reasons.push(since_base_reason(&sorted.since_base));
        blocking.extend(sorted.since_base.iter().cloned());
    }
    reasons.extend(scope.reasons());
    blocking.extend(scope.failures());
    (reasons, blocking)
}

/// Why tests that failed at base and no longer run block.
fn vanished_reason(failures: &[Failure]) -> String {
    let ids: Vec<String> = failures.iter().map(failure_id).collect();
    format!(
        "no longer run: {} (failed on the base commit and is neither failing nor passing now: \
         deleted or skipped, or the test output names no passing tests)",
        ids.join(", ")
    )
}

/// Tests that passed at base and no longer run, except those the
/// repository lets go (`baseline.removed_tests`), and goals whose output
/// now goes past the cap (nothing can be told from it), as blocking
/// reasons.
fn no_longer_run(
    ctx: &VerifyContext<'_>,
    goals: &[GoalResult],
    reasons: &mut Vec<String>,
    blocking: &mut Vec<Failure>,
) -> Result<(), VerifyError> {
    let removable = Removable::new(&ctx.repo.baseline)?;
    let dropped: Vec<(String, String)> = dropped_since_base(ctx.baseline, goals)
        .into_iter()
        .filter(|(_, id)| !removable.allows(id))
        .collect();
    if !dropped.is_empty() {
        reasons.push(dropped_reason(&dropped));
        let closer = |(goal, id): &(String, String)| {
            Failure::closer("no longer run", &format!("{goal}: {id}"))
        };
        blocking.extend(dropped.iter().map(closer));
    }
    for goal in silent_since_base(ctx.baseline, goals) {
        reasons.push(format!(
            "{goal}: its output names no test now (it named the tests that passed on the base \
             commit), so closer cannot tell whether they still run; make the command name its \
             tests (jest --verbose, vitest --reporter=verbose, pytest -v, go test -v)"
        ));
        blocking.push(Failure::closer("output names no test", &goal));
    }
    for goal in cut_since_base(ctx.baseline, goals) {
        reasons.push(format!(
            "{goal}: its output went past the cap, so closer cannot tell whether the tests that \
             passed on the base commit still run; make it print less (it named them within the \
             cap on the base commit)"
        ));
        blocking.push(Failure::closer("output past the cap", &goal));
    }
    Ok(())
}

/// Tests shown in the reason before "and N more".
const DROPPED_SHOWN: usize = 20;

/// Why tests that passed at base and no longer run block, and how a
/// maintainer allows it when the issue asks for their removal.
fn dropped_reason(dropped: &[(String, String)]) -> String {
    let mut ids: Vec<&str> = dropped.iter().map(|(_, id)| id.as_str()).collect();
    let more = ids.len().saturating_sub(DROPPED_SHOWN);
    ids.truncate(DROPPED_SHOWN);
    let more = match more {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    format!(
        "no longer run: {}{more} (passed on the base commit and neither pass nor fail now: \
         deleted, skipped, or no longer collected; if the issue asks for their removal, list \
         them under `baseline.removed_tests` in .github/closer.yml, then `/closer retry`)",
        ids.join(", ")
    )
}

/// Why failures already there at base block, and how a maintainer tolerates
/// them when they are unrelated to the issue.
fn since_base_reason(failures: &[Failure]) -> String {
    let ids: Vec<String> = failures.iter().map(failure_id).collect();
    let unnamed = match failures.iter().any(|f| f.test.is_none()) {
        true => {
            "; a failure that names no test (output no test runner's parser reads, such as a \
             linter's) cannot be told from a new one and is never tolerated: fix it, or make its \
             goal `required: false`"
        }
        false => "",
    };
    format!(
        "failing since base: {} (they failed on the base commit too; if they are unrelated to \
         this issue, tolerate them in .github/closer.yml with `baseline: {{ tolerate: preexisting }}` \
         or list them under `baseline.known_failures` with `tolerate: listed`{unnamed})",
        ids.join(", ")
    )
}

/// Both halves at once, with no reproduction (the engine adds one between
/// them when the run needs it).
pub async fn verify_iteration(
    ctx: VerifyContext<'_>,
    state: &mut ConvergenceState,
    iteration: u32,
    check_id: CheckId,
) -> Result<IterationVerification, VerifyError> {
    let found = evaluate(ctx).await?;
    conclude(ctx, found, None, state, iteration, check_id)
}
