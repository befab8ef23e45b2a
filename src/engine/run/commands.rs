//! Comments on an issue: `/closer` commands from authorised users (others
//! get one short refusal), and replies — by an authorised user while a run
//! is open, or by the issue's author to the run's question (and adding to
//! their answer while the iteration it resumed works) — stored for the
//! next prompt (and resuming a run that awaits one). The author's answer
//! counts however it is worded: addressed to the App, or with a word the
//! App does not know, it is still an answer, not a refused request. A
//! deleted comment leaves a tombstone, and the reply it was is dropped,
//! whichever of its two deliveries is handled first.
//!
//! Replies to a command are keyed by the comment and a digest of its text,
//! so a retried job does not answer twice and an edit's new commands get
//! new answers. A refusal is keyed by the comment alone: editing one
//! comment again and again gets one refusal, not one per edit.
//!
//! An edit is somebody's new text in somebody else's comment (GitHub lets
//! writers edit any comment): its commands need both the comment's author
//! and the editor (the event's sender) to be authorised.

use std::sync::Arc;

use super::config_read::ConfigRead;
use super::context::RunContext;
use super::data::RunData;
use super::triggers::{Thread, digest};
use super::{Engine, EngineError, Step};
use crate::comment;
use crate::engine::command::{Command, CommandError, new_commands, request};
use crate::events::{Actor, CommentRef, GHOST_LOGIN};
use crate::github::{CommentId, InstallationClient, Reaction};
use crate::model::{IssueNumber, Permission, RepoName, RunId, RunState};
use crate::store::commands as store_commands;
use crate::store::deleted_comments;
use crate::store::messages::{self, NewMessage, Standing};
use crate::store::runs;

impl Engine {
    /// A comment created (`previous` is `None`) or edited by `sender`.
    pub(super) async fn on_comment(
        &self,
        thread: &Thread<'_>,
        comment: &CommentRef,
        previous: Option<&str>,
        sender: &Actor,
    ) -> Result<String, EngineError> {
        let created = previous.is_none();
        // Its deletion came first: nothing it says is acted on.
        let pool = self.runs.store().pool();
        if created && deleted_comments::is_deleted(pool, comment.id).await? {
            return Ok(format!(
                "comment {}: deleted before it was handled",
                comment.id
            ));
        }
        let app = self.github.app_info().await?;
        let client = self.github.client(thread.installation).await?;
        if created && let Some(request) = request(&comment.body, &app.slug) {
            return self.on_request(&client, thread, comment, &request).await;
        }
        let commands = new_commands(previous, &comment.body, &app.slug);
        if commands.is_empty() {
            return match created {
                true => self.on_reply(&client, thread, comment).await,
                false => Ok("edited comment without new commands".to_owned()),
            };
        }
        let repo = &thread.repo.name;
        let config = self.read_config(&client, thread.repo).await?;
        let minimum = self
            .commands_minimum(&config, repo, thread.issue.number)
            .await?;
        let mut steering = vec![&comment.author];
        if !sender.login.eq_ignore_ascii_case(&comment.author.login) {
            steering.push(sender);
        }
        for who in steering {
            if !self.permitted(&client, repo, &who.login, minimum).await? {
                // An unknown word after the App's name is the author's
                // wording, not a command they could not give.
                let worded = commands.iter().all(Result::is_err);
                if created && worded && self.answers_question(thread, comment).await? {
                    return self.on_reply(&client, thread, comment).await;
                }
                self.refuse(&client, thread, comment, &who.login, minimum)
                    .await?;
                return Ok(format!("command by {} refused", who.login));
            }
        }
        let commands = self.run_commands(&client, thread, comment, commands, config);
        Ok(self
            .once_per_text(comment, commands)
            .await?
            .unwrap_or_else(|| format!("commands of comment {} already handled", comment.id)))
    }

