//! Webhook events → engine actions: the trigger label (on `opened` and
//! `labeled`; taken off, `label_removed.rs`), the issue edited
//! (`issue_edit.rs`), assigning the issue to the App's bot user (unassigning
//! stops), comments (commands, requests and replies, `commands.rs`), a
//! human closing the issue (stop), a merged pull request (`close_on:
//! merged`), and the events on closer's own pull request (`review.rs`).
//! Making or restarting the run a trigger asks for is `new_run.rs`.
//!
//! A delivery triage (`engine::triage`) finds nothing to act on in, about an
//! issue or pull request with no open run, is answered at once, as the
//! intake would have stored it as ignored.
//!
//! Never reacts to a bot, to a comment `performed_via_github_app` by our App,
//! or to our App's own user; a permission that cannot be read counts as
//! denied. An assignment, an unassignment, a close or a removed trigger
//! label that would start or stop a run is first read back from GitHub: a
//! signed delivery replayed under a new id says what happened once, not
//! what is so now. A close that GitHub's pull request read may not have
//! caught up with (the run's pull request still open) is looked at again
//! for 20 s before it stops the run.

use super::data::RunData;
use super::review::PullEvent;
use super::{Engine, EngineError, Step};
use crate::comment;
use crate::engine::triage::{Verdict, triage};
use crate::events::signals::Signals;
use crate::events::{
    Actor, CommentAction, Event, IssueChanges, IssueRef, IssuesAction, PullRef, PullRequestAction,
    Repo, RepositoryAction,
};
use crate::github::{AppInfo, InstallationClient, Issue, IssueState};
use crate::model::{InstallationId, IssueNumber, Permission, RepoName, RunState, branch_issue};
use crate::store::{handled_events, runs};

/// How long after an issue closed a pull request of its run that still
/// reads open may be a read that has not caught up with the merge that
/// closed it (decision 222).
const MERGE_SETTLES: std::time::Duration = std::time::Duration::from_secs(20);

/// The wait before looking at such a pull request again.
const MERGE_LOOK_AGAIN: std::time::Duration = std::time::Duration::from_secs(4);

/// A change of the trigger label (its name) that a user may not make.
#[derive(Clone, Copy)]
pub(super) enum LabelChange<'a> {
    Added(&'a str),
    Removed(&'a str),
}

/// The issue side of an event.
pub(super) struct Thread<'a> {
    pub installation: InstallationId,
    pub repo: &'a Repo,
    pub issue: &'a IssueRef,
}

impl Engine {
    /// Acts on an issue, comment or pull request event; returns a short
    /// description of what was done (recorded on the delivery).
    pub async fn on_event(&self, event: &Event) -> Result<String, EngineError> {
        if !self.can_matter(event).await? {
            return Ok("triage: nothing to act on and no open run".to_owned());
        }
        self.set_aside_replaced(event).await?;
        match self.dispatch(event).await {
            Err(EngineError::Stopped) => Ok("the run was stopped meanwhile".to_owned()),
            other => other,
        }
    }

    /// Triage's answer (`engine::triage`, the one the intake gave), with the
    /// open run checked now: deliveries about one thread are processed in
    /// order, so any earlier one that could start a run has done so.
    async fn can_matter(&self, event: &Event) -> Result<bool, EngineError> {
        let signals = Signals::of(event);
        let slug = match signals.comment {
            Some(_) => Some(self.github.app_info().await?.slug),
            None => None,
        };
        match triage(&signals, slug.as_deref()) {
            Verdict::Matters(_) => return Ok(true),
            Verdict::Never => return Ok(false),
            Verdict::IfOpenRun => {}
        }
        let (repo, number) = match event {
            Event::Issues { repo, issue, .. } | Event::IssueComment { repo, issue, .. } => {
                (repo, issue.number)
            }
            Event::PullRequest { repo, pull, .. }
            | Event::PullRequestReview { repo, pull, .. }
            | Event::PullRequestReviewComment { repo, pull, .. } => (repo, pull.number),
            _ => return Ok(true),
        };
        let pool = self.runs.store().pool();
        Ok(runs::open_on_thread(pool, &repo.name, number).await?)
    }

