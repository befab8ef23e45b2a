//! Asking the author and resuming on the reply: what an iteration whose agent
//! asked something does (label `awaiting-response`, one question comment, the
//! status), written so that a step which failed half-way resumes where it
//! stopped when its job is retried; and the `resume` step a reply queues
//! (`commands.rs` stores the reply).

use super::context::RunContext;
use super::{Engine, EngineError, Step};
use crate::events::GHOST_LOGIN;
use crate::model::RunState;
use crate::store::messages::Standing;

impl Engine {
    /// Asks the author the agent's questions (the run is already
    /// `awaiting_response`): label, one question comment, status. A step
    /// that failed before the question was recorded (GitHub answered 5xx)
    /// resumes here when its job is retried; a status edit that failed after
    /// it is redone by the run's next step.
    pub(super) async fn ask(
        &self,
        ctx: &mut RunContext,
        questions: &[String],
    ) -> Result<(), EngineError> {
        let n = ctx.run.iteration;
        self.status.set_awaiting_label(ctx, true).await?;
        if ctx.data.question_posted != Some(n) {
            self.refresh_author(ctx).await?;
            let body = crate::comment::question_comment(&ctx.data.issue_author, questions);
            let question = self
                .status
                .post_once_for_run(ctx, &format!("question:{n}"), &body)
                .await?;
            // A comment written before the question was on the issue (while
            // its post failed and waited for a retry, or was slow) does not
            // answer it, whenever its delivery comes (`answers_question`).
            ctx.data.question_comment = Some(i64::try_from(question.0).unwrap_or(i64::MAX));
            ctx.data.question_posted = Some(n);
            self.runs.save(ctx).await?;
        }
        // An answer stored while the question waited to be posted: `resume`
        // did nothing then. Asked on every try, as a retry of this step
        // after the save must still resume the run.
        if !self.runs.answers(&ctx.run.id, &ctx.data).await?.is_empty() {
            self.runs.enqueue(&ctx.run.id, Step::Resume).await?;
        }
        self.status.publish(ctx).await
    }

    /// The issue's author's login as GitHub gives it now, kept for the
    /// question's mention and the status line: an author may have renamed
    /// themselves since the run started, and a mention of the old login
    /// would reach whoever registered it since (decision 200). A deleted
    /// account (`ghost`) keeps the login the run had.
    async fn refresh_author(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        let author = ctx.client.get_issue(ctx.repo(), ctx.issue()).await?.author;
        if author.login != GHOST_LOGIN && author.login != ctx.data.issue_author {
            ctx.data.issue_author = author.login;
            self.runs.save(ctx).await?;
        }
        Ok(())
    }

    /// An `awaiting_response` run whose question was not posted yet (its step
    /// failed after the state was saved): ask it now, from the iteration's
    /// stored judgment.
    pub(super) async fn resume_question(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        let Some(record) = self.runs.record_of(&ctx.run.id, ctx.run.iteration).await? else {
            return Err(EngineError::Other(format!(
                "run {} awaits a response but iteration {} has no stored judgment",
                ctx.run.id, ctx.run.iteration
            )));
        };
        self.ask(ctx, &record.judgment.questions).await
    }

    /// The `resume` step: a reply is stored for the run (one written before
    /// the question was posted does not count); it loses the
    /// label, leaves `awaiting_response`, and the next iteration is queued
    /// (its prompt carries the reply), and the status says so. The label
    /// goes first: a retry of this step still finds the run awaiting, and
    /// takes it off then.
    pub(super) async fn resume(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        // The question is not on the issue yet (its post failed and waits
        // for a retry): a reply now did not answer it. `ask` resumes the
        // run, once the question is posted, for a reply after it.
        if ctx.data.question_posted != Some(ctx.run.iteration) {
            return Ok(());
        }
        let answers = self.runs.answers(&ctx.run.id, &ctx.data).await?;
        if answers.is_empty() {
            return Ok(());
        }
        // The author's own answer opens their window to add to it; a
        // maintainer's does not (the author may not amend it).
        let by_author = answers.iter().any(|m| m.standing == Some(Standing::Author));
        self.status.set_awaiting_label(ctx, false).await?;
        ctx.run.state = RunState::Running;
        ctx.data.answered_for = by_author.then_some(ctx.run.iteration + 1);
        self.runs.save(ctx).await?;
        self.runs.enqueue(&ctx.run.id, Step::Iterate).await?;
        // No longer "waiting for an answer": the iteration may take a while
        // to show progress of its own.
        self.status.publish(ctx).await
    }
}
