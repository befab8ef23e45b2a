//! The end of a verified run: push the branch, open (or update) the pull
//! request that `Closes #n`, `phase:review`, then close the issue as
//! completed with `phase:complete` — or, with `close_on: merged`, wait for
//! the merge. A `read_info`/`report` run posts its answer instead and closes
//! the issue; under `close_on: merged` it leaves the issue open for a person
//! to close (the repository asked for a person's word before an issue
//! closes, and an answer has no pull request to give it on).
//!
//! The pull request is found again by its head branch, so a repeated step
//! never opens a second one. Nothing is pushed but the commit verification
//! checked, from a clean worktree (`agent::sandbox::verified`). The push has
//! a lease on the branch's head as closer last saw it: when a person pushed
//! meanwhile, their commits are taken in and the run iterates again instead
//! (`review_round.rs`). A change to a workflow file, which GitHub never
//! takes from the App, or a push the repository's rules decline, fails the
//! run with GitHub's reason instead of retrying a push that cannot succeed.
//! A pull request closed or merged while a review round worked ends the
//! run (failed, or done) instead of being replaced. After a review round
//! the threads it worked on are answered, and a round asked for meanwhile
//! is queued.

use super::context::RunContext;
use super::data::IterationRecord;
use super::failure::RunFailure;
use super::workspace::Pushed;
use super::{Engine, EngineError, other};
use crate::comment::{self, CommitRow, FileRow, PullRequestView, VerificationView};
use crate::config::repo::CloseOn;
use crate::github::{
    InstallationClient, IssueState, NewPullRequest, PullEdit, PullState, StateReason,
};
use crate::model::{IssueNumber, Outcome, Phase, RepoName, Run, RunState, TaskType};

/// How the run's pull request ended.
pub(super) enum PullEnd {
    /// Merged, at this head commit.
    Merged(String),
    /// Closed without a merge.
    Closed(IssueNumber),
}

impl Engine {
    pub(super) async fn finish(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        if ctx.data.awaiting_merge {
            // A retry of a `finish` that got this far: its last writes.
            self.status.publish(ctx).await?;
            return self.next_round_if_asked(ctx).await;
        }
        let task = ctx.run.task_type.unwrap_or(TaskType::Feature);
        let last = self.runs.last_record(&ctx.run.id).await?;
        if !task.changes_code() {
            ctx.data.leave_open = ctx.config.close_on == CloseOn::Merged;
            self.post_deliverable(ctx, last.as_ref()).await?;
            return self.complete(ctx).await;
        }
        if self.end_if_pull_ended(ctx).await? {
            return Ok(());
        }
        let worktree = self.workspace.existing_or_prepare(ctx).await?;
        // What is pushed is exactly what verification checked.
        let verified = last
            .as_ref()
            .and_then(|r| r.verification.as_ref())
            .map(|v| v.artifacts.head.as_str());
        let sandbox = self.workspace.sandbox();
        if let Some(refusal) = sandbox
            .push_refusal(&worktree, verified)
            .await
            .map_err(other)?
        {
            let detail = refusal.to_string();
            return self.fail(ctx, RunFailure::PushRefused { detail }).await;
        }
        match self.workspace.push(ctx, &worktree).await? {
            Pushed::Done => ctx.data.verified_head = verified.map(str::to_owned),
            Pushed::BranchMoved => return self.branch_moved(ctx, &worktree).await,
            Pushed::WorkflowRefused { path } => {
                // A retry must not build on commits GitHub will refuse
                // again: they go with the worktree, and a retry starts from
                // the branch as GitHub has it.
                self.workspace.remove(&worktree, &ctx.run.id).await;
                ctx.data.worktree = None;
                return self.fail(ctx, RunFailure::WorkflowRefused { path }).await;
            }
            Pushed::RulesRefused { rules } => {
                return self.fail(ctx, RunFailure::RulesRefused { rules }).await;
            }
        }
        self.runs.save(ctx).await?;
        let number = match self.open_pull_request(ctx, task, last.as_ref()).await? {
            Opened::Pull(number) => number,
            Opened::Foreign { number, author } => {
                let failure = foreign_pull(&ctx.run.branch, number, &author);
                return self.fail(ctx, failure).await;
            }
        };
        ctx.run.pull_request = Some(number);
        self.runs.save(ctx).await?;
        let head = ctx.data.branch_head.clone().unwrap_or_default();
        self.answer_threads(ctx, number, &head, last.as_ref())
            .await?;
        // A review round leaves the phase as the pull request left it.
        if !ctx.data.keeps_phase() {
            self.status.set_phase(ctx, Phase::Review).await?;
        }
        if ctx.config.close_on == CloseOn::Merged {
            ctx.data.awaiting_merge = true;
            self.runs.save(ctx).await?;
            self.status.publish(ctx).await?;
        } else {
            self.complete(ctx).await?;
        }
        self.next_round_if_asked(ctx).await
    }