    async fn dispatch(&self, event: &Event) -> Result<String, EngineError> {
        match event {
            Event::Issues {
                action,
                installation: Some(installation),
                repo,
                issue,
                label,
                assignee,
                changes,
                sender,
            } if !issue.is_pull_request => {
                if self.github.is_us_or_bot(sender).await? {
                    return Ok("issues: our own or a bot's action; ignored".to_owned());
                }
                let thread = Thread {
                    installation: *installation,
                    repo,
                    issue,
                };
                match action {
                    IssuesAction::Assigned | IssuesAction::Unassigned => {
                        self.on_assignment(&thread, action, assignee.as_ref(), sender)
                            .await
                    }
                    IssuesAction::Edited => self.on_edited(&thread, changes, sender).await,
                    IssuesAction::Transferred => self.on_transferred(&thread, changes).await,
                    _ => {
                        self.on_issue(&thread, action, label.as_deref(), sender)
                            .await
                    }
                }
            }
            Event::IssueComment {
                action,
                installation: Some(installation),
                repo,
                issue,
                comment,
                previous_body,
                sender,
            } => {
                // Whoever deletes a comment (a moderation bot too), its reply
                // goes with it.
                let deleted = *action == CommentAction::Deleted;
                if (!deleted && self.github.is_us_or_bot(sender).await?)
                    || self.github.is_us_or_bot(&comment.author).await?
                    || self.github.is_our_app(comment.via_app_id).await?
                {
                    return Ok("comment: our own or a bot's; ignored".to_owned());
                }
                let previous = match action {
                    CommentAction::Created => None,
                    CommentAction::Edited => Some(previous_body.as_deref().unwrap_or("")),
                    CommentAction::Deleted => return self.on_comment_deleted(comment).await,
                    _ => return Ok(format!("comment {action:?}: ignored")),
                };
                let thread = Thread {
                    installation: *installation,
                    repo,
                    issue,
                };
                if issue.is_pull_request {
                    return match previous {
                        None => self.on_pull_request_comment(&thread, comment).await,
                        Some(_) => Ok("edited pull request comment: ignored".to_owned()),
                    };
                }
                self.on_comment(&thread, comment, previous, sender).await
            }
            _ => self.dispatch_pull(event).await,
        }
    }

    /// The events about pull requests: closer's own (reviews, review
    /// comments, pushes, closing) and the merge of a run's pull request.
    async fn dispatch_pull(&self, event: &Event) -> Result<String, EngineError> {
        match event {
            Event::PullRequest {
                action,
                installation: Some(installation),
                repo,
                pull,
                sender,
            } => {
                let on = PullEvent {
                    installation: *installation,
                    repo,
                    pull,
                };
                match action {
                    PullRequestAction::Closed if pull.merged => {
                        self.on_merged(&repo.name, pull).await
                    }
                    PullRequestAction::Closed => self.on_pull_closed(&on).await,
                    PullRequestAction::Synchronize => self.on_synchronize(&on, sender).await,
                    _ => Ok(format!("pull_request {action:?}: nothing to do")),
                }
            }
            Event::PullRequestReview {
                action,
                installation: Some(installation),
                repo,
                pull,
                review,
                sender,
            } => {
                let on = PullEvent {
                    installation: *installation,
                    repo,
                    pull,
                };
                self.on_review(&on, action, review, sender).await
            }
            Event::PullRequestReviewComment {
                action,
                installation: Some(installation),
                repo,
                pull,
                comment,
                sender,
            } => {
                let on = PullEvent {
                    installation: *installation,
                    repo,
                    pull,
                };
                self.on_review_comment(&on, action, comment, sender).await
            }
            Event::Repository {
                action: RepositoryAction::Renamed | RepositoryAction::Transferred,
                installation: Some(installation),
                repo,
                previous,
                ..
            } => {
                self.on_repository_moved(*installation, repo, previous.as_ref())
                    .await
            }
            _ => Ok("not an engine event".to_owned()),
        }
    }

