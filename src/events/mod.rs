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

use crate::github::types::{InstallationId, IssueNumber, RepoName};

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
}

/// One typed webhook event.
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
        removed: Vec<String>,
        sender: Actor,
    },
    Issues {
        action: IssuesAction,
        installation: Option<InstallationId>,
        repo: Repo,
        issue: IssueRef,
        /// The label added or removed (`labeled` / `unlabeled`).
        label: Option<String>,
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
        sender: Actor,
    },
    PullRequestReviewComment {
        action: CommentAction,
        installation: Option<InstallationId>,
        repo: Repo,
        pull: PullRef,
        sender: Actor,
    },
}
