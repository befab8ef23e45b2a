//! Webhook events → engine actions: the trigger label (on `opened` and
//! `labeled`), `/closer` commands from authorised users, replies while a run
//! awaits one, a human closing the issue (stop), a merged pull request
//! (`close_on: merged`).
//!
//! Never reacts to a bot, to a comment `performed_via_github_app` by our App,
//! or to our App's own user; a permission that cannot be read counts as
//! denied.

use std::sync::Arc;

use super::data::RunData;
use super::{Engine, EngineError, Step, state};
use crate::comment;
use crate::config::repo::RepoConfig;
use crate::config::{ConfigErrors, parse_repo_config};
use crate::engine::command::{Command, CommandError, new_commands};
use crate::events::{
    Actor, CommentAction, CommentRef, Event, IssueRef, IssuesAction, PullRequestAction, Repo,
};
use crate::github::types::{InstallationId, IssueNumber, Permission, RepoName};
use crate::github::{AppInfo, FileFetch, InstallationClient, Reaction};
use crate::store::runs::{self, RunRow};

/// Where the repository config lives.
pub const CONFIG_PATH: &str = ".github/closer.yml";
/// The trigger label when the config cannot say.
const DEFAULT_TRIGGER: &str = "closer";

/// The repository config as read for an event.
pub(super) struct ConfigRead {
    pub text: Option<String>,
    pub parsed: Result<RepoConfig, ConfigErrors>,
}

impl ConfigRead {
    fn trigger_label(&self) -> &str {
        self.parsed
            .as_ref()
            .map_or(DEFAULT_TRIGGER, |c| c.trigger_label.as_str())
    }

    fn min_permission(&self) -> Permission {
        self.parsed
            .as_ref()
            .map_or(Permission::Write, |c| c.commands.min_permission)
    }
}

/// The issue side of an event.
struct Thread<'a> {
    installation: InstallationId,
    repo: &'a Repo,
    issue: &'a IssueRef,
}

impl Engine {
    /// Acts on an issue, comment or pull request event; returns a short
    /// description of what was done (recorded on the delivery).
    pub async fn on_event(&self, event: &Event) -> Result<String, EngineError> {
        match self.dispatch(event).await {
            Err(EngineError::Stopped) => Ok("the run was stopped meanwhile".to_owned()),
            other => other,
        }
    }

    async fn dispatch(&self, event: &Event) -> Result<String, EngineError> {
        match event {
            Event::Issues {
                action,
                installation: Some(installation),
                repo,
                issue,
                label,
                sender,
            } if !issue.is_pull_request => {
                if self.is_us_or_bot(sender).await? {
                    return Ok("issues: our own or a bot's action; ignored".to_owned());
                }
                let thread = Thread {
                    installation: *installation,
                    repo,
                    issue,
                };
                self.on_issue(&thread, action, label.as_deref()).await
            }
            Event::IssueComment {
                action,
                installation: Some(installation),
                repo,
                issue,
                comment,
                previous_body,
                sender,
            } if !issue.is_pull_request => {
                if self.is_us_or_bot(sender).await?
                    || self.is_us_or_bot(&comment.author).await?
                    || self.is_our_app(comment.via_app_id).await?
                {
                    return Ok("comment: our own or a bot's; ignored".to_owned());
                }
                let previous = match action {
                    CommentAction::Created => None,
                    CommentAction::Edited => Some(previous_body.as_deref().unwrap_or("")),
                    _ => return Ok(format!("comment {action:?}: ignored")),
                };
                let thread = Thread {
                    installation: *installation,
                    repo,
                    issue,
                };
                self.on_comment(
                    &thread,
                    comment,
                    previous,
                    *action == CommentAction::Created,
                )
                .await
            }
            Event::PullRequest {
                action: PullRequestAction::Closed,
                installation: Some(installation),
                repo,
                pull,
                ..
            } if pull.merged => {
                self.on_merged(*installation, &repo.name, &pull.head_ref)
                    .await
            }
            _ => Ok("not an engine event".to_owned()),
        }
    }

    async fn is_us_or_bot(&self, actor: &Actor) -> Result<bool, EngineError> {
        if actor.is_bot || actor.login.ends_with("[bot]") {
            return Ok(true);
        }
        Ok(actor.login == self.app_info().await?.bot_login)
    }

