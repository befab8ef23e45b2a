//! The reproduction of a bug, run by the engine because it needs the
//! sandbox: the head's changed test files are laid over a clean worktree of
//! the base commit and the `tests_pass` goals run there; when the change
//! touched no test file, the baseline already is that run. What counts as
//! a reproduction is `engine::reproduction`'s to say.

use std::path::Path;

use super::context::RunContext;
use super::iterate::Iteration;
use super::{Engine, EngineError, other};
use crate::agent::sandbox::Worktree;
use crate::config::repo::{GoalSpec, ReproductionMode};
use crate::engine::artifacts;
use crate::engine::baseline::Baseline;
use crate::engine::file_kinds::FileKinds;
use crate::engine::goals::{self, GoalContext, GoalLevel, GoalResult};
use crate::engine::reproduction::{self, Reproduction};
use crate::engine::verify::Evaluated;

impl Engine {
    /// The reproduction, when the run needs one.
    pub(super) async fn reproduce(
        &self,
        ctx: &RunContext,
        iteration: &Iteration,
        baseline: &Baseline,
        found: &Evaluated,
    ) -> Result<Option<Reproduction>, EngineError> {
        let Some(mode) = reproduction::mode(&ctx.config, iteration.task) else {
            return Ok(None);
        };
        let required = mode == ReproductionMode::Required;
        let tests = reproduction::test_goals(&ctx.config);
        if tests.is_empty() {
            let note = "no `tests_pass` goal to run the tests with".to_owned();
            return Ok(Some(Reproduction {
                required,
                fail_to_pass: Vec::new(),
                note,
            }));
        }
        let kinds = FileKinds::new(&ctx.config.test_files).map_err(other)?;
        let head = &iteration.worktree;
        let changed = reproduction::changed_tests(&kinds, &found.artifacts, &head.path);
        let at_base = match changed.is_empty() {
            true => baseline.goals.clone(),
            false => self.tests_on_base(ctx, head, &changed, &tests).await?,
        };
        Ok(Some(reproduction::conclude(
            required,
            &at_base,
            &found.goals,
        )))
    }

    /// Runs `tests` on a clean worktree of the base commit with the head's
    /// `changed` test files copied in.
    async fn tests_on_base(
        &self,
        ctx: &RunContext,
        head: &Worktree,
        changed: &[String],
        tests: &[&GoalSpec],
    ) -> Result<Vec<GoalResult>, EngineError> {
        let sandbox = self.workspace.sandbox();
        let run_id = ctx.run.id.as_str();
        let base = sandbox
            .baseline_worktree(head, run_id)
            .await
            .map_err(other)?;
        let results = async {
            for path in changed {
                copy_into(&head.path, &base.path, path).await?;
            }
            let collected = artifacts::collect(sandbox.git(), &base)
                .await
                .map_err(other)?;
            let goal_ctx = GoalContext {
                worktree: &base.path,
                mirror: Some(&base.mirror),
                artifacts: &collected.artifacts,
                added_lines: &collected.added_lines,
                settings: self.checks.goals(),
            };
            let mut results = Vec::new();
            for spec in tests {
                results.push(goals::evaluate(goal_ctx, GoalLevel::TaskType, spec).await);
            }
            Ok::<_, EngineError>(results)
        }
        .await;
        if let Err(e) = sandbox.remove(&base, run_id).await {
            tracing::warn!(run = %run_id, error = %e, "reproduction worktree not removed");
        }
        results
    }
}

/// Copies one repository-relative file from `from` to `to`; a path that
/// leaves the worktree, is not a regular file or passes through a symbolic
/// link on either side is refused (`reproduction::regular_file_beneath`).
async fn copy_into(from: &Path, to: &Path, path: &str) -> Result<(), EngineError> {
    if !reproduction::regular_file_beneath(from, path) {
        return Err(other(format!(
            "refusing to copy {path}: not a regular file inside the worktree"
        )));
    }
    if !reproduction::no_link_beneath(to, path) {
        return Err(other(format!(
            "refusing to copy {path}: the base worktree has a symbolic link on its way"
        )));
    }
    let (source, target) = (from.join(path), to.join(path));
    if let Some(parent) = target.parent() {
        tokio::fs::create_dir_all(parent).await.map_err(other)?;
    }
    tokio::fs::copy(&source, &target).await.map_err(other)?;
    Ok(())
}
