//! What a run shows on GitHub: the status comment (one per run, found again
//! by its marker, edited at most once per step and only when its text
//! changed) and one-off comments (question, diagnosis, answer, command
//! replies), each posted at most once. Labels are in `labels.rs`.
//!
//! It must never trust a marker in a comment that our App did not write.

use super::EngineError;
use super::context::RunContext;
use super::github::{GitHubAccess, is_ours};
use super::runs::Runs;
use super::status_view::status_view;
use super::throttle::{ComeBack, EditThrottle, STATUS_EDIT_GAP};
use crate::comment::{self, StatusView};
use crate::github::{CommentId, InstallationClient};
use crate::model::{IssueNumber, RepoName, RunState};

tokio::task_local! {
    /// Set while a queue job that may be sent back runs (a run's step that
    /// is safe to run again, a trigger's first status write): there, a
    /// status write whose slot is far off ends the job with
    /// [`EngineError::Busy`]. Elsewhere (`reverify`, reconciliation,
    /// commands, an edit taken) it waits for its slot.
    static SENDS_BACK: ();
}

/// Runs `work` as a queue job that may be sent back at its status write.
pub async fn sending_back<F: std::future::Future>(work: F) -> F::Output {
    SENDS_BACK.scope((), work).await
}

/// Writes the run's texts on GitHub.
pub struct StatusPublisher {
    runs: Runs,
    github: GitHubAccess,
    /// Spaces out status-comment writes per installation.
    throttle: EditThrottle,
    dashboard_url: Option<String>,
    /// Processes run without a sandbox: every status comment says so.
    unconfined: bool,
    /// Runs whose comment a progress edit changed since their last status
    /// write: the stored last text no longer is what GitHub shows, and
    /// the next write goes out even when its text is that one (decision
    /// 244). In memory: a restarted process writes each run's status anew
    /// at its next step anyway, when the agent shows progress again.
    progressed: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl StatusPublisher {
    pub fn new(
        runs: Runs,
        github: GitHubAccess,
        dashboard_url: Option<String>,
        unconfined: bool,
    ) -> StatusPublisher {
        StatusPublisher {
            runs,
            github,
            throttle: EditThrottle::new(STATUS_EDIT_GAP),
            dashboard_url,
            unconfined,
            progressed: std::sync::Mutex::default(),
        }
    }

    pub(super) fn runs(&self) -> &Runs {
        &self.runs
    }

    /// Everything the status comment shows now.
    pub async fn view(&self, ctx: &RunContext) -> Result<StatusView, EngineError> {
        let last = self.runs.last_record(&ctx.run.id).await?;
        let mut view = status_view(ctx, last.as_ref(), self.dashboard_url.as_deref());
        if self.unconfined {
            view.notices
                .push(crate::comment::texts::UNCONFINED_NOTICE.to_owned());
        }
        Ok(view)
    }

    /// Edits the status comment with a live progress line (the agent is
    /// working); nothing is stored, and a failure is only logged. A stop
    /// written meanwhile keeps the last word ([`Self::restore_stopped`]).
    pub async fn publish_progress(&self, ctx: &RunContext, line: String) {
        let Some(id) = ctx.run.status_comment_id else {
            return;
        };
        let mut view = match self.view(ctx).await {
            Ok(view) => view,
            Err(e) => {
                tracing::warn!(run = %ctx.run.id, error = %e, "no progress edit");
                return;
            }
        };
        view.progress = Some(line);
        let body = comment::status_comment(&view);
        // A live line is not worth a worker's wait: the next tick tries again.
        if !self.throttle.wait_if_soon(ctx.run.installation_id).await {
            return;
        }
        match ctx
            .client
            .edit_comment(ctx.repo(), CommentId(id), &body)
            .await
        {
            Ok(_) => {
                if let Ok(mut progressed) = self.progressed.lock() {
                    progressed.insert(ctx.run.id.as_str().to_owned());
                }
            }
            Err(e) => tracing::warn!(run = %ctx.run.id, error = %e, "progress edit failed"),
        }
        match self.runs.load(&ctx.run.id).await {
            Ok(Some(stored)) if stored.state == RunState::Stopped => {
                self.restore_stopped(ctx, stored).await;
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(run = %ctx.run.id, error = %e, "no stop check after progress"),
        }
    }

    /// Writes the stopped run's status again after an edit made for it
    /// while it worked: the stop (`Engine::stop`, another job) may have
    /// written its status before that edit landed, and the issue must end
    /// on the stop's. Best effort: a failure is logged. A run stopped
    /// because closer lost its access to the repository
    /// ([`crate::model::Withdrawal`]) is not written to.
    async fn restore_stopped(&self, ctx: &RunContext, stored: crate::model::Run) {
        let Some(id) = stored.status_comment_id else {
            return;
        };
        if stored.withdrawn().is_some() {
            return;
        }
        let fresh = match RunContext::stopped(ctx, stored) {
            Ok(fresh) => fresh,
            Err(e) => {
                tracing::warn!(run = %ctx.run.id, error = %e, "stopped status not restored");
                return;
            }
        };
        let body = match self.view(&fresh).await {
            Ok(view) => comment::status_comment(&view),
            Err(e) => {
                tracing::warn!(run = %ctx.run.id, error = %e, "stopped status not restored");
                return;
            }
        };
        self.throttle
            .wait_however_long(ctx.run.installation_id, ctx.run.id.as_str())
            .await;
        // Restarted while this waited its turn: the new life's status stands.
        let generation = fresh.run.generation;
        match self.runs.load(&ctx.run.id).await {
            Ok(Some(now)) if now.state == RunState::Stopped && now.generation == generation => {}
            _ => return,
        }
        if let Err(e) = ctx
            .client
            .edit_comment(ctx.repo(), CommentId(id), &body)
            .await
        {
            tracing::warn!(run = %ctx.run.id, error = %e, "stopped status not restored");
        }
    }

    /// Writes the status comment if its text changed: edits the known one,
    /// else finds ours by marker, else creates it (and remembers its id);
    /// one deleted is posted again.
    /// Writes of one installation are at least a second apart; each step
    /// calls this at most once. Within [`sending_back`], a slot more than a
    /// second off is booked for the run and not waited for:
    /// [`EngineError::Busy`] sends the job back to the queue until shortly
    /// before it. A caller saves its transition and queues its next step
    /// first; a step sent back that finds its run moved on writes the
    /// status then (`Engine::step`).
    pub async fn publish(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        if ctx.run.state != RunState::Stopped
            && let Some(stored) = self.runs.load(&ctx.run.id).await?
            && stored.state == RunState::Stopped
        {
            return Err(EngineError::Stopped);
        }
        let body = comment::status_comment(&self.view(ctx).await?);
        let progressed = self
            .progressed
            .lock()
            .is_ok_and(|p| p.contains(ctx.run.id.as_str()));
        if ctx.data.last_status.as_deref() == Some(body.as_str())
            && ctx.run.status_comment_id.is_some()
            && !progressed
        {
            return Ok(());
        }
        let (installation, key) = (ctx.run.installation_id, ctx.run.id.as_str());
        if SENDS_BACK.try_with(|_| ()).is_err() {
            self.throttle.wait_however_long(installation, key).await;
        } else if let Err(ComeBack(back)) = self.throttle.wait_for_turn(installation, key).await {
            let wait = back.saturating_duration_since(tokio::time::Instant::now());
            return Err(EngineError::Busy(wait));
        }
        let id = self.write_status(ctx, &body).await?;
        if let Ok(mut progressed) = self.progressed.lock() {
            progressed.remove(ctx.run.id.as_str());
        }
        ctx.run.status_comment_id = Some(id.0);
        ctx.data.last_status = Some(body);
        let saved = self.runs.save(ctx).await;
        if matches!(saved, Err(EngineError::Stopped))
            && let Ok(Some(stored)) = self.runs.load(&ctx.run.id).await
            && stored.state == RunState::Stopped
        {
            // Stopped between the check above and this edit.
            self.restore_stopped(ctx, stored).await;
        }
        saved
    }

    /// Posts a one-off comment of a run (question, diagnosis, answer) at
    /// most once; see [`Self::post_once_marked`]. A diagnosis or an answer
    /// is keyed by its text too: a run restarted and failed (or answered)
    /// again posts its new one, while a retried step finds its own.
    pub async fn post_once_for_run(
        &self,
        ctx: &RunContext,
        key: &str,
        body: &str,
    ) -> Result<CommentId, EngineError> {
        let key = format!("{}:{key}", ctx.run.id);
        self.post_once_marked(&ctx.client, ctx.repo(), ctx.issue(), &key, body)
            .await
    }

    /// Posts a comment at most once, even across a crash or a `MaybeApplied`
    /// between posting it and recording that it was posted: the body carries
    /// a hidden `<!-- closer:once=<key> -->` marker, and a comment of ours
    /// already carrying it is not posted again when the step is retried.
    /// Answers the comment's id, found or posted.
    pub async fn post_once_marked(
        &self,
        client: &InstallationClient,
        repo: &RepoName,
        number: IssueNumber,
        key: &str,
        body: &str,
    ) -> Result<CommentId, EngineError> {
        let marker = format!("<!-- closer:once={key} -->");
        let app = self.github.app_info().await?;
        let posted = client
            .list_comments(repo, number)
            .await?
            .into_iter()
            .find(|c| is_ours(&app, c) && c.body.contains(&marker));
        Ok(match posted {
            Some(c) => c.id,
            None => {
                client
                    .create_comment(repo, number, &format!("{body}\n{marker}"))
                    .await?
                    .id
            }
        })
    }

    /// Edits the run's status comment to `body`: the known one, else ours
    /// found by its marker, else a new one. A known comment GitHub says is
    /// gone (a person or a moderation bot deleted it) is posted again:
    /// every later write would fail on it, and the run would never close
    /// its issue (decision 237).
    async fn write_status(&self, ctx: &RunContext, body: &str) -> Result<CommentId, EngineError> {
        let repo = ctx.repo();
        if let Some(id) = ctx.run.status_comment_id {
            match ctx.client.edit_comment(repo, CommentId(id), body).await {
                Ok(_) => return Ok(CommentId(id)),
                Err(e) if e.is_gone() => {
                    tracing::info!(run = %ctx.run.id, comment = id, "the status comment is gone; posting it again");
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(match self.find_status_comment(ctx).await? {
            Some(id) => {
                ctx.client.edit_comment(repo, id, body).await?;
                id
            }
            None => ctx.client.create_comment(repo, ctx.issue(), body).await?.id,
        })
    }

    /// Our status comment of this run, by its marker.
    async fn find_status_comment(
        &self,
        ctx: &RunContext,
    ) -> Result<Option<CommentId>, EngineError> {
        let app = self.github.app_info().await?;
        let comments = ctx.client.list_comments(ctx.repo(), ctx.issue()).await?;
        let run_id = ctx.run.id.as_str();
        Ok(comments
            .iter()
            .find(|c| {
                is_ours(&app, c) && comment::parse_run_marker(&c.body).as_deref() == Some(run_id)
            })
            .map(|c| c.id))
    }
}