    async fn is_our_app(&self, via: Option<i64>) -> Result<bool, EngineError> {
        Ok(match via {
            Some(id) => id == self.app_info().await?.id,
            None => false,
        })
    }

    async fn on_issue(
        &self,
        thread: &Thread<'_>,
        action: &IssuesAction,
        label: Option<&str>,
    ) -> Result<String, EngineError> {
        let issue = thread.issue;
        match action {
            IssuesAction::Opened | IssuesAction::Labeled => {
                let client = self.client(thread.installation.0).await?;
                let config = self.read_config(&client, thread.repo).await?;
                let trigger = config.trigger_label();
                let triggered = match action {
                    IssuesAction::Labeled => label == Some(trigger),
                    _ => issue.labels.iter().any(|l| l == trigger),
                };
                if !triggered {
                    return Ok("issues: no trigger label".to_owned());
                }
                self.trigger(&client, thread, config, false).await
            }
            IssuesAction::Closed => {
                let run = runs::by_issue(
                    self.store.pool(),
                    &thread.repo.name.to_string(),
                    issue_n(issue),
                )
                .await?;
                match run {
                    Some(run) if !state::is_final(&run.state) && !awaiting_merge(&run) => {
                        self.stop(run, "the issue was closed").await?;
                        Ok("issue closed by a person: run stopped".to_owned())
                    }
                    _ => Ok("issue closed: no active run".to_owned()),
                }
            }
            _ => Ok(format!("issues {action:?}: nothing to do")),
        }
    }

    async fn on_comment(
        &self,
        thread: &Thread<'_>,
        comment: &CommentRef,
        previous: Option<&str>,
        created: bool,
    ) -> Result<String, EngineError> {
        let app = self.app_info().await?;
        let commands = new_commands(previous, &comment.body, &app.slug);
        let client = self.client(thread.installation.0).await?;
        let repo = &thread.repo.name;
        let number = IssueNumber(thread.issue.number.0);
        if commands.is_empty() {
            return match created {
                true => self.on_reply(&client, thread, comment).await,
                false => Ok("edited comment without new commands".to_owned()),
            };
        }
        let config = self.read_config(&client, thread.repo).await?;
        let minimum = config.min_permission();
        // Replies are keyed by the comment and its text, so a retried job
        // does not answer twice and an edit's new commands get new answers.
        let reply = reply_key(comment);
        if !self
            .permitted(&client, repo, &comment.author.login, minimum)
            .await
        {
            let refusal = comment::refusal_comment(&comment.author.login, minimum);
            self.post_once_marked(&client, repo, number, &reply, &refusal)
                .await?;
            return Ok(format!("command by {} refused", comment.author.login));
        }
        if let Err(e) = client
            .add_comment_reaction(
                repo,
                crate::github::CommentId(comment.id.max(0) as u64),
                Reaction::Eyes,
            )
            .await
        {
            tracing::warn!(error = %e, "cannot react to a command");
        }
        let config = Some(config);
        let mut done = Vec::new();
        let mut config = config;
        for (i, command) in commands.into_iter().enumerate() {
            let key = format!("{reply}:{i}");
            let outcome = match command {
                Ok(Command::Run) | Ok(Command::Retry) => match config.take() {
                    Some(c) => self.trigger(&client, thread, c, true).await?,
                    None => "already handled".to_owned(),
                },
                Ok(Command::Stop) => {
                    match runs::by_issue(
                        self.store.pool(),
                        &repo.to_string(),
                        issue_n(thread.issue),
                    )
                    .await?
                    {
                        Some(run) if !state::is_final(&run.state) => {
                            self.stop(run, "stopped by a maintainer").await?;
                            "stopped".to_owned()
                        }
                        _ => "stop: no active run".to_owned(),
                    }
                }
                Ok(Command::Status) => {
                    self.answer_status(&client, repo, number, &key).await?;
                    "status answered".to_owned()
                }
                Err(CommandError::Unknown { word, suggestion }) => {
                    let text =
                        comment::unknown_command_comment(&word, suggestion.map(|s| s.as_str()));
                    self.post_once_marked(&client, repo, number, &key, &text)
                        .await?;
                    format!("unknown command {word:?}")
                }
                Err(CommandError::Missing) => {
                    let text = comment::unknown_command_comment("", None);
                    self.post_once_marked(&client, repo, number, &key, &text)
                        .await?;
                    "command word missing".to_owned()
                }
            };
            done.push(outcome);
        }
        Ok(done.join("; "))
    }

