//! The reproduction of a bug, run by the engine because it needs the
//! sandbox: the test files the head commit changed are laid over a clean
//! checkout of the base commit (byte for byte, and only as the commit holds
//! them), the repository's setup runs there, then the `tests_pass` goals;
//! when the change touched no test file the commit still holds, the
//! baseline already is that run. What counts as a reproduction is
//! `engine::reproduction`'s to say.

use super::context::RunContext;
use super::iterate::Iteration;
use super::{Engine, EngineError, other};
use crate::agent::sandbox::Worktree;
use crate::agent::sandbox::purpose::Purpose;
use crate::config::repo::{GoalSpec, ReproductionMode};
use crate::engine::artifacts;
use crate::engine::baseline::Baseline;
use crate::engine::file_kinds::FileKinds;
use crate::engine::goals::{self, GoalLevel, GoalResult, SETUP};
use crate::engine::reproduction::{self, Reproduction};
use crate::engine::verify::Evaluated;

/// A test file the head commit holds: its path and blob.
struct CommittedTest {
    path: String,
    blob: String,
}

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
        // A run restarted after its pull request was merged works from a
        // base that holds the fix: no test can fail there for the bug the
        // merged work reproduced, so one is looked for but not required
        // (decision 257).
        let required = mode == ReproductionMode::Required && !ctx.data.after_merge;
        let none = |note: String| {
            Ok(Some(Reproduction {
                required,
                fail_to_pass: Vec::new(),
                note,
            }))
        };
        let tests = reproduction::test_goals(&ctx.config);
        if tests.is_empty() {
            return none("no `tests_pass` goal to run the tests with".to_owned());
        }
        if found
            .goals
            .iter()
            .any(|g| g.goal_type == SETUP && !g.passed)
        {
            return none("not looked for: the setup failed at head".to_owned());
        }
        let committed = self.committed_tests(ctx, iteration, found).await?;
        let at_base = match committed.is_empty() {
            true => baseline.goals.clone(),
            false => match self
                .tests_on_base(ctx, &iteration.worktree, &committed, &tests)
                .await?
            {
                Ok(results) => results,
                Err(setup) => {
                    return none(format!(
                        "the tests could not be run on the base commit's code: the setup failed \
                         there ({setup})"
                    ));
                }
            },
        };
        Ok(Some(reproduction::conclude(
            required,
            &at_base,
            &found.goals,
        )))
    }

    /// The test files the change committed that the head commit still
    /// holds as regular files (a deleted test, or one that became a link,
    /// is not carried over).
    async fn committed_tests(
        &self,
        ctx: &RunContext,
        iteration: &Iteration,
        found: &Evaluated,
    ) -> Result<Vec<CommittedTest>, EngineError> {
        let kinds = FileKinds::new(&ctx.config.test_files).map_err(other)?;
        let sandbox = self.workspace.sandbox();
        let head = &found.artifacts.head;
        let mut committed = Vec::new();
        for path in reproduction::changed_tests(&kinds, &found.artifacts) {
            let blob = sandbox
                .committed_blob(&iteration.worktree, head, &path)
                .await
                .map_err(other)?;
            if let Some(blob) = blob {
                committed.push(CommittedTest { path, blob });
            }
        }
        Ok(committed)
    }

    /// Runs `tests` on a clean checkout of the base commit with the
    /// `committed` test files copied in from the run's worktree (each only
    /// when it is exactly the commit's blob), after the setup; `Err` with
    /// the setup's evidence when the setup failed there.
    async fn tests_on_base(
        &self,
        ctx: &RunContext,
        head: &Worktree,
        committed: &[CommittedTest],
        tests: &[&GoalSpec],
    ) -> Result<Result<Vec<GoalResult>, String>, EngineError> {
        let run_id = ctx.run.id.as_str();
        let base = self
            .checkout(head, run_id, &head.base_commit, Purpose::Reproduction)
            .await?;
        let results = async {
            let sandbox = self.workspace.sandbox();
            for test in committed {
                let copied = sandbox
                    .copy_committed(head, &test.path, &test.blob, &base.worktree.path)
                    .await
                    .map_err(other)?;
                if !copied {
                    tracing::warn!(run = %run_id, path = %test.path,
                        "test file not copied to the reproduction: not the commit's, or a link on its way");
                }
            }
            let collected = artifacts::collect(sandbox.git(), &base.worktree)
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
