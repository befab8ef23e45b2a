//! Reconciliation: webhooks can be missed and a process can die between
//! writing a run and queueing its next step, so on start and on a timer the
//! engine compares the runs with the queue and with GitHub:
//! an open run with no live job gets its next step queued again (a run
//! waiting for its merge, or for an answer while it has a pull request,
//! gets the step for its pull request's end, merged or closed), and an
//! open run whose issue was closed (by a person: not by the merge of the
//! run's pull request), moved to another repository or deleted, or whose
//! trigger label, when the label started it, was removed is stopped; the
//! runs of a repository renamed since take its new name (`renamed.rs`). A
//! run whose steps failed for good [`MAX_DEAD_STEPS`] times in a row (each
//! after all its tries) is failed with a diagnosis instead of being queued
//! again. It never starts a run and never touches a run that has ended
//! (but for a rename, which gives ended runs the new name too). Every
//! replica reconciles: a step is queued only if none is live, and a run
//! failed only if it is still as the pass read it (decision 186).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::context::RunContext;
use super::failure::RunFailure;
use super::finish::{PullEnd, pull_end};
use super::review_round::asking_with_pull;
use super::triggers::moved;
use super::{Engine, EngineError, Step};
use crate::comment::same_label;
use crate::github::IssueState;
use crate::model::{RunId, RunState};
use crate::panic::Caught;
use crate::store::runs;

/// What one reconciliation pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reconciled {
    /// Runs whose next step was queued again.
    pub requeued: Vec<RunId>,
    /// Runs stopped because GitHub says so.
    pub stopped: Vec<RunId>,
    /// Runs failed because their steps kept failing for good.
    pub failed: Vec<RunId>,
}

/// How many times in a row a run's steps may fail for good (each after
/// all its tries) before reconciliation fails the run instead of queueing
/// the step again: a step that fails every time would otherwise run
/// every pass, for ever, and the run would say it is working.
pub const MAX_DEAD_STEPS: u32 = 3;

impl Engine {
    /// One pass over the open runs.
    pub async fn reconcile(&self) -> Result<Reconciled, EngineError> {
        let open = runs::in_states(self.runs.store().pool(), &RunState::OPEN).await?;
        let mut done = Reconciled::default();
        for run in open {
            let id = run.id.clone();
            match self.reconcile_run(&id).await {
                Ok(Some(Action::Requeued)) => done.requeued.push(id),
                Ok(Some(Action::Stopped)) => done.stopped.push(id),
                Ok(Some(Action::Failed)) => done.failed.push(id),
                Ok(None) => {}
                Err(e) => tracing::warn!(run = %id, error = %e, "reconciliation of a run failed"),
            }
        }
        Ok(done)
    }

    async fn reconcile_run(&self, id: &RunId) -> Result<Option<Action>, EngineError> {
        let Some(mut ctx) = self.context(id).await? else {
            return Ok(None);
        };
        match self.gone_on_github(&ctx).await {
            Ok(Some(why)) => {
                self.stop(&ctx.run, why).await?;
                return Ok(Some(Action::Stopped));
            }
            Ok(None) => {}
            // GitHub refuses to say, for good (a permission taken from the
            // App, the repository blocked): the run's dying steps below
            // still fail it, rather than leave it "working" for ever
            // (decision 258).
            Err(EngineError::GitHub(e)) if !e.is_transient() => {
                tracing::warn!(run = %id, error = %e, "reconciliation cannot read the run's issue");
            }
            Err(e) => return Err(e),
        }
        let run = &ctx.run;
        let Some(step) = self.missing_step(&ctx).await? else {
            return Ok(None);
        };
        if self.runs.has_live_step(&run.id).await? {
            return Ok(None);
        }
        let since = ctx.data.restarted_at.unwrap_or(0);
        let (dead, error) = self.runs.dead_steps(&run.id, since).await?;
        if dead >= MAX_DEAD_STEPS {
            let error = error.unwrap_or_else(|| "unknown".to_owned());
            let failure = RunFailure::StepsFailed { times: dead, error };
            // Another replica's pass may fail the run at the same time:
            // only the one whose write lands posts the diagnosis.
            // The failure is saved before it is reported, with a step of
            // the run queued to report what GitHub refused, with its own
            // tries.
            return match self.fail_if_unchanged(&mut ctx, failure).await? {
                true => Ok(Some(Action::Failed)),
                false => Ok(None),
            };
        }
        // Another replica's pass may queue it at the same time: one step.
        if !self.runs.enqueue_unless_live(&run.id, step).await? {
            return Ok(None);
        }
        tracing::info!(run = %run.id, ?step, "reconciliation: the run had no queued step");
        Ok(Some(Action::Requeued))
    }