    /// A comment by the issue author or an authorised user while the run is
    /// open: stored as a message for the next prompt. While the run awaits
    /// an answer it also resumes it; while it is queued or running, the
    /// next iteration picks it up.
    async fn on_reply(
        &self,
        client: &Arc<InstallationClient>,
        thread: &Thread<'_>,
        comment: &CommentRef,
    ) -> Result<String, EngineError> {
        let repo = &thread.repo.name;
        let Some(run) =
            runs::by_issue(self.store.pool(), &repo.to_string(), issue_n(thread.issue)).await?
        else {
            return Ok("comment: no run".to_owned());
        };
        let awaiting = run.state == state::AWAITING_RESPONSE;
        if !awaiting && run.state != state::RUNNING && run.state != state::QUEUED {
            return Ok(format!("comment: the run is {}", run.state));
        }
        let data = RunData::from_json(&run.data);
        let login = &comment.author.login;
        let is_author = *login == data.issue_author || *login == thread.issue.author.login;
        if !is_author {
            let minimum = match parse_config(data.config_text.as_deref(), &self.agent_names()) {
                Ok(c) => c.commands.min_permission,
                Err(_) => Permission::Write,
            };
            if !self.permitted(client, repo, login, minimum).await {
                return Ok(format!(
                    "comment by {login}: not the author, not authorised"
                ));
            }
        }
        let now = self.store.now_ms();
        runs::add_message(
            self.store.pool(),
            &run.id,
            comment.id,
            login,
            &comment.body,
            now,
        )
        .await?;
        if !awaiting {
            return Ok(format!("reply by {login}: stored for the next prompt"));
        }
        // The run's own job resumes it: the step that asked may still be
        // writing the run, and runs only change state in their own steps.
        self.enqueue(&run.id, Step::Resume).await?;
        Ok(format!("reply by {login}: run resumed"))
    }

    async fn on_merged(
        &self,
        installation: InstallationId,
        repo: &RepoName,
        head: &str,
    ) -> Result<String, EngineError> {
        let Some(n) = head
            .strip_prefix("closer/issue-")
            .and_then(|n| n.parse::<i64>().ok())
        else {
            return Ok("merged pull request: not closer's branch".to_owned());
        };
        let Some(run) = runs::by_issue(self.store.pool(), &repo.to_string(), n).await? else {
            return Ok("merged pull request: no run".to_owned());
        };
        if !awaiting_merge(&run) {
            return Ok("merged pull request: the run does not wait for it".to_owned());
        }
        let client = self.client(installation.0).await?;
        self.complete(&client, run).await?;
        Ok("pull request merged: issue closed".to_owned())
    }

    /// Starts a run for the issue, or restarts an ended one (`restart`: a
    /// command asked for it). An invalid config gets one comment and no run.
    async fn trigger(
        &self,
        client: &Arc<InstallationClient>,
        thread: &Thread<'_>,
        config: ConfigRead,
        restart: bool,
    ) -> Result<String, EngineError> {
        let repo = &thread.repo.name;
        let number = IssueNumber(thread.issue.number.0);
        let parsed = match config.parsed {
            Ok(c) => c,
            Err(errors) => {
                let body = comment::invalid_config_comment(CONFIG_PATH, &errors.to_string());
                // Not repeated while the text stays the same.
                let key = format!("text:{}", digest(&body));
                self.post_once_marked(client, repo, number, &key, &body)
                    .await?;
                return Ok("invalid repository config: no run".to_owned());
            }
        };
        let issue = thread.issue;
        let data = RunData {
            config_text: config.text,
            issue_title: issue.title.clone(),
            issue_body: issue.body.clone(),
            issue_author: issue.author.login.clone(),
            issue_labels: issue.labels.clone(),
            by_label: !restart,
            ..RunData::default()
        };
        let now = self.store.now_ms();
        let fresh = RunRow {
            id: new_run_id(),
            installation_id: thread.installation.0,
            repository: repo.to_string(),
            issue_number: issue_n(issue),
            state: state::QUEUED.to_owned(),
            phase: "preparation".to_owned(),
            completion_type: parsed.completion.kind.as_str().to_owned(),
            task_type: None,
            stage: 1,
            iteration: 0,
            max_iterations: i64::from(parsed.completion.max_iterations),
            branch: format!("closer/issue-{}", issue.number.0),
            base_commit: None,
            clone_url: thread.repo.clone_url.clone(),
            default_branch: thread.repo.default_branch.clone(),
            pull_request: None,
            status_comment_id: None,
            tokens_used: 0,
            cost_usd: 0.0,
            outcome: None,
            data: data.to_json(),
            created_at: now,
            updated_at: now,
        };
        let (mut run, created) = runs::insert_or_get(self.store.pool(), &fresh).await?;
        if created || run.state == state::QUEUED {
            // The status comment is created here, in the delivery job (keyed
            // by the issue), so a stop delivered meanwhile always finds it.
            let mut data = RunData::from_json(&run.data);
            self.publish_status(client, &mut run, &mut data).await?;
            self.enqueue(&run.id, Step::Start).await?;
            return Ok(format!("run {} queued", run.id));
        }
        if !restart || !state::is_final(&run.state) {
            return Ok(format!("run {} already {}", run.id, run.state));
        }
        let old = RunData::from_json(&run.data);
        let restarted = RunData {
            convergence: old.convergence,
            phase_label: old.phase_label,
            failed_label: old.failed_label,
            awaiting_label: old.awaiting_label,
            ..data
        };
        run.state = state::QUEUED.to_owned();
        run.outcome = None;
        run.max_iterations = run.iteration + fresh.max_iterations;
        run.completion_type = fresh.completion_type;
        run.installation_id = fresh.installation_id;
        run.clone_url = fresh.clone_url.or(run.clone_url);
        run.default_branch = fresh.default_branch.or(run.default_branch);
        self.save_restart(&mut run, &restarted).await?;
        self.enqueue(&run.id, Step::Start).await?;
        Ok(format!("run {} restarted", run.id))
    }