    async fn on_issue(
        &self,
        thread: &Thread<'_>,
        action: &IssuesAction,
        label: Option<&str>,
        sender: &Actor,
    ) -> Result<String, EngineError> {
        let issue = thread.issue;
        match action {
            IssuesAction::Opened | IssuesAction::Labeled => {
                let client = self.github.client(thread.installation).await?;
                let config = self.read_config(&client, thread.repo).await?;
                let trigger = config.trigger_label().to_owned();
                let triggered = match action {
                    IssuesAction::Labeled => {
                        label.is_some_and(|l| comment::same_label(l, &trigger))
                    }
                    _ => issue
                        .labels
                        .iter()
                        .any(|l| comment::same_label(l, &trigger)),
                };
                if !triggered {
                    return Ok("issues: no trigger label".to_owned());
                }
                let (repo, number) = (&thread.repo.name, thread.issue.number);
                let minimum = self.commands_minimum(&config, repo, number).await?;
                if !self
                    .permitted(&client, &thread.repo.name, &sender.login, minimum)
                    .await?
                {
                    return self
                        .undo_label_change(
                            &client,
                            thread,
                            sender,
                            LabelChange::Added(&trigger),
                            minimum,
                        )
                        .await;
                }
                if issue.open && closed_since(&client, thread).await? {
                    return Ok(format!(
                        "issues {action:?}: the issue was closed since, on GitHub: no run"
                    ));
                }
                self.trigger(&client, thread, config, false).await
            }
            IssuesAction::Unlabeled => self.on_unlabeled(thread, label, sender).await,
            IssuesAction::Closed => self.on_closed(thread).await,
            IssuesAction::Deleted => self.on_deleted(thread).await,
            _ => Ok(format!("issues {action:?}: nothing to do")),
        }
    }

    /// An issue closed by a person stops its run, also one waiting for the
    /// merge of its pull request (closed as not planned, or by the merge of
    /// another pull request); one closed by the merge of the run's own pull
    /// request does not. GitHub is asked first: a replayed `closed` must
    /// not stop the run of an issue opened again. The run's pull request
    /// still open in the first 20 s after the close may be a read behind
    /// the merge that closed it: the delivery is looked at again.
    async fn on_closed(&self, thread: &Thread<'_>) -> Result<String, EngineError> {
        let (repo, number) = (&thread.repo.name, thread.issue.number);
        let run = runs::by_issue(self.runs.store().pool(), repo, number).await?;
        let Some(run) = run.filter(super::failure::stop_applies) else {
            return Ok("issue closed: no active run".to_owned());
        };
        let client = self.github.client(thread.installation).await?;
        let issue = client.get_issue(repo, number).await?;
        if issue.state != IssueState::Closed {
            return Ok("issue closed, but open on GitHub now: run goes on".to_owned());
        }
        // Closed by the merge of closer's pull request (its `Closes #n`)
        // while the run worked: the run's next step, or the merge's, ends
        // it as done (`finish.rs`).
        if run.state != RunState::Stopped {
            match super::finish::pull_end(&client, repo, &run).await? {
                Some(super::finish::PullEnd::Merged(_)) => {
                    // The merge's own step may have read the pull request
                    // before GitHub's reads caught up, and ended nothing.
                    self.runs.enqueue(&run.id, Step::Merged).await?;
                    let merged = "issue closed by the merge of its pull request";
                    return Ok(format!("{merged}: the run ends as done"));
                }
                None if run.pull_request.is_some() && self.closed_just_now(&issue) => {
                    return Err(EngineError::NotYet {
                        why: "the issue is closed and its run's pull request still reads open",
                        wait: MERGE_LOOK_AGAIN,
                    });
                }
                _ => {}
            }
        }
        self.stop(&run, "the issue was closed").await?;
        Ok("issue closed by a person: run stopped".to_owned())
    }

