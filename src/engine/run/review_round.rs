//! The run's steps after its pull request is open: a review round (more
//! iterations on the same branch for what reviewers and requests asked),
//! the verification again after a person pushed to the branch, and the end
//! of the run when the pull request is closed without a merge; and the
//! branch followed before each iteration, so commits people push are kept.
//!
//! A run is at rest here when it is done, or verified and waiting for its
//! merge; a run that failed or was stopped gets one hint on its pull
//! request (how to start it again) instead of a round, for what no prompt
//! carried, and so does one
//! whose budget is spent (how to raise it); a step that finds it
//! anywhere else does nothing, and a step queued before the latest round
//! started (that round took what it was queued for) only writes the
//! status (a round that is
//! under way asks for the next one when it ends, see `finish.rs`). A run
//! with a pull request waiting for the answer to its question is not at
//! work either: the end of its pull request, closed here or merged
//! (`finish.rs`), ends the run.

use super::context::RunContext;
use super::failure::RunFailure;
use super::{Engine, EngineError, Step};
use crate::agent::sandbox::Worktree;
use crate::agent::sandbox::branch::BranchSync;
use crate::github::PullState;
use crate::model::{IssueNumber, Outcome, Run, RunState};
use crate::store::messages::{MessageRow, Standing};

impl Engine {
    /// Whether the run is at rest with its pull request open on GitHub.
    async fn open_pull_at_rest(
        &self,
        ctx: &RunContext,
    ) -> Result<Option<IssueNumber>, EngineError> {
        let at_rest = match ctx.run.state {
            RunState::Done => true,
            RunState::Verifying => ctx.data.awaiting_merge,
            _ => false,
        };
        let Some(number) = ctx.run.pull_request.filter(|_| at_rest) else {
            return Ok(None);
        };
        let pull = ctx.client.get_pull(ctx.repo(), number).await?;
        Ok((pull.state == PullState::Open).then_some(number))
    }

    /// The `review` step: when something on the pull request is left to
    /// address (an open thread, a review's summary, a request), the run
    /// goes back to work on its branch for up to `max_iterations` more
    /// iterations; its phase label stays as it is.
    ///
    /// `job` is the step's queue job. A round saves the newest job at its
    /// start, and a step queued up to it only writes the status: the round
    /// took what it was queued for (it is the step that started the round,
    /// run again after being sent back at its status write, or another
    /// delivery's step for the same review). Otherwise it would find the
    /// run at work, or ended by the round, and take the review for a new
    /// one. (A round's iteration whose queueing failed is queued by
    /// reconciliation, as any step's.)
    pub(super) async fn review_round(
        &self,
        ctx: &mut RunContext,
        job: i64,
    ) -> Result<(), EngineError> {
        if ctx.data.round_covers.is_some_and(|newest| job <= newest) {
            return self.status.publish(ctx).await;
        }
        let Some(pull) = self.open_pull_at_rest(ctx).await? else {
            return self.hint_if_ended(ctx).await;
        };
        // Read before what was asked: a delivery keeps its words, then
        // queues its step, so a step queued up to here finds them below.
        let newest = self.runs.newest_job().await?;
        let asked = self
            .runs
            .messages(&ctx.run.id)
            .await?
            .iter()
            .any(asks_for_work);
        let threads = self.open_threads(ctx, pull).await?;
        if !asked && threads.is_empty() {
            if ctx.data.review_round {
                ctx.data.review_round = false;
                self.runs.save(ctx).await?;
            }
            return Ok(());
        }
        if let Some(spent) = self.budget.exhausted(ctx) {
            return self.hint_budget_spent(ctx, pull, &spent).await;
        }
        tracing::info!(run = %ctx.run.id, threads = threads.len(), asked, "review round");
        ctx.data.review_round = true;
        ctx.data.awaiting_merge = false;
        ctx.run.state = RunState::Running;
        ctx.run.outcome = None;
        ctx.run.max_iterations = ctx.run.iteration + ctx.config.completion.max_iterations;
        ctx.data.round_covers = Some(newest);
        self.runs.save(ctx).await?;
        // Queued before the status write, which may send this step back.
        self.runs.enqueue(&ctx.run.id, Step::Iterate).await?;
        self.status.publish(ctx).await
    }