    /// Reads and parses `.github/closer.yml` on the default branch.
    pub(super) async fn read_config(
        &self,
        client: &InstallationClient,
        repo: &Repo,
    ) -> Result<ConfigRead, EngineError> {
        let branch = match &repo.default_branch {
            Some(b) => b.clone(),
            None => client.get_repository(&repo.name).await?.default_branch,
        };
        let text = match client
            .get_file(&repo.name, CONFIG_PATH, &branch, None)
            .await?
        {
            FileFetch::Found { content, .. } => {
                Some(String::from_utf8_lossy(&content).into_owned())
            }
            FileFetch::NotFound | FileFetch::NotModified => None,
        };
        let parsed = parse_config(text.as_deref(), &self.agent_names());
        Ok(ConfigRead { text, parsed })
    }

    pub(super) fn agent_names(&self) -> Vec<&str> {
        self.agents.keys().map(String::as_str).collect()
    }

    /// Whether `login` has at least `minimum` on the repository; a failed
    /// lookup denies.
    async fn permitted(
        &self,
        client: &InstallationClient,
        repo: &RepoName,
        login: &str,
        minimum: Permission,
    ) -> bool {
        match client.collaborator_permission(repo, login).await {
            Ok(p) => p >= minimum,
            Err(e) => {
                tracing::warn!(%repo, user = %login, error = %e, "permission lookup failed; denied");
                false
            }
        }
    }
}

/// The key of closer's replies to a comment's commands: the comment and a
/// digest of its text (an edit is a new text).
fn reply_key(comment: &CommentRef) -> String {
    format!("reply:{}:{}", comment.id, digest(&comment.body))
}

/// A short digest of a text, for once-markers.
fn digest(text: &str) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(text.as_bytes())[..6])
}

/// Whether a comment was written by our App.
pub(super) fn is_ours(app: &AppInfo, c: &crate::github::Comment) -> bool {
    c.performed_via_app_id == Some(app.id) || c.author == app.bot_login
}

/// Parses the config text (`None`: no file, the defaults).
pub(super) fn parse_config(
    text: Option<&str>,
    agents: &[&str],
) -> Result<RepoConfig, ConfigErrors> {
    parse_repo_config(text.unwrap_or(""), CONFIG_PATH, agents)
}

fn issue_n(issue: &IssueRef) -> i64 {
    issue.number.0 as i64
}

fn awaiting_merge(run: &RunRow) -> bool {
    run.state == state::VERIFYING && RunData::from_json(&run.data).awaiting_merge
}

/// A fresh run id: `r` and 24 hex digits.
fn new_run_id() -> String {
    format!(
        "r{:012x}{:012x}",
        fastrand::u64(..1 << 48),
        fastrand::u64(..1 << 48)
    )
}