    /// True while `issue` was closed less than [`MERGE_SETTLES`] ago by
    /// closer's clock. An issue GitHub gives no time for is not, nor one
    /// whose time is further ahead of closer's clock than that: a clock that
    /// far behind GitHub's would hold the close back as long.
    fn closed_just_now(&self, issue: &Issue) -> bool {
        let now = self.runs.store().now_ms();
        let settles = MERGE_SETTLES.as_millis() as i64;
        let age = |at: crate::clock::Millis| now.saturating_sub(at);
        issue
            .closed_at
            .is_some_and(|at| (-settles..settles).contains(&age(at)))
    }

    /// A deleted issue ends its run. GitHub is asked first: a replayed
    /// `deleted` must not stop the run of an issue that is still there.
    async fn on_deleted(&self, thread: &Thread<'_>) -> Result<String, EngineError> {
        let store = self.runs.store();
        let number = thread.issue.number;
        let run = runs::by_issue(store.pool(), &thread.repo.name, number).await?;
        let Some(run) = run.filter(super::failure::stop_applies) else {
            return Ok("issue deleted: no active run".to_owned());
        };
        let client = self.github.client(thread.installation).await?;
        match client.get_issue(&thread.repo.name, number).await {
            Ok(_) => return Ok("issue deleted, but GitHub still has it: run goes on".to_owned()),
            Err(e) if e.is_gone() => {}
            Err(e) => return Err(e.into()),
        }
        self.stop(&run, "the issue was deleted").await?;
        Ok("issue deleted: run stopped".to_owned())
    }

    /// A transferred issue ends its run: the run's repository, branch and
    /// pull request stay where they were, and the issue is now another
    /// repository's (a run there starts as any run does, by its label or a
    /// command). GitHub is asked first: a replayed `transferred` must not
    /// stop the run of an issue still at its address.
    async fn on_transferred(
        &self,
        thread: &Thread<'_>,
        changes: &IssueChanges,
    ) -> Result<String, EngineError> {
        let (repo, number) = (&thread.repo.name, thread.issue.number);
        let run = runs::by_issue(self.runs.store().pool(), repo, number).await?;
        let Some(run) = run.filter(super::failure::stop_applies) else {
            return Ok("issue transferred: no active run".to_owned());
        };
        let client = self.github.client(thread.installation).await?;
        match client.get_issue(repo, number).await {
            Ok(issue) if !moved(&issue, repo, number) => {
                return Ok(
                    "issue transferred, but GitHub still has it here: run goes on".to_owned(),
                );
            }
            Ok(_) => {}
            Err(e) if e.is_gone() => {}
            Err(e) => return Err(e.into()),
        }
        let why = match &changes.moved_to {
            Some(to) => format!("the issue was moved to {}#{}", to.repo, to.number),
            None => "the issue was moved to another repository".to_owned(),
        };
        self.stop(&run, &why).await?;
        Ok(format!("{why}: run stopped"))
    }