    /// Ends a run whose own pull request ended while it worked (a review
    /// round, or a restart that kept it open); `true` when it did. Closed:
    /// the maintainer's answer, the run fails. Merged: the maintainer's
    /// answer too; the later work is not pushed (no second pull request),
    /// and the run is done. Checked by `finish` and before each iteration.
    pub(super) async fn end_if_pull_ended(
        &self,
        ctx: &mut RunContext,
    ) -> Result<bool, EngineError> {
        let Some(end) = self.own_pull_ended(ctx).await? else {
            return Ok(false);
        };
        ctx.data.awaiting_merge = false;
        ctx.data.review_round = false;
        match end {
            PullEnd::Closed(number) => {
                let number = number.0;
                self.fail(ctx, RunFailure::PullRequestClosed { number })
                    .await?;
            }
            PullEnd::Merged(head) => self.complete_merged(ctx, &head).await?,
        }
        Ok(true)
    }

    /// Writes the pull request's title and body (the verification table)
    /// again, as the run stands now.
    pub(super) async fn update_pull_request(&self, ctx: &RunContext) -> Result<(), EngineError> {
        if self.own_pull_ended(ctx).await?.is_some() {
            return Ok(());
        }
        let task = ctx.run.task_type.unwrap_or(TaskType::Feature);
        let last = self.runs.last_record(&ctx.run.id).await?;
        // A run with a pull request of its own (open, as checked above):
        // that one is updated, whatever else is open from the branch.
        self.open_pull_request(ctx, task, last.as_ref()).await?;
        Ok(())
    }

    /// The answer of a `read_info`/`report` run, posted once.
    async fn post_deliverable(
        &self,
        ctx: &mut RunContext,
        last: Option<&IterationRecord>,
    ) -> Result<(), EngineError> {
        if ctx.data.deliverable_posted {
            return Ok(());
        }
        let answer = last
            .map(|r| r.summary.output_text.clone())
            .unwrap_or_default();
        let footer = comment::DeliverableFooter {
            iterations: ctx.run.iteration,
            usage: self.status.view(ctx).await?.usage,
            dashboard_url: None,
            closing: !ctx.data.leave_open,
        };
        let body = comment::deliverable_comment(&answer, &footer);
        let key = format!("answer:{}", super::triggers::digest(&body));
        self.status.post_once_for_run(ctx, &key, &body).await?;
        ctx.data.deliverable_posted = true;
        self.runs.save(ctx).await
    }

    /// Ends the run as done, in the order a reader of the issue needs: the
    /// `phase:complete` label and the final (✅) status comment first, then
    /// the issue closed as completed — a closed issue never shows a status
    /// that is still verifying. A close that fails after the state was saved
    /// is finished by the run's next step ([`Self::close_done`]).
    pub(super) async fn complete(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        self.status.set_phase(ctx, Phase::Complete).await?;
        self.closed_since(ctx).await?;
        ctx.run.state = RunState::Done;
        ctx.run.outcome = Some(Outcome::Completed);
        ctx.data.awaiting_merge = false;
        self.runs.save(ctx).await?;
        self.status.publish(ctx).await?;
        if !ctx.data.leave_open {
            self.close_done(ctx).await?;
        }
        // A code task's worktree is kept while its pull request may get
        // reviews: the next round continues in it.
        if ctx.run.pull_request.is_none()
            && let Some(w) = ctx.data.worktree.as_ref()
        {
            self.workspace.remove(w, &ctx.run.id).await;
        }
        Ok(())
    }

