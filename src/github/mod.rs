//! GitHub: App authentication, one client per installation, our own types for
//! what GitHub sends. octocrab stays inside this module (it is the HTTP
//! transport); see `docs/github.md` for the retry policy and dry run.

pub mod app;
mod body_limit;
pub mod client;
pub mod closing;
mod comments;
pub mod decode;
pub mod dry_run;
pub mod error;
mod graphql;
mod issues;
mod jwt;
mod labels;
mod links;
pub mod models;
pub mod projects;
mod pulls;
mod redirect;
mod repos;
pub mod retry;
mod reviews;
pub mod scope;
mod token;
mod transport;
pub mod types;
mod wire;

pub use app::{DEFAULT_API_URL, GitHubApp, GitHubSettings};
pub use client::InstallationClient;
pub use dry_run::{MemoryRecorder, RecordedWrite, WriteRecorder};
pub use error::GitHubError;
pub use graphql::graphql_url;
pub use jwt::AppClaims;
pub use models::{
    Actor, AppInfo, Comment, CommentId, FileFetch, Issue, IssueEdit, IssueState, Label,
    LabelCreated, NewPullRequest, ProjectBoard, ProjectField, ProjectOption, PullEdit, PullRequest,
    PullState, Reaction, Repository, ReviewComment, StateReason,
};
pub use projects::{
    Board, DRY_RUN_ITEM_ID, ProjectSyncError, clear_project_status, status_option,
    sync_project_status,
};
pub use retry::RetrySettings;
pub use scope::TokenScope;
pub use token::REFRESH_MARGIN;
pub use transport::MAX_ANSWER_BYTES;