    /// A person reviewed or asked on the pull request of a run that failed
    /// or was stopped: nothing will work on it, so one comment there (per
    /// life of the run) says how to start the run again. The step is queued
    /// only for people who may steer the run (`review.rs`).
    async fn hint_if_ended(&self, ctx: &RunContext) -> Result<(), EngineError> {
        let state = match ctx.run.state {
            RunState::Failed => "failed",
            RunState::Stopped => "been stopped",
            _ => return Ok(()),
        };
        let Some(pull) = ctx.run.pull_request else {
            return Ok(());
        };
        if ctx.client.get_pull(ctx.repo(), pull).await?.state != PullState::Open {
            return Ok(());
        }
        if !self.asked_since_last_prompt(ctx, pull).await? {
            return Ok(());
        }
        let key = format!("{}:ended-{}", ctx.run.id, ctx.run.generation);
        let body = crate::comment::ended_run_hint(ctx.issue().0, state);
        self.status
            .post_once_marked(&ctx.client, ctx.repo(), pull, &key, &body)
            .await?;
        Ok(())
    }

    /// Whether something on the pull request was asked that no prompt
    /// carried: a review's or comment's words not yet used, or a thread
    /// with a comment newer than the prompts saw. A step of a review its
    /// failed round already took (the review and each of its threads
    /// queue one, and one may come after the round started) finds nothing.
    async fn asked_since_last_prompt(
        &self,
        ctx: &RunContext,
        pull: IssueNumber,
    ) -> Result<bool, EngineError> {
        let messages = self.runs.messages(&ctx.run.id).await?;
        if messages.iter().any(asks_for_work) {
            return Ok(true);
        }
        let seen = &ctx.data.threads_seen;
        Ok(self
            .open_threads(ctx, pull)
            .await?
            .iter()
            .any(|t| seen.get(&t.root).is_none_or(|s| t.newest > *s)))
    }

    /// A review asks for more from a run that spent its budget: the round
    /// would fail on it at once (and take back a verified run's closed
    /// issue), so the run stays at rest and the pull request gets one
    /// comment saying why (once per life of the run and iteration, so a
    /// round a raised budget allows may end with a hint of its own). What
    /// was asked stays unused for a round the budget allows.
    async fn hint_budget_spent(
        &self,
        ctx: &RunContext,
        pull: IssueNumber,
        spent: &RunFailure,
    ) -> Result<(), EngineError> {
        let budget = match spent.outcome() {
            Outcome::Failed(why) | Outcome::Stopped(why) => why,
            Outcome::Completed => "its budget".to_owned(),
        };
        tracing::info!(run = %ctx.run.id, %budget, "review round refused: the budget is spent");
        let key = format!(
            "{}:budget-{}-{}",
            ctx.run.id, ctx.run.generation, ctx.run.iteration
        );
        let body = crate::comment::budget_spent_hint(&budget);
        self.status
            .post_once_marked(&ctx.client, ctx.repo(), pull, &key, &body)
            .await?;
        Ok(())
    }

    /// After the run ended at rest: another round when more was asked
    /// meanwhile (several reviews during one round make one more round).
    pub(super) async fn next_round_if_asked(&self, ctx: &RunContext) -> Result<(), EngineError> {
        let asked = self
            .runs
            .messages(&ctx.run.id)
            .await?
            .iter()
            .any(asks_for_work);
        if ctx.data.review_round || asked {
            self.runs.enqueue(&ctx.run.id, Step::Review).await?;
        }
        Ok(())
    }

    /// Before an iteration: continue from the branch's head on GitHub, so
    /// commits people pushed are kept and commits they took off stay off;
    /// what happened is told to the agent.
    pub(super) async fn follow_branch(
        &self,
        ctx: &mut RunContext,
        worktree: &Worktree,
    ) -> Result<(), EngineError> {
        let sync = self.workspace.follow_branch(ctx, worktree).await?;
        let head = ctx.data.branch_head.clone().unwrap_or_default();
        let short = crate::comment::markdown::head(&head, 12);
        let note = match sync {
            BranchSync::Absent | BranchSync::UpToDate | BranchSync::MergedLeft => return Ok(()),
            BranchSync::FastForwarded => format!(
                "Somebody pushed to the branch (now at {short}); you continue from their commits: keep them."
            ),
            BranchSync::Rebased => format!(
                "Somebody pushed to the branch (now at {short}) while you worked; your earlier commits were rebased onto theirs: keep both."
            ),
            BranchSync::Redone => format!(
                "Somebody pushed to the branch (now at {short}) while you worked, and your earlier commits did not apply on theirs: they were dropped. Redo your change on top of theirs."
            ),
            BranchSync::Deleted => "Somebody deleted the branch on GitHub, for a fresh start: your earlier commits are gone, and you start again from the commit the run started from. Do the work anew; do not try to bring the old commits back.".to_owned(),
            BranchSync::Rewritten => format!(
                "Somebody reset or rewrote the branch (now at {short}): commits that were on it are gone, on purpose. Continue from the branch as it is now, and do not bring back what they took off unless you are asked to; your commits not yet pushed, if any, were rebased onto it."
            ),
        };
        tracing::info!(run = %ctx.run.id, ?sync, "the branch moved on GitHub");
        ctx.data.branch_note = Some(note);
        self.runs.save(ctx).await
    }

