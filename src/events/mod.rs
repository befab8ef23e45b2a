//! Our own typed webhook events. Everything GitHub sends becomes one of these
//! at the boundary; the rest of the program never looks at raw JSON.
//!
//! Two steps, for two places: [`envelope`] is the cheap read the intake does
//! on every delivery (action, installation, repository, thread) so it can
//! store and route it; [`parse`] is the full typed read a worker does when it
//! processes the stored delivery.

pub mod actions;
pub mod envelope;
pub mod parse;
pub mod signals;

pub use actions::*;
pub use parse::{ParseError, parse_event};

use crate::github::types::{InstallationId, IssueNumber, RepoName, RepositoryId};

/// The events closer subscribes to; anything else is stored as ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventKind {
    Ping,
    Installation,
    InstallationRepositories,
    Issues,
    IssueComment,
    PullRequest,
    PullRequestReview,
    PullRequestReviewComment,
    /// A repository renamed or moved to another owner (its other actions
    /// are triaged away).
    Repository,
}

impl EventKind {
    /// From `X-GitHub-Event`; `None` for an event closer does not handle.
    pub fn from_header(name: &str) -> Option<EventKind> {
        Some(match name {
            "ping" => EventKind::Ping,
            "installation" => EventKind::Installation,
            "installation_repositories" => EventKind::InstallationRepositories,
            "issues" => EventKind::Issues,
            "issue_comment" => EventKind::IssueComment,
            "pull_request" => EventKind::PullRequest,
            "pull_request_review" => EventKind::PullRequestReview,
            "pull_request_review_comment" => EventKind::PullRequestReviewComment,
            "repository" => EventKind::Repository,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Ping => "ping",
            EventKind::Installation => "installation",
            EventKind::InstallationRepositories => "installation_repositories",
            EventKind::Issues => "issues",
            EventKind::IssueComment => "issue_comment",
            EventKind::PullRequest => "pull_request",
            EventKind::PullRequestReview => "pull_request_review",
            EventKind::PullRequestReviewComment => "pull_request_review_comment",
            EventKind::Repository => "repository",
        }
    }
}

/// Who caused an event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub login: String,
    pub id: i64,
    /// `sender.type == "Bot"`.
    pub is_bot: bool,
}

/// The login GitHub shows for a deleted account, and closer for a `user` or
/// `sender` a payload leaves null: nobody in particular, never the author.
pub const GHOST_LOGIN: &str = "ghost";

/// The repository an event happened in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    pub name: RepoName,
    /// GitHub's id of the repository (`repository.id`, which GitHub's
    /// schema requires; `None` only when a payload leaves it out).
    pub id: Option<RepositoryId>,
    /// When GitHub says the repository was created (`repository.created_at`,
    /// milliseconds since the epoch; an ISO 8601 text in most events, a
    /// number of seconds in `push`).
    pub created_at: Option<i64>,
    pub clone_url: Option<String>,
    pub default_branch: Option<String>,
    pub private: bool,
}

/// An issue as the event shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueRef {
    pub number: IssueNumber,
    pub title: String,
    pub body: String,
    pub author: Actor,
    pub labels: Vec<String>,
    pub open: bool,
    /// Set when the "issue" is a pull request.
    pub is_pull_request: bool,
    /// When the issue last changed, as GitHub wrote it (`updated_at`):
    /// every event that changes the issue moves it, a replay does not.
    pub updated_at: Option<String>,
}

/// The fields an `issues.edited` changed, each with its text before the
/// edit; `None`: not changed (or the payload does not say). For an
/// `issues.transferred`, where the issue went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IssueChanges {
    pub title_from: Option<String>,
    pub body_from: Option<String>,
    pub moved_to: Option<MovedIssue>,
}

/// Where a transferred issue lives now (`changes.new_repository` and
/// `changes.new_issue` of `issues.transferred`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MovedIssue {
    /// `owner/name`, as the payload gives it.
    pub repo: String,
    pub number: IssueNumber,
}

/// A comment as the event shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommentRef {
    pub id: i64,
    pub body: String,
    pub author: Actor,
    /// The App that posted it, when one did (`performed_via_github_app`).
    pub via_app_id: Option<i64>,
}

/// A pull request as the event shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRef {
    pub number: IssueNumber,
    pub head_ref: String,
    /// `owner/name` of the repository the head branch is in (a fork's, for
    /// a pull request from a fork); `None` when GitHub gives none.
    pub head_repo: Option<String>,
    pub base_ref: String,
    pub merged: bool,
    pub open: bool,
    /// Who opened it (`pull_request.user`): closer's own pull requests are
    /// opened by the App's bot user.
    pub author: Actor,
    /// The head commit (`head.sha`), when GitHub gives it.
    pub head_sha: Option<String>,
}