    /// The issue assigned to the App's bot user by an authorised user
    /// starts a run (restarting an ended one, as `/closer run` does);
    /// unassigning it stops the run. Other assignees are not closer's
    /// business.
    ///
    /// Each (un)assignment is looked at once, by its sender and the
    /// issue's `updated_at`: a delivery replayed under a new id carries the
    /// `updated_at` of the one already seen, while every new change moves
    /// it (GitHub writes it to the second, so the same person's change
    /// within the same second as the last counts as the same). A payload
    /// without it is ignored; GitHub's schema requires it.
    async fn on_assignment(
        &self,
        thread: &Thread<'_>,
        action: &IssuesAction,
        assignee: Option<&Actor>,
        sender: &Actor,
    ) -> Result<String, EngineError> {
        let app = self.github.app_info().await?;
        if !assignee.is_some_and(|a| is_app(&app, &a.login)) {
            return Ok(format!("issues {action:?}: not closer"));
        }
        let Some(at) = &thread.issue.updated_at else {
            return Ok(format!(
                "issues {action:?}: the issue has no updated_at; ignored"
            ));
        };
        let (repo, number) = (&thread.repo.name, thread.issue.number);
        let key = format!("{repo}#{number}:{action:?}:{at}:{}", sender.login);
        let store = self.runs.store();
        if handled_events::handled(store.pool(), &key).await? {
            return Ok(format!("issues {action:?}: this one was seen already"));
        }
        let outcome = self.assignment(thread, action, sender, &app).await?;
        handled_events::mark_handled(store.pool(), &key, store.now_ms()).await?;
        Ok(outcome)
    }

    /// An (un)assignment of the App seen for the first time (see
    /// [`Engine::on_assignment`]), acted on when its sender is authorised
    /// and GitHub still shows it: a delivery says what happened, not what
    /// is so now.
    async fn assignment(
        &self,
        thread: &Thread<'_>,
        action: &IssuesAction,
        sender: &Actor,
        app: &AppInfo,
    ) -> Result<String, EngineError> {
        let (repo, number) = (&thread.repo.name, thread.issue.number);
        let assigning = *action == IssuesAction::Assigned;
        let run = runs::by_issue(self.runs.store().pool(), repo, number).await?;
        let active = run.filter(|run| !run.state.is_final());
        if !assigning && active.is_none() {
            return Ok("unassigned: no active run".to_owned());
        }
        let client = self.github.client(thread.installation).await?;
        let config = self.read_config(&client, thread.repo).await?;
        let minimum = self.commands_minimum(&config, repo, number).await?;
        if !self
            .permitted(&client, repo, &sender.login, minimum)
            .await?
        {
            return Ok(format!("assignment by {}: not authorised", sender.login));
        }
        let now = client.get_issue(repo, number).await?;
        if now.assignees.iter().any(|login| is_app(app, login)) != assigning {
            return Ok(format!("issues {action:?}: not so on GitHub now"));
        }
        match active {
            Some(run) if !assigning => {
                self.stop(&run, "closer was unassigned").await?;
                Ok("unassigned: run stopped".to_owned())
            }
            _ => self.trigger(&client, thread, config, true).await,
        }
    }

    async fn on_merged(&self, repo: &RepoName, pull: &PullRef) -> Result<String, EngineError> {
        let Some(n) = branch_issue(&pull.head_ref) else {
            return Ok("merged pull request: not closer's branch".to_owned());
        };
        // closer's branch lives in the issue's repository; a fork's branch
        // of the same name is somebody else's.
        if pull.head_repo.as_deref() != Some(repo.to_string().as_str()) {
            return Ok(format!(
                "merged pull request from {}: not closer's branch",
                pull.head_repo.as_deref().unwrap_or("an unknown repository")
            ));
        }
        let Some(run) = runs::by_issue(self.runs.store().pool(), repo, n).await? else {
            return Ok("merged pull request: no run".to_owned());
        };
        // The step acts on a run waiting for the merge or for an answer, on
        // a run at work once its step is done (`finish.rs`), and on a run
        // that failed with its pull request open.
        let failed_open = run.state == RunState::Failed && run.pull_request.is_some();
        if run.state.is_final() && !failed_open {
            return Ok("merged pull request: the run is over".to_owned());
        }
        // The run's own step closes it: the `finish` step may still be
        // writing the run (it opened the pull request a moment ago).
        self.runs.enqueue(&run.id, Step::Merged).await?;
        Ok(format!(
            "pull request merged: run {} closes the issue",
            run.id
        ))
    }