    /// The push found the branch moved since closer last looked: take the
    /// new commits in and iterate again (the next iteration verifies the
    /// combination before anything is pushed).
    pub(super) async fn branch_moved(
        &self,
        ctx: &mut RunContext,
        worktree: &Worktree,
    ) -> Result<(), EngineError> {
        self.follow_branch(ctx, worktree).await?;
        ctx.run.state = RunState::Running;
        self.runs.save(ctx).await?;
        // Queued before the status write, which may send this step back.
        self.runs.enqueue(&ctx.run.id, Step::Iterate).await?;
        self.status.publish(ctx).await
    }

    /// The `reverify` step: a person pushed to the branch; the verification
    /// runs at the new head (no agent), and the pull request's table shows
    /// it. The status comment on the issue keeps what closer verified.
    pub(super) async fn reverify(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        if self.open_pull_at_rest(ctx).await?.is_none() {
            return Ok(());
        }
        let agent_name = ctx.config.agent.clone();
        let (Some(llm), Some(agent)) = (self.checks.llm(), self.agents.get(&agent_name)) else {
            return Ok(());
        };
        let mut iteration = self.set_up(ctx, llm, agent).await?;
        iteration.n = ctx.run.iteration;
        // What happened to the branch is told to the next round's agent.
        self.follow_branch(ctx, &iteration.worktree).await?;
        // The run's convergence history is about the agent's iterations:
        // this check is not one of them.
        let mut state = ctx.data.convergence.clone();
        let verification = self.check_head(ctx, &iteration, &mut state).await?;
        if verification.complete() {
            ctx.data.verified_head = Some(verification.artifacts.head.clone());
        }
        ctx.data.reverified = Some(verification);
        self.runs.save(ctx).await?;
        self.update_pull_request(ctx).await
    }

    /// The `pull_closed` step: the pull request was closed without a merge.
    /// Still closed when read (not opened again, nor merged since), the
    /// run fails (`closer:failed` instead of the phase label), the
    /// issue is open again if closer had closed it, and one comment says
    /// so and how to start again.
    pub(super) async fn pull_closed(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        let at_rest = match ctx.run.state {
            RunState::Done => true,
            RunState::Verifying => ctx.data.awaiting_merge,
            _ => asking_with_pull(&ctx.run),
        };
        let Some(number) = ctx.run.pull_request.filter(|_| at_rest) else {
            return Ok(());
        };
        let pull = ctx.client.get_pull(ctx.repo(), number).await?;
        // Merged since the close (closed, opened again and merged): not a
        // rejection. The merge ends the run as its own step does (decision
        // 238); a done run stays done.
        if pull.merged {
            return self.merged(ctx).await;
        }
        if pull.state == PullState::Open {
            return Ok(());
        }
        ctx.data.awaiting_merge = false;
        ctx.data.review_round = false;
        self.fail(ctx, RunFailure::PullRequestClosed { number: number.0 })
            .await
    }
}

/// Whether the run waits for the answer to its question while it has a
/// pull request (a review round's, or one a restart kept open): no step of
/// it is at work, so its pull request's end is acted on at once.
pub(super) fn asking_with_pull(run: &Run) -> bool {
    run.state == RunState::AwaitingResponse && run.pull_request.is_some()
}

/// Whether the stored message `m` asks for work no prompt did yet. The
/// issue's author's words never do by themselves: the author answers the
/// run's question and may add to the answer until the next judgment
/// (decision 214); what they wrote after, while the answered iteration
/// worked and was then verified, starts no round at rest (decision 228).
fn asks_for_work(m: &MessageRow) -> bool {
    m.used_in.is_none() && m.standing != Some(Standing::Author)
}