    /// The step that carries the run forward, as if none were queued
    /// (`None`: the run waits for something else than a step).
    async fn missing_step(&self, ctx: &RunContext) -> Result<Option<Step>, EngineError> {
        let (run, data) = (&ctx.run, &ctx.data);
        // Waiting for an answer with a pull request: its end, if that
        // webhook was missed; or else the answer, as below.
        if asking_with_pull(run)
            && let Some(step) = self.pull_ended(ctx).await?
        {
            return Ok(Some(step));
        }
        Ok(match run.state {
            // Waiting for the merge: the pull request's end, likewise.
            RunState::Verifying if data.awaiting_merge => self.pull_ended(ctx).await?,
            // Its question was never posted (the step's job gave up):
            // the Iterate step resumes it (`ask.rs`).
            RunState::AwaitingResponse if data.question_posted != Some(run.iteration) => {
                Some(Step::Iterate)
            }
            // Waiting for a reply, and none is stored that a lost `resume`
            // step should have carried.
            RunState::AwaitingResponse if self.runs.answers(&run.id, data).await?.is_empty() => {
                None
            }
            state => Step::carrying(state),
        })
    }

    /// The step for what became of the pull request a run waits on, if
    /// it ended: merged ([`Step::Merged`]) or closed unmerged
    /// ([`Step::PullClosed`]); each re-checks when it runs.
    async fn pull_ended(&self, ctx: &RunContext) -> Result<Option<Step>, EngineError> {
        let end = pull_end(&ctx.client, ctx.repo(), &ctx.run).await?;
        Ok(end.map(|end| match end {
            PullEnd::Merged(_) => Step::Merged,
            PullEnd::Closed(_) => Step::PullClosed,
        }))
    }

    /// Why the run should stop according to GitHub, if it should.
    async fn gone_on_github(&self, ctx: &RunContext) -> Result<Option<&'static str>, EngineError> {
        let issue = match ctx.client.get_issue(ctx.repo(), ctx.issue()).await {
            Ok(issue) => issue,
            Err(e) if e.is_gone() => return Ok(Some("the issue is gone")),
            Err(e) => return Err(e.into()),
        };
        // GitHub followed a redirect: the repository was renamed (its runs
        // follow it, and this one goes on), or the issue moved within reach.
        if moved(&issue, ctx.repo(), ctx.issue()) {
            let installation = ctx.run.installation_id;
            return Ok(
                match self
                    .follow_rename(&ctx.client, installation, ctx.repo())
                    .await?
                {
                    Some(_) => None,
                    None => Some("the issue was moved to another repository"),
                },
            );
        }
        // Closed by closer itself: a review round of a verified run works
        // under the closed issue.
        let closed_by_us = ctx.data.review_round && ctx.data.issue_closed;
        // Or by the merge of the run's pull request (its `Closes #n`): the
        // run's next step (an iteration, `finish`, `merged`) ends it as done.
        if issue.state == IssueState::Closed
            && !closed_by_us
            && !matches!(
                pull_end(&ctx.client, ctx.repo(), &ctx.run).await?,
                Some(PullEnd::Merged(_))
            )
        {
            return Ok(Some("the issue was closed"));
        }
        // A review round works for the review, not the label: a label
        // taken off after the run was done (which stopped nothing) does
        // not stop it; one taken off during the round does, at once.
        let trigger = &ctx.config.trigger_label;
        let for_label = ctx.data.by_label && !ctx.data.review_round;
        if for_label && !issue.labels.iter().any(|l| same_label(l, trigger)) {
            return Ok(Some("the trigger label was removed"));
        }
        Ok(None)
    }

    /// Reconciles now and then every `every`, until `shutdown` turns true.
    pub async fn reconcile_forever(
        self: Arc<Self>,
        every: Duration,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            // A panic costs this pass, not reconciliation for good.
            match Caught(Box::pin(self.reconcile())).await {
                Ok(Ok(r)) if r == Reconciled::default() => {}
                Ok(Ok(r)) => tracing::info!(
                    requeued = r.requeued.len(),
                    stopped = r.stopped.len(),
                    failed = r.failed.len(),
                    "reconciled runs"
                ),
                Ok(Err(e)) => tracing::warn!(error = %e, "reconciliation failed"),
                Err(panic) => tracing::error!(%panic, "reconciliation panicked"),
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = shutdown.changed() => return,
            }
        }
    }
}

enum Action {
    Requeued,
    Stopped,
    Failed,
}