    /// A change of the trigger label by a user below
    /// `commands.min_permission`, undone: put on, it is taken off (no run;
    /// not while a run the label started is under way, see below);
    /// taken off, it is put back (the run goes on). One short refusal per
    /// issue, user and kind of change, posted first, so a retry of a
    /// delivery whose first try failed between the two still explains it.
    pub(super) async fn undo_label_change(
        &self,
        client: &InstallationClient,
        thread: &Thread<'_>,
        sender: &Actor,
        change: LabelChange<'_>,
        minimum: Permission,
    ) -> Result<String, EngineError> {
        let (repo, number, who) = (&thread.repo.name, thread.issue.number, &sender.login);
        if let LabelChange::Added(_) = change
            && self.open_run_by_label(thread).await?
        {
            // A refusal delivered late (its first try deferred, or a
            // redelivery) after a maintainer's label started a run: the
            // label is theirs now, and taking it off would stop their run.
            return Ok(format!(
                "trigger label by {who}: refused; a run it started is open"
            ));
        }
        let (kind, text) = match change {
            LabelChange::Added(label) => (
                "label-refusal",
                comment::label_refusal_comment(who, label, minimum),
            ),
            LabelChange::Removed(label) => (
                "label-removal-refusal",
                comment::label_removal_refusal_comment(who, label, minimum),
            ),
        };
        let key = format!("{kind}:{number}:{who}");
        self.status
            .post_once_marked(client, repo, number, &key, &text)
            .await?;
        match change {
            LabelChange::Added(label) => {
                client.remove_label(repo, number, label).await?;
                Ok(format!("trigger label by {who}: refused"))
            }
            LabelChange::Removed(label) => {
                client.add_labels(repo, number, &[label]).await?;
                Ok(format!("trigger label removed by {who}: put back"))
            }
        }
    }

    /// Whether the issue has a run under way that its trigger label
    /// started.
    async fn open_run_by_label(&self, thread: &Thread<'_>) -> Result<bool, EngineError> {
        let pool = self.runs.store().pool();
        let run = runs::by_issue(pool, &thread.repo.name, thread.issue.number).await?;
        let Some(run) = run.filter(|r| !r.state.is_final()) else {
            return Ok(false);
        };
        Ok(RunData::of(&run)?.by_label)
    }
}

/// Whether GitHub answered for `repo#number` with an issue that lives
/// elsewhere now: it followed the redirect of a transferred issue to its
/// new repository (its page's address names another repository, or another
/// number), or of a renamed repository (reconciliation tells the two
/// apart, `reconcile.rs`).
pub(super) fn moved(issue: &Issue, repo: &RepoName, number: IssueNumber) -> bool {
    let here = format!("/{repo}/issues/{number}").to_ascii_lowercase();
    issue.number != number || !issue.html_url.to_ascii_lowercase().ends_with(&here)
}

/// Whether `login` is the App's bot user (or its slug).
fn is_app(app: &AppInfo, login: &str) -> bool {
    login.eq_ignore_ascii_case(&app.bot_login) || login.eq_ignore_ascii_case(&app.slug)
}

/// A short digest of a text, for once-markers.
pub(super) fn digest(text: &str) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(text.as_bytes())[..6])
}

/// Whether the issue, open when the event was sent, is closed on GitHub
/// now. GitHub may deliver an issue's `labeled` after the `closed` that
/// followed it, and two replicas may commit them in either order: the
/// label then went on an issue nobody wants worked now (decision 232). A
/// read that lags shows the issue open, as the event did: no worse than
/// before.
async fn closed_since(
    client: &InstallationClient,
    thread: &Thread<'_>,
) -> Result<bool, EngineError> {
    let now = client
        .get_issue(&thread.repo.name, thread.issue.number)
        .await?;
    Ok(now.state == IssueState::Closed)
}