    /// `act`, the comment's commands or request, run at most once per
    /// comment text, whatever delivery carries it (a replay under a new
    /// delivery id included); `None` when it already ran. A failed `act` is
    /// not marked: its job's retry acts again.
    async fn once_per_text(
        &self,
        comment: &CommentRef,
        act: impl Future<Output = Result<String, EngineError>>,
    ) -> Result<Option<String>, EngineError> {
        let store = self.runs.store();
        let text_digest = digest(&comment.body);
        if store_commands::handled(store.pool(), comment.id, &text_digest).await? {
            return Ok(None);
        }
        let outcome = act.await?;
        store_commands::mark_handled(store.pool(), comment.id, &text_digest, store.now_ms())
            .await?;
        Ok(Some(outcome))
    }

    /// An authorised comment's commands, in order (acknowledged with 👀).
    async fn run_commands(
        &self,
        client: &Arc<InstallationClient>,
        thread: &Thread<'_>,
        comment: &CommentRef,
        commands: Vec<Result<Command, CommandError>>,
        config: ConfigRead,
    ) -> Result<String, EngineError> {
        let (repo, number) = (&thread.repo.name, thread.issue.number);
        let eyes = CommentId(comment.id.max(0) as u64);
        if let Err(e) = client
            .add_comment_reaction(repo, eyes, Reaction::Eyes)
            .await
        {
            tracing::warn!(error = %e, "cannot react to a command");
        }
        let reply = reply_key(comment);
        let mut config = Some(config);
        let mut done = Vec::new();
        for (i, command) in commands.into_iter().enumerate() {
            let key = format!("{reply}:{i}");
            let outcome = match command {
                Ok(Command::Run) | Ok(Command::Retry) => match config.take() {
                    Some(c) => self.restart_command(client, thread, c, &key).await?,
                    None => "already handled".to_owned(),
                },
                Ok(Command::Stop) => self.stop_command(repo, number).await?,
                Ok(Command::Status) => {
                    self.answer_status(client, repo, number, &key).await?;
                    "status answered".to_owned()
                }
                Err(e) => self.unknown_command(client, thread, &key, e).await?,
            };
            done.push(outcome);
        }
        Ok(done.join("; "))
    }

    /// `/closer run` or `/closer retry`: a run started, or restarted once
    /// it ended. A run still going (past its queue) is not restarted: the
    /// maintainer is told so, and what they can do instead, rather than
    /// left with a 👀 alone.
    async fn restart_command(
        &self,
        client: &Arc<InstallationClient>,
        thread: &Thread<'_>,
        config: ConfigRead,
        key: &str,
    ) -> Result<String, EngineError> {
        let (repo, number) = (&thread.repo.name, thread.issue.number);
        let run = runs::by_issue(self.runs.store().pool(), repo, number).await?;
        let Some(run) = run.filter(|r| !r.state.is_final() && r.state != RunState::Queued) else {
            return self.trigger(client, thread, config, true).await;
        };
        let body = comment::nothing_to_retry_answer(run.state);
        self.status
            .post_once_marked(client, repo, number, key, &body)
            .await?;
        Ok(format!(
            "run {} already {}: not restarted",
            run.id, run.state
        ))
    }

    async fn stop_command(
        &self,
        repo: &RepoName,
        number: IssueNumber,
    ) -> Result<String, EngineError> {
        match runs::by_issue(self.runs.store().pool(), repo, number).await? {
            Some(run) if super::failure::stop_applies(&run) => {
                self.stop(&run, "stopped by a maintainer").await?;
                Ok("stopped".to_owned())
            }
            _ => Ok("stop: no active run".to_owned()),
        }
    }

    async fn unknown_command(
        &self,
        client: &InstallationClient,
        thread: &Thread<'_>,
        key: &str,
        error: CommandError,
    ) -> Result<String, EngineError> {
        let (text, outcome) = match error {
            CommandError::Unknown { word, suggestion } => (
                comment::unknown_command_comment(&word, suggestion.map(|s| s.as_str())),
                format!("unknown command {word:?}"),
            ),
            CommandError::Missing => (
                comment::unknown_command_comment("", None),
                "command word missing".to_owned(),
            ),
        };
        let (repo, number) = (&thread.repo.name, thread.issue.number);
        self.status
            .post_once_marked(client, repo, number, key, &text)
            .await?;
        Ok(outcome)
    }

