//! The fake GitHub's model: installations, tokens, repositories with their
//! files, issues, comments, labels, permissions, reactions, pull requests
//! with their reviews and review comments, assignees,
//! project boards (`projects.rs`), plus the log of every request it
//! received. Plain data, no HTTP here; the routes read and change it under
//! one lock.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Duration;

use closer::clock::{Millis, SharedClock};
use jsonwebtoken::DecodingKey;
use sha2::{Digest, Sha256};

use super::faults::FaultRule;
use super::projects::FakeProject;

/// A user or bot as the fake knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeUser {
    pub login: String,
    pub is_bot: bool,
}

impl FakeUser {
    pub fn user(login: &str) -> Self {
        Self {
            login: login.to_owned(),
            is_bot: false,
        }
    }

    pub fn bot(login: &str) -> Self {
        Self {
            login: login.to_owned(),
            is_bot: true,
        }
    }

    /// A stable numeric id derived from the login.
    pub fn id(&self) -> u64 {
        self.login.bytes().fold(1_469_598_103u64, |h, b| {
            (h ^ b as u64).wrapping_mul(1_099_511_628_211)
        }) % 100_000_000
            + 1
    }
}

/// One request as the fake received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    pub body: String,
    /// When it arrived.
    pub at: std::time::Instant,
}

#[derive(Debug, Clone)]
pub struct Installation {
    pub id: i64,
    pub account: String,
    /// `owner/name` of the repositories it covers.
    pub repos: BTreeSet<String>,
    /// Suspended: no token is minted for it (403).
    pub suspended: bool,
}

#[derive(Debug, Clone)]
pub struct IssuedToken {
    pub installation: i64,
    pub expires_at: Millis,
    /// The repository names it was minted for (`None`: all the
    /// installation's).
    pub repositories: Option<BTreeSet<String>>,
    /// The permissions it was minted with (`None`: all the App's).
    pub permissions: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Clone)]
pub struct FakeFile {
    pub content: Vec<u8>,
    pub sha: String,
}

impl FakeFile {
    pub fn new(content: &[u8]) -> Self {
        let digest = Sha256::digest(content);
        Self {
            content: content.to_vec(),
            sha: hex::encode(&digest[..20]),
        }
    }

    pub fn etag(&self) -> String {
        format!("\"{}\"", self.sha)
    }
}

#[derive(Debug, Clone)]
pub struct FakeIssue {
    pub number: u64,
    pub title: String,
    pub body: Option<String>,
    pub state: String,
    pub state_reason: Option<String>,
    pub labels: Vec<String>,
    pub author: FakeUser,
    /// Logins of the assignees.
    pub assignees: Vec<String>,
    pub created_at: Millis,
    pub updated_at: Millis,
    pub closed_at: Option<Millis>,
}