/// A pull request review's state (`review.state`), lower-cased as the
/// webhook sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReviewState {
    Approved,
    ChangesRequested,
    Commented,
    Dismissed,
    Other(String),
}

impl ReviewState {
    pub fn parse(s: &str) -> Self {
        match s.to_ascii_lowercase().as_str() {
            "approved" => Self::Approved,
            "changes_requested" => Self::ChangesRequested,
            "commented" => Self::Commented,
            "dismissed" => Self::Dismissed,
            other => Self::Other(other.to_owned()),
        }
    }
}

/// A pull request review as the event shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewRef {
    pub id: i64,
    pub state: ReviewState,
    /// The review's summary text (empty when it has none).
    pub body: String,
    pub author: Actor,
}

/// A review comment (a comment on a line of the diff) as the event shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewCommentRef {
    pub id: i64,
    pub body: String,
    pub author: Actor,
    pub path: String,
    /// The comment's (last) line, when it is on a line of the diff.
    pub line: Option<u64>,
    /// The first line of a multi-line comment.
    pub start_line: Option<u64>,
    pub diff_hunk: String,
    /// The thread's first comment, for a reply in a thread.
    pub in_reply_to: Option<i64>,
    pub review_id: Option<i64>,
    /// The App that posted it, when one did.
    pub via_app_id: Option<i64>,
    /// When it was last changed, as GitHub wrote it (ISO 8601, UTC; empty
    /// when the payload had none): the version of its text.
    pub updated_at: String,
}

/// One typed webhook event.
/// A repository an installation event lists: its name and, when the
/// payload gives it, GitHub's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedRepo {
    pub name: String,
    pub id: Option<RepositoryId>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    Ping {
        zen: Option<String>,
        hook_id: Option<i64>,
    },
    Installation {
        action: InstallationAction,
        installation: InstallationId,
        account_login: String,
        account_type: String,
        repositories: Vec<String>,
        sender: Actor,
    },
    InstallationRepositories {
        action: RepositoriesAction,
        installation: InstallationId,
        added: Vec<String>,
        removed: Vec<ListedRepo>,
        sender: Actor,
    },
    Issues {
        action: IssuesAction,
        installation: Option<InstallationId>,
        repo: Repo,
        issue: IssueRef,
        /// The label added or removed (`labeled` / `unlabeled`).
        label: Option<String>,
        /// The user assigned or unassigned (`assigned` / `unassigned`).
        assignee: Option<Actor>,
        /// What an `edited` changed, as its `changes` says.
        changes: IssueChanges,
        sender: Actor,
    },
    IssueComment {
        action: CommentAction,
        installation: Option<InstallationId>,
        repo: Repo,
        issue: IssueRef,
        comment: CommentRef,
        /// For `edited`: the body before the edit.
        previous_body: Option<String>,
        sender: Actor,
    },
    PullRequest {
        action: PullRequestAction,
        installation: Option<InstallationId>,
        repo: Repo,
        pull: PullRef,
        sender: Actor,
    },
    PullRequestReview {
        action: ReviewAction,
        installation: Option<InstallationId>,
        repo: Repo,
        pull: PullRef,
        review: ReviewRef,
        sender: Actor,
    },
    PullRequestReviewComment {
        action: CommentAction,
        installation: Option<InstallationId>,
        repo: Repo,
        pull: PullRef,
        comment: ReviewCommentRef,
        sender: Actor,
    },
    Repository {
        action: RepositoryAction,
        installation: Option<InstallationId>,
        /// The repository under its name now.
        repo: Repo,
        /// Its name before a `renamed` or `transferred` (from `changes`).
        previous: Option<RepoName>,
        sender: Actor,
    },
}

impl Event {
    /// The repository the event happened in, for the events that have one.
    pub fn repo(&self) -> Option<&Repo> {
        match self {
            Event::Issues { repo, .. }
            | Event::IssueComment { repo, .. }
            | Event::PullRequest { repo, .. }
            | Event::PullRequestReview { repo, .. }
            | Event::PullRequestReviewComment { repo, .. }
            | Event::Repository { repo, .. } => Some(repo),
            Event::Ping { .. }
            | Event::Installation { .. }
            | Event::InstallationRepositories { .. } => None,
        }
    }
}