    /// A deleted comment, on an issue or on a run's pull request: the
    /// reply it was, if no prompt carried it yet, is dropped with it (its
    /// words are no longer on GitHub, whoever took them off). One a prompt
    /// carried stays in that iteration's record.
    pub(super) async fn on_comment_deleted(
        &self,
        comment: &CommentRef,
    ) -> Result<String, EngineError> {
        let store = self.runs.store();
        let pool = store.pool();
        // The tombstone first: a `created` handled at the same time stores
        // its reply and then finds it (`kept_unless_deleted`).
        deleted_comments::record(pool, comment.id, store.now_ms()).await?;
        Ok(
            match messages::drop_unused_comment(pool, comment.id).await? {
                true => "comment deleted: its reply is dropped before any prompt".to_owned(),
                false => "comment deleted: no reply of it waits for a prompt".to_owned(),
            },
        )
    }

    /// Whether a reply just stored stays; dropped again when GitHub said
    /// its comment was deleted. The `deleted` may have been handled first
    /// (delivered out of order, or by another worker before this one stored
    /// the reply) and found nothing to drop then. Stored first and looked
    /// for after, while the deletion records its tombstone first and drops
    /// after: in any order of the two, the reply goes.
    pub(super) async fn kept_unless_deleted(
        &self,
        run_id: &RunId,
        comment_id: i64,
    ) -> Result<bool, EngineError> {
        let pool = self.runs.store().pool();
        if !deleted_comments::is_deleted(pool, comment_id).await? {
            return Ok(true);
        }
        messages::drop_unused(pool, run_id, comment_id).await?;
        Ok(false)
    }

    /// A comment by an authorised user while the run is open, or by the
    /// issue's author while it awaits an answer (or may add to it,
    /// [`RunData::author_may_reply`]): stored as a message for the next
    /// prompt. While the run awaits
    /// an answer it also resumes it; while it is queued or running, the
    /// next iteration picks it up.
    async fn on_reply(
        &self,
        client: &Arc<InstallationClient>,
        thread: &Thread<'_>,
        comment: &CommentRef,
    ) -> Result<String, EngineError> {
        let store = self.runs.store();
        let repo = &thread.repo.name;
        let Some(run) = runs::by_issue(store.pool(), repo, thread.issue.number).await? else {
            return Ok("comment: no run".to_owned());
        };
        let awaiting = run.state == RunState::AwaitingResponse;
        if !awaiting && run.state != RunState::Running && run.state != RunState::Queued {
            return Ok(format!("comment: the run is {}", run.state));
        }
        let ctx = RunContext::load_lenient(run, client.clone(), &self.agents.names())?;
        let login = &comment.author.login;
        let is_author = is_issue_author(thread, login);
        // The author may answer the run's question (and add to the answer
        // while the iteration it resumed works); only authorised users
        // steer a run at work (their words reach the prompt as a
        // maintainer's reply, and start a review round once it is verified).
        let answers = is_author && ctx.data.author_may_reply(&ctx.run);
        if !answers && !self.permitted_to_steer(client, &ctx, login).await? {
            return Ok(format!(
                "comment by {login}: not authorised (the author may only answer a question)"
            ));
        }
        let run_id = &ctx.run.id;
        // The standing is kept with the reply: the prompt shows it as this
        // event let it in, whatever the login means later.
        let standing = if is_author {
            Standing::Author
        } else {
            Standing::Steering
        };
        let message = NewMessage {
            comment_id: comment.id,
            author: login,
            standing,
            body: &comment.body,
        };
        messages::add(store.pool(), run_id, message, store.now_ms()).await?;
        if !self.kept_unless_deleted(run_id, comment.id).await? {
            return Ok(format!("reply by {login}: deleted meanwhile, dropped"));
        }
        if !awaiting {
            return Ok(format!("reply by {login}: stored for the next prompt"));
        }
        // The run's own job resumes it: the step that asked may still be
        // writing the run, and runs only change state in their own steps.
        self.runs.enqueue(run_id, Step::Resume).await?;
        Ok(format!("reply by {login}: run resumed"))
    }

