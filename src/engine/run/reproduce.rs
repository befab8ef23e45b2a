//! The reproduction of a bug, run by the engine because it needs the
//! sandbox: the head's changed test files are laid over a clean checkout of
//! the base commit, the repository's setup runs there, then the
//! `tests_pass` goals; when the change touched no test file, the baseline
//! already is that run. What counts as a reproduction is
//! `engine::reproduction`'s to say.

use super::context::RunContext;
use super::iterate::Iteration;
use super::{Engine, EngineError, other};
use crate::agent::sandbox::purpose::Purpose;
use crate::agent::sandbox::{SandboxError, Worktree};
use crate::config::repo::{GoalSpec, ReproductionMode};
use crate::engine::artifacts;
use crate::engine::baseline::Baseline;
use crate::engine::file_kinds::FileKinds;
use crate::engine::goals::{self, GoalLevel, GoalResult};
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
        let changed = reproduction::changed_tests(&kinds, &found.artifacts);
        let at_base = match changed.is_empty() {
            true => baseline.goals.clone(),
            false => match self
                .tests_on_base(ctx, head, found, &changed, &tests)
                .await?
            {
                Ok(results) => results,
                Err(setup) => {
                    let note = format!(
                        "the tests could not be run on the base commit's code: the setup failed \
                         there ({setup})"
                    );
                    return Ok(Some(Reproduction {
                        required,
                        fail_to_pass: Vec::new(),
                        note,
                    }));
                }
            },
        };
        Ok(Some(reproduction::conclude(
            required,
            &at_base,
            &found.goals,
        )))
    }

    /// Runs `tests` on a clean checkout of the base commit with the head
    /// commit's `changed` test files copied in (as `found` read it), after
    /// the setup; `Err` with the setup's evidence when the setup failed
    /// there.
    async fn tests_on_base(
        &self,
        ctx: &RunContext,
        head: &Worktree,
        found: &Evaluated,
        changed: &[String],
        tests: &[&GoalSpec],
    ) -> Result<Result<Vec<GoalResult>, String>, EngineError> {
        let run_id = ctx.run.id.as_str();
        let base = self
            .checkout(head, run_id, &head.base_commit, Purpose::Reproduction)
            .await?;
        let results = async {
            for path in changed {
                self.copy_test(head, &found.artifacts.head, path, &base.worktree)
                    .await?;
            }
            let git = self.workspace.sandbox().git();
            let collected = artifacts::collect(git, &base.worktree)
                .await
                .map_err(other)?;
            let goal_ctx = base.goal_context(
                &collected.artifacts,
                &collected.added_lines,
                self.checks.goals(),
            );
            let setup = goals::setup(goal_ctx, &ctx.config.setup).await;
            if let Some(failed) = setup.filter(|s| !s.passed) {
                return Ok(Err(failed.evidence));
            }
            let mut results = Vec::new();
            for spec in tests {
                results.push(goals::evaluate(goal_ctx, GoalLevel::TaskType, spec).await);
            }
            Ok::<_, EngineError>(Ok(results))
        }
        .await;
        self.release(base, run_id).await;
        results
    }
}

impl Engine {
    /// Copies one test file as `commit` has it into the base checkout. A
    /// path the commit has no file at (deleted, a symbolic link) is
    /// skipped; one whose way in the checkout passes a symbolic link is
    /// refused.
    async fn copy_test(
        &self,
        head: &Worktree,
        commit: &str,
        path: &str,
        base: &Worktree,
    ) -> Result<(), EngineError> {
        if !reproduction::no_link_beneath(&base.path, path) {
            return Err(other(format!(
                "refusing to copy {path}: the base checkout has a symbolic link on its way"
            )));
        }
        let sandbox = self.workspace.sandbox();
        match sandbox
            .copy_from_commit(head, commit, path, &base.path)
            .await
        {
            Ok(_) => Ok(()),
            Err(SandboxError::BaseFile(why)) => {
                tracing::debug!(path, why, "test file not copied to the reproduction");
                Ok(())
            }
            Err(e) => Err(other(e)),
        }
    }
}
