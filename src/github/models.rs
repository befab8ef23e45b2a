//! What the GitHub client hands to the rest of closer: our own types, built
//! from GitHub's answers in `wire.rs`. Nothing here carries an octocrab type
//! or a secret.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::types::{IssueNumber, RepoName, RepositoryId};

/// A repository as the engine needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repository {
    /// GitHub's id: the same through renames, new for a name taken again.
    pub id: RepositoryId,
    pub full_name: RepoName,
    pub default_branch: String,
    pub clone_url: String,
    pub private: bool,
}

/// Who wrote an issue or a comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Actor {
    pub login: String,
    /// `user.type == "Bot"` (GitHub Apps and other bots).
    pub is_bot: bool,
}

/// Open or closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IssueState {
    Open,
    Closed,
}

impl IssueState {
    pub fn as_str(self) -> &'static str {
        match self {
            IssueState::Open => "open",
            IssueState::Closed => "closed",
        }
    }
}

/// Why an issue was closed (or reopened): GitHub's `state_reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StateReason {
    Completed,
    NotPlanned,
    Reopened,
    Duplicate,
}

impl StateReason {
    pub fn as_str(self) -> &'static str {
        match self {
            StateReason::Completed => "completed",
            StateReason::NotPlanned => "not_planned",
            StateReason::Reopened => "reopened",
            StateReason::Duplicate => "duplicate",
        }
    }

    /// Parses GitHub's value; unknown reasons are `None`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "completed" => Some(StateReason::Completed),
            "not_planned" => Some(StateReason::NotPlanned),
            "reopened" => Some(StateReason::Reopened),
            "duplicate" => Some(StateReason::Duplicate),
            _ => None,
        }
    }
}

/// An issue (or the issue side of a pull request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    pub number: IssueNumber,
    pub title: String,
    /// Empty when the issue has no body.
    pub body: String,
    pub state: IssueState,
    pub state_reason: Option<StateReason>,
    /// Label names.
    pub labels: Vec<String>,
    /// The assignees' logins.
    pub assignees: Vec<String>,
    pub author: Actor,
    pub html_url: String,
    /// GitHub's issues API also returns pull requests.
    pub is_pull_request: bool,
    /// The GraphQL node id (`I_…`), e.g. to add the issue to a project
    /// board; empty when GitHub sent none.
    pub node_id: String,
    /// When it was closed (milliseconds since the epoch), if it is and
    /// GitHub said so.
    pub closed_at: Option<crate::clock::Millis>,
}

/// Changes to an issue; `None` fields are left as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IssueEdit {
    pub title: Option<String>,
    pub body: Option<String>,
    pub state: Option<IssueState>,
    pub state_reason: Option<StateReason>,
}

/// An issue comment's id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CommentId(pub u64);

impl fmt::Display for CommentId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// An issue comment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Comment {
    /// `CommentId(0)` only for a comment synthesised in dry run.
    pub id: CommentId,
    pub body: String,
    pub author: String,
    pub author_is_bot: bool,
    /// The App that posted it, when a GitHub App did.
    pub performed_via_app_id: Option<i64>,
    pub html_url: String,
}

/// A repository label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    pub name: String,
    /// Six hex digits, no `#`.
    pub color: String,
    pub description: Option<String>,
}

/// What `create_label` found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelCreated {
    Created(Label),
    /// GitHub answered 422 `already_exists`.
    AlreadyExists,
}

/// Reactions GitHub accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reaction {
    PlusOne,
    MinusOne,
    Laugh,
    Confused,
    Heart,
    Hooray,
    Rocket,
    Eyes,
}

impl Reaction {
    /// GitHub's `content` value.
    pub fn as_str(self) -> &'static str {
        match self {
            Reaction::PlusOne => "+1",
            Reaction::MinusOne => "-1",
            Reaction::Laugh => "laugh",
            Reaction::Confused => "confused",
            Reaction::Heart => "heart",
            Reaction::Hooray => "hooray",
            Reaction::Rocket => "rocket",
            Reaction::Eyes => "eyes",
        }
    }
}

/// Open or closed, for pull requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullState {
    Open,
    Closed,
}

/// A pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub number: IssueNumber,
    /// Who opened it (`None`: GitHub sent no user, a deleted account).
    pub author: Option<String>,
    /// The branch name, without `owner:`.
    pub head_ref: String,
    /// The head commit (for a merged one: the commit that was merged).
    pub head_sha: String,
    pub base_ref: String,
    pub html_url: String,
    pub state: PullState,
    pub merged: bool,
}

/// A pull request to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewPullRequest {
    pub title: String,
    pub body: String,
    /// Branch in the same repository.
    pub head: String,
    pub base: String,
}

/// Changes to a pull request; `None` fields are left as they are.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullEdit {
    pub title: Option<String>,
    pub body: Option<String>,
    pub state: Option<PullState>,
}

/// The result of reading a file at a ref.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileFetch {
    Found {
        content: Vec<u8>,
        /// Send back as `If-None-Match` next time.
        etag: Option<String>,
        /// The blob sha.
        sha: String,
    },
    /// The ETag we sent still matches (304).
    NotModified,
    /// No such file (or ref).
    NotFound,
}

/// The App itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppInfo {
    pub id: i64,
    pub slug: String,
    /// `<slug>[bot]`: the login its comments carry.
    pub bot_login: String,
}

/// A GitHub Projects (v2) board: its node id and its single-select fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectBoard {
    /// The board's GraphQL node id (`PVT_…`).
    pub id: String,
    pub title: String,
    /// Only the single-select fields (Status and the like); text, number,
    /// date and iteration fields are left out.
    pub fields: Vec<ProjectField>,
}

impl ProjectBoard {
    /// The single-select field with this name, compared case-insensitively.
    pub fn field(&self, name: &str) -> Option<&ProjectField> {
        let name = name.trim();
        self.fields
            .iter()
            .find(|f| f.name.trim().eq_ignore_ascii_case(name))
    }
}

/// A single-select field of a project board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectField {
    /// The field's node id (`PVTSSF_…`).
    pub id: String,
    pub name: String,
    pub options: Vec<ProjectOption>,
}

/// One option of a single-select field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectOption {
    /// The option id GitHub expects as `singleSelectOptionId`.
    pub id: String,
    pub name: String,
}

/// A review comment: a comment on lines of a pull request's diff, the first
/// of a thread or a reply in one (`in_reply_to`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReviewComment {
    pub id: u64,
    pub body: String,
    pub author: Actor,
    /// The App that posted it, when a GitHub App did.
    pub performed_via_app_id: Option<i64>,
    pub path: String,
    /// The comment's (last) line; `None` when the line left the diff.
    pub line: Option<u64>,
    /// The first line of a comment on several lines.
    pub start_line: Option<u64>,
    pub diff_hunk: String,
    /// The thread's first comment, for a reply.
    pub in_reply_to: Option<u64>,
    pub review_id: Option<u64>,
    /// Changed since it was written (its `updated_at` more than a minute
    /// after its `created_at`), by its author or anyone else who may edit
    /// it.
    pub edited: bool,
}