    /// Whether the comment is the issue's author answering the run's
    /// question (or adding to the answer, see
    /// [`RunData::author_may_reply`]): the one thing the author may do
    /// without the permission to steer, however the answer is worded
    /// ("@closer-bot use v2" reads as a request, "@closer-bot option 2" as
    /// a command).
    async fn answers_question(
        &self,
        thread: &Thread<'_>,
        comment: &CommentRef,
    ) -> Result<bool, EngineError> {
        if !is_issue_author(thread, &comment.author.login) {
            return Ok(false);
        }
        let pool = self.runs.store().pool();
        let run = runs::by_issue(pool, &thread.repo.name, thread.issue.number).await?;
        Ok(match run {
            Some(run) => RunData::of(&run)?.author_may_reply(&run),
            None => false,
        })
    }

    /// A request written to the App ("@closer-bot please also update the
    /// docs") by an authorised user: stored for the next prompt, and a run
    /// started for it (or a review round of a run at rest with its pull
    /// request open, or the run resumed when it awaits an answer).
    async fn on_request(
        &self,
        client: &Arc<InstallationClient>,
        thread: &Thread<'_>,
        comment: &CommentRef,
        request: &str,
    ) -> Result<String, EngineError> {
        let repo = &thread.repo.name;
        let config = self.read_config(client, thread.repo).await?;
        let minimum = self
            .commands_minimum(&config, repo, thread.issue.number)
            .await?;
        let login = &comment.author.login;
        if !self.permitted(client, repo, login, minimum).await? {
            if self.answers_question(thread, comment).await? {
                return self.on_reply(client, thread, comment).await;
            }
            self.refuse(client, thread, comment, login, minimum).await?;
            return Ok(format!("request by {login} refused"));
        }
        let take = self.take_request(client, thread, comment, request, config);
        Ok(self
            .once_per_text(comment, take)
            .await?
            .unwrap_or_else(|| format!("request of comment {} already handled", comment.id)))
    }

    /// Acts on an authorised request (see [`Engine::on_request`]).
    async fn take_request(
        &self,
        client: &Arc<InstallationClient>,
        thread: &Thread<'_>,
        comment: &CommentRef,
        request: &str,
        config: ConfigRead,
    ) -> Result<String, EngineError> {
        let (repo, number) = (&thread.repo.name, thread.issue.number);
        let login = &comment.author.login;
        let pool = self.runs.store().pool();
        let mut run = runs::by_issue(pool, repo, number).await?;
        let step = match &run {
            Some(r) if self.at_rest_with_open_pull(client, r).await? => Some(Step::Review),
            Some(r) if r.state == RunState::AwaitingResponse => Some(Step::Resume),
            Some(r) if !r.state.is_final() => None,
            _ => {
                let started = self.trigger(client, thread, config, true).await?;
                run = runs::by_issue(pool, repo, number).await?;
                tracing::info!(%repo, %number, %started, "run for a request");
                None
            }
        };
        let Some(run) = run else {
            return Ok(format!("request by {login}: no run"));
        };
        // Stored after a new run was queued: if its first prompt was built
        // before, the request stays unused and the run's next prompt (or,
        // once verified, a review round) carries it.
        self.store_message(&run, comment.id, login, request).await?;
        if !self.kept_unless_deleted(&run.id, comment.id).await? {
            return Ok(format!("request by {login}: deleted meanwhile, dropped"));
        }
        if let Err(e) = client
            .add_comment_reaction(repo, CommentId(comment.id.max(0) as u64), Reaction::Eyes)
            .await
        {
            tracing::warn!(error = %e, "cannot react to a request");
        }
        if let Some(step) = step {
            self.runs.enqueue(&run.id, step).await?;
        }
        Ok(format!("request by {login}: stored for run {}", run.id))
    }