#[derive(Debug, Clone)]
pub struct FakeComment {
    pub id: u64,
    pub issue: u64,
    pub body: String,
    pub author: FakeUser,
    /// The App id when a GitHub App posted it.
    pub via_app: Option<u64>,
    pub created_at: Millis,
    pub updated_at: Millis,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeLabel {
    pub id: u64,
    pub name: String,
    pub color: String,
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReactionSubject {
    Comment(u64),
    Issue(u64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeReaction {
    pub id: u64,
    pub subject: ReactionSubject,
    pub content: String,
    pub user: String,
}

#[derive(Debug, Clone)]
pub struct FakePull {
    pub id: u64,
    pub number: u64,
    pub title: String,
    pub body: Option<String>,
    /// Branch name in the same repository.
    pub head: String,
    pub base: String,
    pub state: String,
    pub merged: bool,
    /// The head commit it was merged at (`None`: not merged, or the
    /// repository's git was not reachable); shown as `head.sha`.
    pub merged_sha: Option<String>,
    pub author: FakeUser,
    pub created_at: Millis,
    pub updated_at: Millis,
}

/// A pull request review.
#[derive(Debug, Clone)]
pub struct FakeReview {
    pub id: u64,
    pub pull: u64,
    /// `APPROVED`, `CHANGES_REQUESTED` or `COMMENTED` (as the REST API
    /// writes it).
    pub state: String,
    pub body: String,
    pub author: FakeUser,
    pub submitted_at: Millis,
}

/// A review comment: on lines of a pull request's diff, the first of a
/// thread or a reply in one.
#[derive(Debug, Clone)]
pub struct FakeReviewComment {
    pub id: u64,
    pub pull: u64,
    pub review: Option<u64>,
    pub body: String,
    pub author: FakeUser,
    /// The App id when a GitHub App posted it.
    pub via_app: Option<u64>,
    pub path: String,
    pub line: Option<u64>,
    pub start_line: Option<u64>,
    pub diff_hunk: String,
    pub in_reply_to: Option<u64>,
    pub created_at: Millis,
    /// Later than `created_at` once the comment was edited.
    pub updated_at: Millis,
}

#[derive(Debug, Clone)]
pub struct Repo {
    pub id: u64,
    /// When it was created (`created_at`).
    pub created_at: Millis,
    pub owner: String,
    pub name: String,
    pub default_branch: String,
    pub clone_url: String,
    pub private: bool,
    /// `(ref, path)` → file.
    pub files: BTreeMap<(String, String), FakeFile>,
    pub issues: BTreeMap<u64, FakeIssue>,
    pub comments: BTreeMap<u64, FakeComment>,
    /// Keyed by lower-cased name (GitHub label names are case-insensitive).
    pub labels: BTreeMap<String, FakeLabel>,
    /// login → role name (`admin`, `maintain`, `write`, `triage`, `read`).
    pub permissions: HashMap<String, String>,
    pub reactions: Vec<FakeReaction>,
    pub pulls: BTreeMap<u64, FakePull>,
    pub reviews: BTreeMap<u64, FakeReview>,
    pub review_comments: BTreeMap<u64, FakeReviewComment>,
    /// Issues and pull requests share numbers.
    pub next_number: u64,
}

impl Repo {
    pub fn full_name(&self) -> String {
        format!("{}/{}", self.owner, self.name)
    }

    pub fn take_number(&mut self) -> u64 {
        self.next_number += 1;
        self.next_number
    }

    /// Whether `number` is an issue or a pull request: either has a
    /// conversation of issue comments.
    pub fn has_conversation(&self, number: u64) -> bool {
        self.issues.contains_key(&number) || self.pulls.contains_key(&number)
    }

    /// An issue's GraphQL node id, unique across repositories.
    pub fn issue_node_id(&self, number: u64) -> String {
        format!("I_{}_{number}", self.id)
    }
}

/// The App the fake trusts.
pub struct AppIdentity {
    pub id: u64,
    pub slug: String,
    pub public_key: DecodingKey,
}

/// Primary rate limit bookkeeping, reported in every answer's headers.
#[derive(Debug, Clone)]
pub struct RateLimit {
    pub limit: u32,
    pub remaining: u32,
}

/// Everything the fake knows.
pub struct State {
    /// The fake's own root URL (`http://127.0.0.1:port`), for `url` fields.
    pub base_url: String,
    pub clock: SharedClock,
    pub app: AppIdentity,
    pub installations: BTreeMap<i64, Installation>,
    pub tokens: HashMap<String, IssuedToken>,
    /// The tokens in the order they were minted.
    pub token_log: Vec<String>,
    /// Repositories served over git's smart HTTP: `owner/name` → bare repo.
    pub git_roots: BTreeMap<String, std::path::PathBuf>,
    pub token_ttl: Duration,
    pub token_exchanges: u32,
    pub repos: BTreeMap<String, Repo>,
    pub requests: Vec<RecordedRequest>,
    /// Woken at every request recorded.
    pub request_seen: std::sync::Arc<tokio::sync::Notify>,
    pub faults: Vec<FaultRule>,
    pub rate_limit: RateLimit,
    /// Projects (v2) boards, reached through `POST /graphql`.
    pub projects: Vec<FakeProject>,
    /// Repositories that moved: the old `owner/name` → where its API now
    /// lives (`{base}/repos/new-owner/new-name`), answered as redirects.
    pub moved: BTreeMap<String, String>,
    /// Transferred issues and their comments: the old path (and every path
    /// under it) → the new one, answered as redirects.
    pub moved_paths: BTreeMap<String, String>,
    /// Deleted issues, as `/repos/{owner}/{name}/issues/{n}`: that path and
    /// every path under it answer 410, as GitHub does.
    pub deleted_issues: BTreeSet<String>,
    next_id: u64,
}

impl State {
    pub fn new(base_url: String, clock: SharedClock, app: AppIdentity) -> Self {
        Self {
            base_url,
            clock,
            app,
            installations: BTreeMap::new(),
            tokens: HashMap::new(),
            token_log: Vec::new(),
            git_roots: BTreeMap::new(),
            token_ttl: Duration::from_secs(3600),
            token_exchanges: 0,
            repos: BTreeMap::new(),
            requests: Vec::new(),
            request_seen: Default::default(),
            faults: Vec::new(),
            rate_limit: RateLimit {
                limit: 5000,
                remaining: 5000,
            },
            projects: Vec::new(),
            moved: BTreeMap::new(),
            moved_paths: BTreeMap::new(),
            deleted_issues: BTreeSet::new(),
            next_id: 1000,
        }
    }

    pub fn now(&self) -> Millis {
        self.clock.now_ms()
    }

    /// A fresh id for comments, labels, reactions, pull requests.
    pub fn take_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// The bot user comments made with an installation token carry.
    pub fn bot(&self) -> FakeUser {
        FakeUser::bot(&format!("{}[bot]", self.app.slug))
    }

    pub fn repo_mut(&mut self, full_name: &str) -> &mut Repo {
        self.repos
            .get_mut(full_name)
            .unwrap_or_else(|| panic!("fake GitHub: no repository {full_name}"))
    }

    pub fn repo(&self, full_name: &str) -> &Repo {
        self.repos
            .get(full_name)
            .unwrap_or_else(|| panic!("fake GitHub: no repository {full_name}"))
    }
}