    /// Closes the issue of a done run, once.
    pub(super) async fn close_done(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        if ctx.data.issue_closed {
            return Ok(());
        }
        ctx.client
            .close_issue(ctx.repo(), ctx.issue(), StateReason::Completed)
            .await?;
        ctx.data.issue_closed = true;
        self.runs.save(ctx).await
    }

    /// Forgets that closer closed the issue when a person opened it again
    /// since: a verified review round closes it again, as `close_on:
    /// verified` says and the done status claims (decision 218). Asked
    /// before the run is saved done, so a close that fails after is done by
    /// the run's next step, as any close of a done run.
    async fn closed_since(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        if !ctx.data.issue_closed || ctx.data.leave_open {
            return Ok(());
        }
        let issue = ctx.client.get_issue(ctx.repo(), ctx.issue()).await?;
        if issue.state != IssueState::Closed {
            tracing::info!(run = %ctx.run.id, "the issue was opened again since closer closed it");
            ctx.data.issue_closed = false;
        }
        Ok(())
    }

    /// The `merged` step: the run's pull request was merged while the run
    /// waited for it (`close_on: merged`), while the run waited for an
    /// answer to its question (the maintainer took the work as it is: the
    /// question is moot, and the run is done), or after the run failed with
    /// it open (taken as it is too: the merge closed the issue by its
    /// `Closes #n`, and a closed issue never shows a failed run; a stopped
    /// run stays stopped, as a maintainer stopped it). The status names a
    /// merged head closer did not verify. GitHub is asked first: the
    /// delivery that queued the step may be about another pull request from
    /// the same branch (into another base, or an earlier one of the run's,
    /// replayed), which completes nothing.
    pub(super) async fn merged(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        let waiting = ctx.run.state == RunState::Verifying && ctx.data.awaiting_merge;
        let asking = super::review_round::asking_with_pull(&ctx.run);
        let failed = ctx.run.state == RunState::Failed;
        if !(waiting || asking || failed) {
            return Ok(());
        }
        let Some(PullEnd::Merged(head)) = self.own_pull_ended(ctx).await? else {
            return Ok(());
        };
        if asking {
            ctx.data.review_round = false;
            self.status.set_awaiting_label(ctx, false).await?;
        }
        if failed {
            self.status.set_failed_label(ctx, false).await?;
        }
        self.complete_merged(ctx, &head).await
    }

    /// Ends the run as done when a maintainer merged its pull request at
    /// `head`. The merge is theirs to make; what closer says of it is
    /// closer's: a head other than the one closer verified last (a push
    /// after the verification, one whose verification failed or is still
    /// to come) is named as not verified, in the status, not called
    /// verified.
    async fn complete_merged(&self, ctx: &mut RunContext, head: &str) -> Result<(), EngineError> {
        let verified = match ctx.data.verified_head.clone() {
            Some(pushed) => Some(pushed),
            // A run from before `verified_head` was kept: its last verification.
            None => self
                .runs
                .last_record(&ctx.run.id)
                .await?
                .and_then(|r| r.verification)
                .filter(|v| v.complete())
                .map(|v| v.artifacts.head),
        };
        let unverified = !head.is_empty() && verified.is_none_or(|v| v != head);
        ctx.data.merged_unverified = unverified.then(|| head.to_owned());
        self.complete(ctx).await
    }

    /// How the run's pull request ended, if it did: a new one must not
    /// take its place.
    async fn own_pull_ended(&self, ctx: &RunContext) -> Result<Option<PullEnd>, EngineError> {
        pull_end(&ctx.client, ctx.repo(), &ctx.run).await
    }