    /// Whether the run is done or verified with its pull request still
    /// open: a request is then the pull request's review round. A done
    /// run whose pull request was merged is restarted by a request
    /// instead, as by `/closer run`.
    async fn at_rest_with_open_pull(
        &self,
        client: &InstallationClient,
        run: &crate::model::Run,
    ) -> Result<bool, EngineError> {
        let at_rest = matches!(run.state, RunState::Done | RunState::Verifying);
        let Some(pull) = run.pull_request.filter(|_| at_rest) else {
            return Ok(false);
        };
        let pull = client.get_pull(&run.repository, pull).await?;
        Ok(pull.state == crate::github::PullState::Open)
    }

    /// Tells `login` that closer takes commands only from users with
    /// `minimum`: once per comment, however often it is edited.
    async fn refuse(
        &self,
        client: &InstallationClient,
        thread: &Thread<'_>,
        comment: &CommentRef,
        login: &str,
        minimum: Permission,
    ) -> Result<(), EngineError> {
        let (repo, number) = (&thread.repo.name, thread.issue.number);
        let refusal = comment::refusal_comment(login, minimum);
        let key = format!("refusal:{}", comment.id);
        self.status
            .post_once_marked(client, repo, number, &key, &refusal)
            .await?;
        Ok(())
    }

    /// Answers `/closer status` with a short comment, once per `key`.
    async fn answer_status(
        &self,
        client: &Arc<InstallationClient>,
        repo: &RepoName,
        number: IssueNumber,
        key: &str,
    ) -> Result<(), EngineError> {
        let run = runs::by_issue(self.runs.store().pool(), repo, number).await?;
        // The status comment's address: the issue's page, at the comment.
        let link = match run.as_ref().and_then(|r| r.status_comment_id) {
            Some(id) => {
                let issue = client.get_issue(repo, number).await?;
                Some(format!("{}#issuecomment-{id}", issue.html_url))
            }
            None => None,
        };
        let view = match run {
            Some(run) => {
                let ctx = RunContext::load_lenient(run, client.clone(), &self.agents.names())?;
                Some(self.status.view(&ctx).await?)
            }
            None => None,
        };
        let body = comment::status_answer(view.as_ref(), link.as_deref());
        self.status
            .post_once_marked(client, repo, number, key, &body)
            .await?;
        Ok(())
    }

    /// Whether `login` has at least `minimum` on the repository. A lookup
    /// that fails for a while (GitHub down, a rate limit) is an error, so
    /// the job is tried again later instead of refusing a maintainer for
    /// GitHub's outage; any other failure denies.
    pub(super) async fn permitted(
        &self,
        client: &InstallationClient,
        repo: &RepoName,
        login: &str,
        minimum: Permission,
    ) -> Result<bool, EngineError> {
        match client.collaborator_permission(repo, login).await {
            Ok(p) => Ok(p >= minimum),
            Err(e) if e.is_transient() => Err(e.into()),
            Err(e) => {
                tracing::warn!(%repo, user = %login, error = %e, "permission lookup failed; denied");
                Ok(false)
            }
        }
    }

    /// Whether `login` may steer the run of `ctx` now: its words reach the
    /// prompt. Against [`Engine::steering_minimum`], the stricter of the
    /// run's configuration and the repository's current one.
    pub(super) async fn permitted_to_steer(
        &self,
        client: &InstallationClient,
        ctx: &RunContext,
        login: &str,
    ) -> Result<bool, EngineError> {
        let snapshot = ctx.config.commands.min_permission;
        let minimum = self.steering_minimum(client, &ctx.run, snapshot).await?;
        self.permitted(client, ctx.repo(), login, minimum).await
    }
}

/// The key of closer's replies to a comment's commands: the comment and a
/// digest of its text (an edit is a new text).
fn reply_key(comment: &CommentRef) -> String {
    format!("reply:{}:{}", comment.id, digest(&comment.body))
}

/// Whether `login` wrote the run's issue (the deleted-user ghost never
/// did), as the event's own issue says: GitHub writes each payload with
/// the logins of the moment, so an author who renamed themselves is still
/// the author, and a stranger who took their old login is not. The login
/// the run saw at its start is not asked.
fn is_issue_author(thread: &Thread<'_>, login: &str) -> bool {
    login != GHOST_LOGIN && login == thread.issue.author.login
}
