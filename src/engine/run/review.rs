//! Webhook events on closer's own pull request → the run's steps: a review
//! (`changes_requested`, or `commented` with a summary), a review comment,
//! a conversation comment that asks the App something (a mention that is
//! no command) or says `/closer run`, a
//! push by a person (`synchronize`), and the pull request closed without a
//! merge.
//!
//! closer's own pull request is one whose head is `closer/issue-<n>` in the
//! issue's repository, opened by the App's bot user, and recorded as the
//! run's pull request. Only people with at least `commands.min_permission`
//! count; bots, the App itself and comments posted through the App never
//! do. The delivery job never writes the run: it stores what was asked and
//! queues the run's own step, which acts once the run is at rest — so
//! several reviews arriving while an iteration runs are one further round.

use super::triggers::Thread;
use super::{Engine, EngineError, Step};
use crate::engine::command::{Command, parse_commands, request};
use crate::events::{
    Actor, CommentAction, CommentRef, PullRef, Repo, ReviewAction, ReviewCommentRef, ReviewRef,
    ReviewState,
};
use crate::github::InstallationClient;
use crate::model::{InstallationId, Run, branch_issue};
use crate::store::messages::{self, NewMessage, Standing};
use crate::store::review_texts::{self, KeptText};
use crate::store::runs;

/// A pull request event, as the review loop reads it.
pub(super) struct PullEvent<'a> {
    pub installation: InstallationId,
    pub repo: &'a Repo,
    pub pull: &'a PullRef,
}

impl Engine {
    /// The run whose own pull request this is, if it is closer's.
    async fn run_of_pull(&self, event: &PullEvent<'_>) -> Result<Option<Run>, EngineError> {
        let (repo, pull) = (&event.repo.name, event.pull);
        let Some(n) = branch_issue(&pull.head_ref) else {
            return Ok(None);
        };
        if pull.head_repo.as_deref() != Some(repo.to_string().as_str()) {
            return Ok(None);
        }
        let app = self.github.app_info().await?;
        if !pull.author.login.eq_ignore_ascii_case(&app.bot_login) {
            return Ok(None);
        }
        let run = runs::by_issue(self.runs.store().pool(), repo, n).await?;
        Ok(run.filter(|r| r.pull_request == Some(pull.number)))
    }

    /// Whether `who` may steer the run from its pull request: a person (not
    /// a bot, not the App) with at least the run's `commands.min_permission`.
    async fn may_review(
        &self,
        client: &InstallationClient,
        run: &Run,
        who: &Actor,
    ) -> Result<bool, EngineError> {
        if self.github.is_us_or_bot(who).await? {
            return Ok(false);
        }
        let data = super::data::RunData::of(run)?;
        let config =
            super::context::parse_config(data.config_text.as_deref(), &self.agents.names())
                .unwrap_or_default();
        let minimum = self
            .steering_minimum(client, run, config.commands.min_permission)
            .await?;
        self.permitted(client, &run.repository, &who.login, minimum)
            .await
    }

    /// A submitted review: `changes_requested`, or `commented` with a
    /// summary, starts a round (its inline comments come as their own
    /// events and are read from GitHub as threads).
    pub(super) async fn on_review(
        &self,
        event: &PullEvent<'_>,
        action: &ReviewAction,
        review: &ReviewRef,
        sender: &Actor,
    ) -> Result<String, EngineError> {
        match action {
            ReviewAction::Submitted => {}
            ReviewAction::Dismissed => {
                return self.on_review_dismissed(event, review, sender).await;
            }
            _ => return Ok(format!("review {}: ignored", action.as_str())),
        }
        let counts = match review.state {
            ReviewState::ChangesRequested => true,
            ReviewState::Commented => !review.body.trim().is_empty(),
            _ => false,
        };
        if !counts {
            return Ok(format!("review {:?}: nothing to address", review.state));
        }
        let Some(run) = self.run_of_pull(event).await? else {
            return Ok("review: not on closer's pull request".to_owned());
        };
        let client = self.github.client(event.installation).await?;
        if !self.may_review(&client, &run, &review.author).await? {
            return Ok(format!("review by {}: ignored", review.author.login));
        }
        if !review.body.trim().is_empty() {
            // Reviews are stored under minus their id: their ids are not
            // comment ids, and the two must not collide.
            let body = format!("(review) {}", review.body.trim());
            self.store_message(&run, -review.id, &review.author.login, &body)
                .await?;
        }
        self.runs.enqueue(&run.id, Step::Review).await?;
        Ok(format!(
            "review by {}: review round queued",
            review.author.login
        ))
    }

    /// A review dismissed by a person who may steer: its summary, if no
    /// prompt carried it yet, is not for the agent any more. (Its inline
    /// comments stay threads: dismissing a review resolves none of them.)
    /// A dismissal by anyone else changes nothing, or a writer could take
    /// back what a maintainer asked.
    async fn on_review_dismissed(
        &self,
        event: &PullEvent<'_>,
        review: &ReviewRef,
        sender: &Actor,
    ) -> Result<String, EngineError> {
        let Some(run) = self.run_of_pull(event).await? else {
            return Ok("review dismissed: not on closer's pull request".to_owned());
        };
        let client = self.github.client(event.installation).await?;
        if !self.may_review(&client, &run, sender).await? {
            return Ok(format!("review dismissed by {}: ignored", sender.login));
        }
        let dropped = messages::drop_unused(self.runs.store().pool(), &run.id, -review.id).await?;
        Ok(format!(
            "review dismissed by {}: {}",
            sender.login,
            if dropped {
                "its summary dropped"
            } else {
                "nothing left to drop"
            }
        ))
    }

