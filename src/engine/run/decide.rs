//! What follows a judged iteration: ask, finish, fail, or iterate again.

use super::context::RunContext;
use super::data::IterationRecord;
use super::failure::RunFailure;
use super::{Engine, EngineError, Step};
use crate::engine::convergence::VerdictKind;
use crate::engine::verify::IterationVerification;
use crate::model::{Decision, RunState, Stage};

impl Engine {
    pub(super) async fn decide(
        &self,
        ctx: &mut RunContext,
        record: IterationRecord,
        verification: &IterationVerification,
    ) -> Result<(), EngineError> {
        // The author's window to add to an answer (decision 214) closes
        // with this judgment, unless the run goes on to the next prompt.
        let answered_for = ctx.data.answered_for.take();
        // A question with no iteration left to use its answer is not asked:
        // the run fails at its limit, the question in its diagnosis.
        if record.judgment.decision == Decision::AwaitingResponse
            && let Some(limit) = self.no_iteration_left(ctx)
        {
            return self.fail_unless_pull_ended(ctx, limit).await;
        }
        if record.judgment.decision == Decision::AwaitingResponse {
            ctx.run.state = RunState::AwaitingResponse;
            // Taken with the save that decides to ask, once: a retried
            // `ask` (its question's answer lost) may run after the answer
            // came, which must not count as written before the question.
            ctx.data.asked_over = self.runs.unused_replies(&ctx.run.id).await?;
            self.runs.save(ctx).await?;
            return self.ask(ctx, &record.judgment.questions).await;
        }
        if record.complete {
            ctx.run.state = RunState::Verifying;
            self.runs.save(ctx).await?;
            self.runs.enqueue(&ctx.run.id, Step::Finish).await?;
            return self.status.publish(ctx).await;
        }
        if verification.decision.decision == VerdictKind::Failed
            || ctx.data.convergence.stage == Stage::Stopped
        {
            return self
                .fail_unless_pull_ended(ctx, RunFailure::ConvergenceStopped)
                .await;
        }
        if ctx.run.iteration >= ctx.run.max_iterations {
            let max = ctx.run.max_iterations;
            let failure = RunFailure::IterationLimit { max };
            return self.fail_unless_pull_ended(ctx, failure).await;
        }
        ctx.data.answered_for = answered_for;
        self.runs.save(ctx).await?;
        self.runs.enqueue(&ctx.run.id, Step::Iterate).await?;
        self.status.publish(ctx).await
    }

    /// Why the run's next iteration would fail before it starts, if it
    /// would: its budget or its iterations are spent. Not `limits` (in
    /// `iterate.rs`): the iteration just judged is not finished yet when it
    /// is decided on, and `limits` takes such an iteration for an
    /// interrupted one, which may run again.
    fn no_iteration_left(&self, ctx: &RunContext) -> Option<RunFailure> {
        let max = ctx.run.max_iterations;
        self.budget
            .exhausted(ctx)
            .or((ctx.run.iteration >= max).then_some(RunFailure::IterationLimit { max }))
    }
}