    /// Opens the pull request for the run's branch, or updates the open one
    /// closer opened. One somebody else opened from the branch is left
    /// alone ([`Opened::Foreign`]): its text and its closing keywords are
    /// theirs to edit, so it cannot carry closer's verified description.
    async fn open_pull_request(
        &self,
        ctx: &RunContext,
        task: TaskType,
        last: Option<&IterationRecord>,
    ) -> Result<Opened, EngineError> {
        let view = self.pull_request_view(ctx, task, last).await?;
        let title = comment::pull_request_title(ctx.issue(), &ctx.data.issue_title, task);
        let body = comment::pull_request_body(&view);
        let repo = ctx.repo();
        // Asked now: the default branch may have been renamed since the run
        // began (decision 253).
        let base = ctx.client.get_repository(repo).await?.default_branch;
        // The run's own (the caller saw it open), else one from the branch
        // into the same base: GitHub allows one open per head and base.
        let existing = match ctx.run.pull_request {
            Some(number) => Some((number, None)),
            None => ctx
                .client
                .find_pull_by_head(repo, &ctx.run.branch)
                .await?
                .filter(|p| p.state == PullState::Open && p.base_ref == base)
                .map(|p| (p.number, Some(p.author.unwrap_or_default()))),
        };
        if let Some((number, author)) = existing {
            let bot = self.github.app_info().await?.bot_login;
            if let Some(author) = author.filter(|a| !a.eq_ignore_ascii_case(&bot)) {
                return Ok(Opened::Foreign { number, author });
            }
            let edit = PullEdit {
                title: Some(title),
                body: Some(body),
                state: None,
            };
            ctx.client.update_pull(repo, number, &edit).await?;
            return Ok(Opened::Pull(number));
        }
        let pull = NewPullRequest {
            title,
            body,
            head: ctx.run.branch.clone(),
            base,
        };
        Ok(Opened::Pull(
            ctx.client.create_pull(repo, &pull).await?.number,
        ))
    }

    /// The pull request body's content: summary, commits, files, the
    /// verification table.
    async fn pull_request_view(
        &self,
        ctx: &RunContext,
        task: TaskType,
        last: Option<&IterationRecord>,
    ) -> Result<PullRequestView, EngineError> {
        let mut status = self.status.view(ctx).await?;
        // After a person pushed, the table shows the verification of the
        // branch as it is now (the status comment keeps the run's own).
        if let Some(again) = &ctx.data.reverified {
            status.verification = Some(super::status_view::verification_view(again));
        }
        let verification = last.and_then(|r| r.verification.as_ref());
        let commits = verification.map(|v| {
            v.artifacts
                .commits
                .iter()
                .map(|c| CommitRow {
                    sha: c.sha.clone(),
                    subject: c.message.clone(),
                })
                .collect()
        });
        let files = verification.map(|v| {
            v.artifacts
                .all_files()
                .map(|f| FileRow {
                    path: f.path.clone(),
                    added: f.added,
                    deleted: f.deleted,
                })
                .collect()
        });
        Ok(PullRequestView {
            issue: ctx.issue(),
            issue_title: ctx.data.issue_title.clone(),
            task_type: task,
            summary: last
                .and_then(|r| r.judgment.check.as_ref())
                .map(|c| c.output.summary.clone())
                .unwrap_or_default(),
            commits: commits.unwrap_or_default(),
            files: files.unwrap_or_default(),
            verification: status
                .verification
                .unwrap_or_else(VerificationView::default),
            iterations: ctx.run.iteration,
            usage: status.usage,
            dashboard_url: status.dashboard_url,
        })
    }
}

/// How `run`'s own pull request ended, if it did (one GitHub read). Merged,
/// an issue it names with `Closes #n` was closed by the merge, not by a
/// person.
pub(super) async fn pull_end(
    client: &InstallationClient,
    repo: &RepoName,
    run: &Run,
) -> Result<Option<PullEnd>, EngineError> {
    let Some(number) = run.pull_request else {
        return Ok(None);
    };
    let pull = client.get_pull(repo, number).await?;
    Ok(match (pull.state, pull.merged) {
        (PullState::Open, _) => None,
        (_, true) => Some(PullEnd::Merged(pull.head_sha)),
        (_, false) => Some(PullEnd::Closed(number)),
    })
}

/// What [`Engine::open_pull_request`] found or made.
enum Opened {
    /// closer's pull request, opened or updated.
    Pull(IssueNumber),
    /// An open pull request from the run's branch that somebody else opened.
    Foreign { number: IssueNumber, author: String },
}

/// The failure of a run whose branch has somebody else's pull request open.
fn foreign_pull(branch: &str, number: IssueNumber, author: &str) -> RunFailure {
    let message = format!(
        "pull request #{number} from `{branch}` was opened by {author}, not by closer, and \
         closer does not take over a pull request it did not open (its description and \
         closing keywords are its author's to edit): close it, then comment `/closer retry`"
    );
    RunFailure::Error { message }
}