    /// A review comment: a new one (a thread's first comment or a reply in
    /// one) by a person who may steer starts a round; its words, and those
    /// of such a person's edit, are kept for the prompt
    /// (`store/review_texts.rs`). An edit by anyone else keeps nothing:
    /// the prompt goes on showing the words as they were.
    pub(super) async fn on_review_comment(
        &self,
        event: &PullEvent<'_>,
        action: &CommentAction,
        comment: &ReviewCommentRef,
        sender: &Actor,
    ) -> Result<String, EngineError> {
        let edited = match action {
            CommentAction::Created => false,
            CommentAction::Edited => true,
            _ => return Ok(format!("review comment {}: ignored", action.as_str())),
        };
        if self.github.is_our_app(comment.via_app_id).await? {
            return Ok("review comment: closer's own".to_owned());
        }
        let Some(run) = self.run_of_pull(event).await? else {
            return Ok("review comment: not on closer's pull request".to_owned());
        };
        let client = self.github.client(event.installation).await?;
        // The one who wrote it, or who edited it.
        let by = if edited { sender } else { &comment.author };
        if !self.may_review(&client, &run, by).await? {
            return Ok(format!("review comment by {}: ignored", by.login));
        }
        let text = KeptText {
            comment_id: comment.id,
            author: comment.author.login.clone(),
            body: comment.body.clone(),
            version: comment.updated_at.clone(),
        };
        let store = self.runs.store();
        review_texts::keep(store.pool(), &run.id, &text, store.now_ms()).await?;
        if edited {
            return Ok(format!("review comment edited by {}: kept", by.login));
        }
        self.runs.enqueue(&run.id, Step::Review).await?;
        Ok(format!(
            "review comment by {}: review round queued",
            comment.author.login
        ))
    }

    /// A conversation comment on a pull request: on closer's own, `/closer
    /// run` or a request to the App starts a round, the comment in its
    /// prompt. (The comment's payload has no head branch: the pull request
    /// is read, and must be the one the run recorded as its own.)
    pub(super) async fn on_pull_request_comment(
        &self,
        thread: &Thread<'_>,
        comment: &CommentRef,
    ) -> Result<String, EngineError> {
        let app = self.github.app_info().await?;
        let run_command = parse_commands(&comment.body, &app.slug)
            .iter()
            .any(|c| matches!(c, Ok(Command::Run) | Ok(Command::Retry)));
        // A mention that is a command (`@closer-bot stop`) is no request:
        // commands other than `run` are the issue's, and a stop must not
        // start a round.
        if !run_command && request(&comment.body, &app.slug).is_none() {
            return Ok("pull request comment: not addressed to closer".to_owned());
        }
        let client = self.github.client(thread.installation).await?;
        let (repo, number) = (&thread.repo.name, thread.issue.number);
        let pull = client.get_pull(repo, number).await?;
        let run = match branch_issue(&pull.head_ref) {
            Some(n) => runs::by_issue(self.runs.store().pool(), repo, n).await?,
            None => None,
        };
        let Some(run) = run.filter(|r| r.pull_request == Some(number)) else {
            return Ok("pull request comment: not on closer's pull request".to_owned());
        };
        if !self.may_review(&client, &run, &comment.author).await? {
            return Ok(format!("comment by {}: ignored", comment.author.login));
        }
        self.store_message(&run, comment.id, &comment.author.login, &comment.body)
            .await?;
        if !self.kept_unless_deleted(&run.id, comment.id).await? {
            return Ok("pull request comment: deleted meanwhile, dropped".to_owned());
        }
        self.runs.enqueue(&run.id, Step::Review).await?;
        Ok(format!(
            "comment by {} on the pull request: review round queued",
            comment.author.login
        ))
    }

    /// A push to closer's branch by anyone but closer (a person, or a bot
    /// such as a formatting workflow): verification again. A bot's commit
    /// is as unverified as a person's.
    pub(super) async fn on_synchronize(
        &self,
        event: &PullEvent<'_>,
        sender: &Actor,
    ) -> Result<String, EngineError> {
        let app = self.github.app_info().await?;
        if sender.login.eq_ignore_ascii_case(&app.bot_login) {
            return Ok("synchronize: closer's own push".to_owned());
        }
        let Some(run) = self.run_of_pull(event).await? else {
            return Ok("synchronize: not closer's pull request".to_owned());
        };
        self.runs.enqueue(&run.id, Step::Reverify).await?;
        Ok(format!("push by {}: verification queued", sender.login))
    }

    /// closer's pull request closed without a merge.
    pub(super) async fn on_pull_closed(
        &self,
        event: &PullEvent<'_>,
    ) -> Result<String, EngineError> {
        let Some(run) = self.run_of_pull(event).await? else {
            return Ok("closed pull request: not closer's".to_owned());
        };
        // Looked at after the re-check delay: a pull request closed and
        // opened again at once (to run its checks again) is no rejection
        // (decision 238).
        self.runs
            .enqueue_after_recheck(&run.id, Step::PullClosed)
            .await?;
        Ok(format!(
            "pull request #{} closed unmerged: run {} follows",
            event.pull.number, run.id
        ))
    }

    /// Stores a person's words for the run's next prompt (once per id).
    pub(super) async fn store_message(
        &self,
        run: &Run,
        id: i64,
        author: &str,
        body: &str,
    ) -> Result<(), EngineError> {
        let store = self.runs.store();
        // Only words of users with the permission to steer come here.
        let message = NewMessage {
            comment_id: id,
            author,
            standing: Standing::Steering,
            body,
        };
        messages::add(store.pool(), &run.id, message, store.now_ms()).await?;
        Ok(())
    }
}
