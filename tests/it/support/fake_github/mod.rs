//! An in-memory GitHub served over real HTTP on 127.0.0.1, for closer's
//! production client to talk to: token exchange with real RS256 checks,
//! repositories, files with ETags, issues, comments, labels, permissions,
//! reactions, pull requests and Projects (v2) boards over GraphQL, rate-limit
//! headers, injectable faults, and a log of every request. A model, not a script: tests set up state, let the
//! client act, then look at the state. It must never be used outside tests.
#![allow(dead_code)]
// the API is shared by every story; not each uses all of it
// Handlers answer GitHub-shaped error responses through `Result<_, Response>`;
// the size of the error variant does not matter in a test double.
#![allow(clippy::result_large_err)]

mod auth;
pub mod faults;
pub mod json;
pub mod projects;
mod routes;
pub mod state;

pub use routes::push_rules::Ruleset;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use closer::clock::{self, SharedClock};
use closer::github::types::{IssueNumber, RepoName};
use jsonwebtoken::DecodingKey;
use secrecy::SecretString;

pub use faults::{Fault, FaultRule};
pub use projects::{FakeProject, ProjectOwner};
use state::{AppIdentity, Installation, Repo, State};
pub use state::{
    FakeComment, FakeFile, FakeIssue, FakeLabel, FakePull, FakeReaction, FakeReview,
    FakeReviewComment, FakeUser, ReactionSubject, RecordedRequest,
};

/// The App private key the fake trusts (PKCS#1 PEM, test-only).
pub const PRIVATE_KEY_PEM: &str =
    include_str!("../../../fixtures/github-app/test-app-private-key.pem");
const PUBLIC_KEY_PEM: &str = include_str!("../../../fixtures/github-app/test-app-public-key.pem");

/// The App id the fake expects in the JWT's `iss`.
pub const APP_ID: u64 = 4242;
/// The App's slug; its comments come from `closer-test[bot]`.
pub const APP_SLUG: &str = "closer-test";

/// A running fake GitHub. Dropping it stops the server.
pub struct FakeGitHub {
    url: String,
    state: Arc<Mutex<State>>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for FakeGitHub {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl FakeGitHub {
    /// Starts on the wall clock.
    pub async fn start() -> Self {
        Self::start_with_clock(clock::system()).await
    }

    /// Starts with an injected clock (token expiry, JWT times, timestamps).
    pub async fn start_with_clock(clock: SharedClock) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind fake GitHub");
        let url = format!("http://{}", listener.local_addr().expect("local addr"));
        let public_key =
            DecodingKey::from_rsa_pem(PUBLIC_KEY_PEM.as_bytes()).expect("test public key");
        let app = AppIdentity {
            id: APP_ID,
            slug: APP_SLUG.to_owned(),
            public_key,
        };
        let state = Arc::new(Mutex::new(State::new(url.clone(), clock, app)));
        let router = routes::router(state.clone());
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self { url, state, server }
    }

    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut routes::lock(&self.state))
    }

    /// The API root to give the client as `GITHUB_API_URL`.
    pub fn url(&self) -> String {
        self.url.clone()
    }

    pub fn app_id(&self) -> u64 {
        APP_ID
    }

    /// The login of the App's bot user.
    pub fn bot_login(&self) -> String {
        format!("{APP_SLUG}[bot]")
    }

    pub fn private_key_pem(&self) -> SecretString {
        SecretString::from(PRIVATE_KEY_PEM)
    }

    // ---- installations and tokens ----

    /// Installs the App on an account.
    pub fn add_installation(&self, id: i64, account: &str) {
        self.with(|st| {
            st.installations.insert(
                id,
                Installation {
                    id,
                    account: account.to_owned(),
                    repos: BTreeSet::new(),
                    suspended: false,
                },
            );
        });
    }

    /// Uninstalls the App from an installation's account: the installation
    /// is gone (no token is minted for it) and its tokens are revoked.
    pub fn uninstall(&self, id: i64) {
        self.with(|st| {
            st.installations.remove(&id);
            st.tokens.retain(|_, t| t.installation != id);
        });
    }

    /// Suspends an installation: its tokens are revoked and no new one is
    /// minted (403, "This installation has been suspended").
    pub fn suspend(&self, id: i64) {
        self.with(|st| {
            if let Some(installation) = st.installations.get_mut(&id) {
                installation.suspended = true;
            }
            st.tokens.retain(|_, t| t.installation != id);
        });
    }

    /// Takes a repository out of an installation: its tokens no longer
    /// reach the repository (404).
    pub fn remove_from_installation(&self, id: i64, repo: &RepoName) {
        self.with(|st| {
            if let Some(installation) = st.installations.get_mut(&id) {
                installation.repos.remove(&repo.to_string());
            }
        });
    }

    /// How long issued tokens live (GitHub: one hour).
    pub fn set_token_ttl(&self, ttl: Duration) {
        self.with(|st| st.token_ttl = ttl);
    }

    /// Every token minted, oldest first, with what it was minted for.
    pub fn issued_tokens(&self) -> Vec<(String, state::IssuedToken)> {
        self.with(|st| {
            st.token_log
                .iter()
                .filter_map(|t| st.tokens.get(t).map(|i| (t.clone(), i.clone())))
                .collect()
        })
    }

    /// Serves the bare repository at `bare` over git's smart HTTP (tokens
    /// checked like GitHub's, workflow files refused to the App and any
    /// ruleset set with [`Self::require`] held as GitHub holds them) and
    /// makes that the repository's `clone_url`.
    pub fn serve_git(&self, repo: &RepoName, bare: &std::path::Path) -> String {
        routes::push_rules::install(bare);
        let url = format!("{}/git/{repo}.git", self.url);
        self.with(|st| {
            st.git_roots.insert(repo.to_string(), bare.to_path_buf());
            st.repo_mut(&repo.to_string()).clone_url = url.clone();
        });
        url
    }

    /// Sets a ruleset on a repository served with [`Self::serve_git`]:
    /// pushes that break it are declined as GitHub declines them (GH013).
    pub fn require(&self, repo: &RepoName, ruleset: routes::push_rules::Ruleset) {
        let bare = self
            .with(|st| st.git_roots.get(&repo.to_string()).cloned())
            .expect("a repository served with serve_git");
        routes::push_rules::require(&bare, ruleset);
    }

    /// How many tokens were exchanged.
    pub fn token_exchanges(&self) -> u32 {
        self.with(|st| st.token_exchanges)
    }

    /// Revokes every issued token (next use answers 401).
    pub fn revoke_tokens(&self) {
        self.with(|st| st.tokens.clear());
    }

    // ---- repositories and files ----

    /// Adds a repository (`owner/name`, default branch `main`) to an installation.
    pub fn add_repo(&self, installation: i64, full_name: &str) -> RepoName {
        let name = RepoName::parse(full_name).expect("owner/name");
        self.with(|st| {
            let id = st.take_id();
            let base = st.base_url.clone();
            let created_at = st.now();
            st.repos.insert(
                full_name.to_owned(),
                Repo {
                    id,
                    created_at,
                    owner: name.owner().to_owned(),
                    name: name.name().to_owned(),
                    default_branch: "main".to_owned(),
                    clone_url: format!("{base}/{full_name}.git"),
                    private: false,
                    files: BTreeMap::new(),
                    issues: BTreeMap::new(),
                    comments: BTreeMap::new(),
                    labels: BTreeMap::new(),
                    permissions: HashMap::new(),
                    reactions: Vec::new(),
                    pulls: BTreeMap::new(),
                    reviews: BTreeMap::new(),
                    review_comments: BTreeMap::new(),
                    next_number: 0,
                },
            );
            st.installations
                .get_mut(&installation)
                .expect("add_installation first")
                .repos
                .insert(full_name.to_owned());
        });
        name
    }

    /// GitHub's id of the repository now called `repo`.
    pub fn repo_id(&self, repo: &RepoName) -> u64 {
        self.with(|st| st.repo(&repo.to_string()).id)
    }

    /// Whether a repository is called `repo` now.
    pub fn has_repo(&self, repo: &RepoName) -> bool {
        self.with(|st| st.repos.contains_key(&repo.to_string()))
    }

    /// The repository now called `repo` as a webhook payload shows it.
    pub fn repo_payload(&self, repo: &RepoName) -> serde_json::Value {
        self.with(|st| {
            let r = st.repo(&repo.to_string());
            serde_json::json!({
                "id": r.id,
                "full_name": r.full_name(),
                "clone_url": r.clone_url,
                "default_branch": r.default_branch,
                "private": r.private,
                "created_at": json::time(r.created_at),
            })
        })
    }

    /// Deletes a repository, as its owner can: its issues and everything
    /// else go with it, and its name is free to be taken again.
    pub fn delete_repo(&self, repo: &RepoName) {
        let name = repo.to_string();
        self.with(|st| {
            st.repos.remove(&name).expect("a repository to delete");
            for installation in st.installations.values_mut() {
                installation.repos.remove(&name);
            }
            st.moved.remove(&name);
        });
    }

    pub fn set_default_branch(&self, repo: &RepoName, branch: &str) {
        self.with(|st| st.repo_mut(&repo.to_string()).default_branch = branch.to_owned());
    }

    /// Sets the clone URL the API reports (e.g. a `file://` repository).
    pub fn set_clone_url(&self, repo: &RepoName, url: &str) {
        self.with(|st| st.repo_mut(&repo.to_string()).clone_url = url.to_owned());
    }

    pub fn set_private(&self, repo: &RepoName, private: bool) {
        self.with(|st| st.repo_mut(&repo.to_string()).private = private);
    }

    /// Renames (or transfers) a repository, as GitHub does: its state moves
    /// to `new_full_name`, and calls to the old name are redirected there.
    pub fn rename_repo(&self, repo: &RepoName, new_full_name: &str) -> RepoName {
        let new = RepoName::parse(new_full_name).expect("owner/name");
        let old = repo.to_string();
        self.with(|st| {
            let mut moved = st.repos.remove(&old).expect("a repository to rename");
            moved.owner = new.owner().to_owned();
            moved.name = new.name().to_owned();
            st.repos.insert(new_full_name.to_owned(), moved);
            for installation in st.installations.values_mut() {
                if installation.repos.remove(&old) {
                    installation.repos.insert(new_full_name.to_owned());
                }
            }
            // GitHub binds a token to the repository, not to its name: the
            // tokens minted for it still cover it under the new name.
            let old_name = repo.name().to_owned();
            for token in st.tokens.values_mut() {
                if let Some(repos) = token.repositories.as_mut()
                    && repos.remove(&old_name)
                {
                    repos.insert(new.name().to_owned());
                }
            }
            // A name taken again answers for itself, not for where it led.
            st.moved.remove(new_full_name);
            st.moved.insert(old, format!("/repos/{new_full_name}"));
        });
        new
    }

    /// Transfers an issue to the repository `to` (which the fake knows), as
    /// GitHub does: it takes the next number there, keeps its comments and
    /// the labels `to` has, and its old address and its comments' answer
    /// with redirects to the new ones. Returns the new number.
    pub fn transfer_issue(
        &self,
        repo: &RepoName,
        number: IssueNumber,
        to: &RepoName,
    ) -> IssueNumber {
        let (from, to) = (repo.to_string(), to.to_string());
        self.with(|st| {
            let mut issue = st
                .repo_mut(&from)
                .issues
                .remove(&number.0)
                .expect("an issue to transfer");
            let ids: Vec<u64> = st
                .repo(&from)
                .comments
                .values()
                .filter(|c| c.issue == number.0)
                .map(|c| c.id)
                .collect();
            let comments: Vec<FakeComment> = ids
                .iter()
                .filter_map(|id| st.repo_mut(&from).comments.remove(id))
                .collect();
            let target = st.repo_mut(&to);
            let new = target.take_number();
            issue.number = new;
            issue
                .labels
                .retain(|l| target.labels.contains_key(&l.to_lowercase()));
            target.issues.insert(new, issue);
            for mut c in comments {
                c.issue = new;
                target.comments.insert(c.id, c);
            }
            st.moved_paths.insert(
                format!("/repos/{from}/issues/{}", number.0),
                format!("/repos/{to}/issues/{new}"),
            );
            for id in ids {
                st.moved_paths.insert(
                    format!("/repos/{from}/issues/comments/{id}"),
                    format!("/repos/{to}/issues/comments/{id}"),
                );
            }
            IssueNumber(new)
        })
    }

    /// Deletes an issue, as a repository admin can: the issue and
    /// everything under it (comments, labels) answer `410 Gone` from now on.
    pub fn delete_issue(&self, repo: &RepoName, number: IssueNumber) {
        self.with(|st| {
            st.repo_mut(&repo.to_string()).issues.remove(&number.0);
            st.deleted_issues
                .insert(format!("/repos/{repo}/issues/{}", number.0));
        });
    }

    /// Redirects calls to `repo` to `url` (`{url}/issues/1` for
    /// `/repos/{repo}/issues/1`), e.g. another host, leaving its state here.
    pub fn redirect_repo_to(&self, repo: &RepoName, url: &str) {
        self.with(|st| st.moved.insert(repo.to_string(), url.to_owned()));
    }

    /// Adds a repository label directly.
    pub fn add_repo_label(&self, repo: &RepoName, name: &str) {
        self.with(|st| {
            let id = st.take_id();
            st.repo_mut(&repo.to_string())
                .labels
                .entry(name.to_lowercase())
                .or_insert(FakeLabel {
                    id,
                    name: name.to_owned(),
                    color: "ededed".to_owned(),
                    description: None,
                });
        });
    }

    /// Puts a file at a ref (branch name); its ETag changes with its content.
    pub fn set_file(&self, repo: &RepoName, git_ref: &str, path: &str, content: &str) {
        self.with(|st| {
            st.repo_mut(&repo.to_string()).files.insert(
                (git_ref.to_owned(), path.to_owned()),
                FakeFile::new(content.as_bytes()),
            );
        });
    }

    pub fn remove_file(&self, repo: &RepoName, git_ref: &str, path: &str) {
        self.with(|st| {
            st.repo_mut(&repo.to_string())
                .files
                .remove(&(git_ref.to_owned(), path.to_owned()));
        });
    }

    /// Gives a user a role (`admin`, `maintain`, `write`, `triage`, `read`).
    pub fn set_permission(&self, repo: &RepoName, user: &str, role: &str) {
        self.with(|st| {
            st.repo_mut(&repo.to_string())
                .permissions
                .insert(user.to_owned(), role.to_owned());
        });
    }

    /// `old` renames their account to `new`: from then on GitHub writes
    /// `new` wherever the user appears (their issues and comments, their
    /// permission), and `old` is free for anyone to register. (The fake
    /// derives a user's id from the login, so the id changes too; closer
    /// reads no user id.)
    pub fn rename_user(&self, old: &str, new: &str) {
        self.with(|st| {
            for repo in st.repos.values_mut() {
                let issues = repo.issues.values_mut().map(|i| &mut i.author);
                let comments = repo.comments.values_mut().map(|c| &mut c.author);
                for author in issues.chain(comments).filter(|a| a.login == old) {
                    author.login = new.to_owned();
                }
                if let Some(role) = repo.permissions.remove(old) {
                    repo.permissions.insert(new.to_owned(), role);
                }
            }
        });
    }

    // ---- issues, comments, labels ----

    /// Opens an issue as `author`.
    pub fn open_issue(
        &self,
        repo: &RepoName,
        author: &str,
        title: &str,
        body: &str,
    ) -> IssueNumber {
        self.with(|st| {
            let now = st.now();
            let r = st.repo_mut(&repo.to_string());
            let number = r.take_number();
            r.issues.insert(
                number,
                FakeIssue {
                    number,
                    title: title.to_owned(),
                    body: (!body.is_empty()).then(|| body.to_owned()),
                    state: "open".to_owned(),
                    state_reason: None,
                    labels: Vec::new(),
                    author: FakeUser::user(author),
                    assignees: Vec::new(),
                    created_at: now,
                    updated_at: now,
                    closed_at: None,
                },
            );
            IssueNumber(number)
        })
    }

    /// Snapshots of every issue of a repository (pull requests included).
    pub fn issues(&self, repo: &RepoName) -> Vec<FakeIssue> {
        self.with(|st| {
            st.repo(&repo.to_string())
                .issues
                .values()
                .cloned()
                .collect()
        })
    }

    /// A snapshot of an issue.
    pub fn issue(&self, repo: &RepoName, number: IssueNumber) -> FakeIssue {
        self.with(|st| st.repo(&repo.to_string()).issues[&number.0].clone())
    }

    /// Puts labels on an issue directly (creating unknown repo labels).
    pub fn label_issue(&self, repo: &RepoName, number: IssueNumber, label: &str) {
        self.with(|st| {
            let id = st.take_id();
            let r = st.repo_mut(&repo.to_string());
            r.labels.entry(label.to_lowercase()).or_insert(FakeLabel {
                id,
                name: label.to_owned(),
                color: "ededed".to_owned(),
                description: None,
            });
            let issue = r.issues.get_mut(&number.0).expect("issue");
            if !issue.labels.iter().any(|l| l == label) {
                issue.labels.push(label.to_owned());
            }
        });
    }

    /// Changes the issue's title and body, as a person would: a person's
    /// edits are seconds apart, and GitHub writes `updated_at` to the
    /// second, so each edit moves it by a second at least.
    pub fn edit_issue(&self, repo: &RepoName, number: IssueNumber, title: &str, body: &str) {
        self.change_issue(repo, number, |issue| {
            issue.title = title.to_owned();
            issue.body = Some(body.to_owned());
            // `change_issue` moves it on to now, if now is later.
            issue.updated_at += 1000;
        });
    }

    /// Takes `label` off the issue, as a person would.
    pub fn unlabel_issue(&self, repo: &RepoName, number: IssueNumber, label: &str) {
        self.change_issue(repo, number, |issue| {
            issue.labels.retain(|l| !l.eq_ignore_ascii_case(label));
        });
    }

    /// Comments as `user` (a person, or a bot when `user.is_bot`).
    pub fn comment_as(
        &self,
        repo: &RepoName,
        number: IssueNumber,
        user: FakeUser,
        body: &str,
    ) -> u64 {
        self.with(|st| {
            let id = st.take_id();
            let now = st.now();
            st.repo_mut(&repo.to_string()).comments.insert(
                id,
                FakeComment {
                    id,
                    issue: number.0,
                    body: body.to_owned(),
                    author: user,
                    via_app: None,
                    created_at: now,
                    updated_at: now,
                },
            );
            id
        })
    }

    /// Replaces a comment's text (whoever edits it). Answers the text it
    /// had.
    pub fn edit_comment(&self, repo: &RepoName, id: u64, body: &str) -> String {
        self.with(|st| {
            let now = st.now();
            let c = st
                .repo_mut(&repo.to_string())
                .comments
                .get_mut(&id)
                .expect("the comment exists");
            c.updated_at = now;
            std::mem::replace(&mut c.body, body.to_owned())
        })
    }

    /// Deletes an issue comment (its author, or a maintainer, can).
    /// Answers the text it had.
    pub fn delete_comment(&self, repo: &RepoName, id: u64) -> String {
        self.with(|st| {
            let comments = &mut st.repo_mut(&repo.to_string()).comments;
            comments.remove(&id).expect("the comment exists").body
        })
    }

    /// The comments on an issue, oldest first.
    pub fn comments(&self, repo: &RepoName, number: IssueNumber) -> Vec<FakeComment> {
        self.with(|st| {
            st.repo(&repo.to_string())
                .comments
                .values()
                .filter(|c| c.issue == number.0)
                .cloned()
                .collect()
        })
    }

    /// The label names on an issue.
    pub fn labels(&self, repo: &RepoName, number: IssueNumber) -> Vec<String> {
        self.issue(repo, number).labels
    }

    /// The repository's labels.
    pub fn repo_labels(&self, repo: &RepoName) -> Vec<FakeLabel> {
        self.with(|st| {
            st.repo(&repo.to_string())
                .labels
                .values()
                .cloned()
                .collect()
        })
    }

    pub fn reactions(&self, repo: &RepoName) -> Vec<FakeReaction> {
        self.with(|st| st.repo(&repo.to_string()).reactions.clone())
    }

    // ---- pull requests ----

    pub fn pulls(&self, repo: &RepoName) -> Vec<FakePull> {
        self.with(|st| st.repo(&repo.to_string()).pulls.values().cloned().collect())
    }

    /// Merges (and closes) a pull request, as a maintainer would. As on
    /// GitHub, a pull request into the default branch closes (as
    /// completed) the open issues its body names with a closing keyword
    /// (`Closes #n`, `fixes: #n`, ...), and, as a squash merge would, its
    /// title; returns them, for the `issues.closed` deliveries GitHub would
    /// send.
    pub fn merge_pull(&self, repo: &RepoName, number: IssueNumber) -> Vec<IssueNumber> {
        let sha = self.branch_tip(repo, number);
        let (into_default, body) = self.with(|st| {
            let now = st.now();
            let r = st.repo_mut(&repo.to_string());
            let default = r.default_branch.clone();
            let pull = r.pulls.get_mut(&number.0).expect("pull request");
            pull.merged = true;
            pull.merged_sha = sha;
            pull.state = "closed".to_owned();
            pull.updated_at = now;
            // The title too: a squash merge makes it the commit's subject.
            let text = format!("{}\n{}", pull.title, pull.body.clone().unwrap_or_default());
            (pull.base == default, text)
        });
        if !into_default {
            return Vec::new();
        }
        let open = |n: &u64| {
            self.with(|st| {
                st.repo(&repo.to_string())
                    .issues
                    .get(n)
                    .is_some_and(|i| i.state == "open")
            })
        };
        let closed: Vec<IssueNumber> = closing_refs(&body)
            .into_iter()
            .filter(open)
            .map(IssueNumber)
            .collect();
        for n in &closed {
            self.change_issue(repo, *n, |issue| {
                issue.state = "closed".to_owned();
                issue.state_reason = Some("completed".to_owned());
            });
        }
        closed
    }

    /// The commit the pull request's head branch is at in the repository's
    /// git (served with [`Self::serve_git`], or a local `clone_url`). Read
    /// from disk, never over HTTP: this may run in one of the fake's own
    /// request handlers, which would then wait for itself.
    fn branch_tip(&self, repo: &RepoName, number: IssueNumber) -> Option<String> {
        let (git, head) = self.with(|st| {
            let r = st.repo(&repo.to_string());
            let git = match st.git_roots.get(&repo.to_string()) {
                Some(bare) => Some(bare.display().to_string()),
                None => Some(r.clone_url.clone()).filter(|url| !url.starts_with("http")),
            };
            (git, r.pulls.get(&number.0).map(|p| p.head.clone()))
        });
        let git = git?;
        let head = format!("refs/heads/{}", head?);
        let out = std::process::Command::new("git")
            .args(["ls-remote", &git, &head])
            .output()
            .ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.split_whitespace().next().map(str::to_owned)
    }

    /// `author` opens a pull request from `head` into `base` (both branches
    /// of the repository); answers its number.
    pub fn open_pull_as(
        &self,
        repo: &RepoName,
        author: FakeUser,
        head: &str,
        base: &str,
        title: &str,
    ) -> IssueNumber {
        self.with(|st| {
            let (id, now) = (st.take_id(), st.now());
            let r = st.repo_mut(&repo.to_string());
            let number = r.take_number();
            let pull = FakePull {
                id,
                number,
                title: title.to_owned(),
                body: None,
                head: head.to_owned(),
                base: base.to_owned(),
                state: "open".to_owned(),
                merged: false,
                merged_sha: None,
                author,
                created_at: now,
                updated_at: now,
            };
            r.pulls.insert(number, pull);
            IssueNumber(number)
        })
    }

    /// Closes a pull request without merging it, as a maintainer would.
    pub fn close_pull(&self, repo: &RepoName, number: IssueNumber) {
        self.set_pull_state(repo, number, "closed");
    }

    /// Opens a closed, unmerged pull request again, as a maintainer would.
    pub fn reopen_pull(&self, repo: &RepoName, number: IssueNumber) {
        self.set_pull_state(repo, number, "open");
    }

    fn set_pull_state(&self, repo: &RepoName, number: IssueNumber, state: &str) {
        self.with(|st| {
            let now = st.now();
            let pull = st
                .repo_mut(&repo.to_string())
                .pulls
                .get_mut(&number.0)
                .expect("pull request");
            assert!(
                !(pull.merged && state == "open"),
                "a merged pull request stays closed"
            );
            pull.state = state.to_owned();
            pull.updated_at = now;
        });
    }

    /// Submits a review of a pull request as `author`: `state` as the REST
    /// API writes it (`CHANGES_REQUESTED`, `COMMENTED`, `APPROVED`), a
    /// summary `body`, and one new thread per `(path, line, body)`. Answers
    /// the review's id and its comments' ids.
    pub fn review_pull(
        &self,
        repo: &RepoName,
        pull: IssueNumber,
        author: FakeUser,
        state: &str,
        body: &str,
        comments: &[(&str, u64, &str)],
    ) -> (u64, Vec<u64>) {
        self.with(|st| {
            let id = st.take_id();
            let now = st.now();
            let ids: Vec<u64> = comments.iter().map(|_| st.take_id()).collect();
            let r = st.repo_mut(&repo.to_string());
            r.reviews.insert(
                id,
                FakeReview {
                    id,
                    pull: pull.0,
                    state: state.to_owned(),
                    body: body.to_owned(),
                    author: author.clone(),
                    submitted_at: now,
                },
            );
            for (cid, (path, line, text)) in ids.iter().zip(comments) {
                r.review_comments.insert(
                    *cid,
                    FakeReviewComment {
                        id: *cid,
                        pull: pull.0,
                        review: Some(id),
                        body: (*text).to_owned(),
                        author: author.clone(),
                        via_app: None,
                        path: (*path).to_owned(),
                        line: Some(*line),
                        start_line: None,
                        diff_hunk: format!("@@ -{line},1 +{line},1 @@\n+{path} line {line}"),
                        in_reply_to: None,
                        created_at: now,
                        updated_at: now,
                    },
                );
            }
            (id, ids)
        })
    }

    /// `author` replies in the review thread whose first comment is `root`.
    /// Answers the reply's id.
    pub fn reply_in_thread(&self, repo: &RepoName, root: u64, author: FakeUser, body: &str) -> u64 {
        self.with(|st| {
            let id = st.take_id();
            let now = st.now();
            let r = st.repo_mut(&repo.to_string());
            let first = r.review_comments[&root].clone();
            r.review_comments.insert(
                id,
                FakeReviewComment {
                    id,
                    review: None,
                    body: body.to_owned(),
                    author,
                    via_app: None,
                    in_reply_to: Some(root),
                    created_at: now,
                    updated_at: now,
                    ..first
                },
            );
            id
        })
    }

    /// Changes a review comment's words, as its author or any writer of
    /// the repository can on GitHub: its `updated_at` moves on (by a
    /// second at least, GitHub's precision). Answers the words it had.
    pub fn edit_review_comment(&self, repo: &RepoName, id: u64, body: &str) -> String {
        self.with(|st| {
            let now = st.now();
            let c = st
                .repo_mut(&repo.to_string())
                .review_comments
                .get_mut(&id)
                .expect("the review comment exists");
            c.updated_at = now.max(c.updated_at + 1_000);
            std::mem::replace(&mut c.body, body.to_owned())
        })
    }

    /// Deletes a review comment, as its author can on GitHub; a reply to it
    /// is then answered 404.
    pub fn delete_review_comment(&self, repo: &RepoName, id: u64) {
        self.with(|st| {
            st.repo_mut(&repo.to_string()).review_comments.remove(&id);
        });
    }

    /// A review comment by id.
    pub fn review_comment(&self, repo: &RepoName, id: u64) -> FakeReviewComment {
        self.with(|st| st.repo(&repo.to_string()).review_comments[&id].clone())
    }

    /// The review comments of a pull request, oldest first.
    pub fn review_comments(&self, repo: &RepoName, pull: IssueNumber) -> Vec<FakeReviewComment> {
        self.with(|st| {
            st.repo(&repo.to_string())
                .review_comments
                .values()
                .filter(|c| c.pull == pull.0)
                .cloned()
                .collect()
        })
    }

    /// Assigns an issue to `login` (a person, or a bot's `…[bot]` login).
    pub fn assign(&self, repo: &RepoName, number: IssueNumber, login: &str) {
        self.change_issue(repo, number, |issue| {
            if !issue.assignees.iter().any(|a| a == login) {
                issue.assignees.push(login.to_owned());
            }
        });
    }

    /// Takes `login` off an issue's assignees.
    pub fn unassign(&self, repo: &RepoName, number: IssueNumber, login: &str) {
        self.change_issue(repo, number, |issue| issue.assignees.retain(|a| a != login));
    }

    /// Closes (`"closed"`) or reopens (`"open"`) an issue, as a person would.
    pub fn set_issue_state(&self, repo: &RepoName, number: IssueNumber, state: &str) {
        self.change_issue(repo, number, |issue| {
            issue.state = state.to_owned();
            issue.state_reason = None;
        });
    }

    /// Changes an issue as a person would; GitHub moves its `updated_at`
    /// (and `closed_at` as it closes or reopens).
    fn change_issue(
        &self,
        repo: &RepoName,
        number: IssueNumber,
        change: impl FnOnce(&mut FakeIssue),
    ) {
        self.with(|st| {
            let now = st.now();
            let issue = st
                .repo_mut(&repo.to_string())
                .issues
                .get_mut(&number.0)
                .expect("issue");
            change(issue);
            issue.updated_at = now.max(issue.updated_at);
            issue.closed_at = (issue.state == "closed").then_some(issue.closed_at.unwrap_or(now));
        });
    }

    /// An issue as GitHub's REST API and its webhooks show it.
    pub fn issue_json(&self, repo: &RepoName, number: IssueNumber) -> serde_json::Value {
        self.with(|st| {
            let r = st.repo(&repo.to_string());
            let issue = r.issues.get(&number.0).expect("issue");
            json::issue(&st.base_url, r, issue)
        })
    }

    /// A pull request as GitHub's REST API shows it.
    pub fn pull_json(&self, repo: &RepoName, number: IssueNumber) -> serde_json::Value {
        self.with(|st| {
            let r = st.repo(&repo.to_string());
            let pull = r.pulls.get(&number.0).expect("pull request");
            json::pull(&st.base_url, r, pull)
        })
    }

    /// An issue's GraphQL node id (what its REST answer carries as `node_id`).
    pub fn issue_node_id(&self, repo: &RepoName, number: IssueNumber) -> String {
        self.with(|st| st.repo(&repo.to_string()).issue_node_id(number.0))
    }

    // ---- project boards ----

    /// Adds a Projects (v2) board: GitHub's built-in text fields (Title,
    /// Assignees) plus the single-select `fields` (name, option names).
    /// Answers the board's node id. Installations see the boards of their
    /// own account only.
    pub fn add_project(
        &self,
        owner: ProjectOwner,
        number: u64,
        fields: &[(&str, &[&str])],
    ) -> String {
        self.with(|st| {
            let project = FakeProject::new(st, owner, number, fields);
            let id = project.id.clone();
            st.projects.push(project);
            id
        })
    }

    /// A snapshot of the board `number` of `owner` (by login).
    pub fn project(&self, owner: &str, number: u64) -> FakeProject {
        self.with(|st| {
            st.projects
                .iter()
                .find(|p| p.owner.login() == owner && p.number == number)
                .cloned()
                .unwrap_or_else(|| panic!("fake GitHub: no project {owner}/{number}"))
        })
    }

    /// A person takes the item of `content` (a node id) off the board.
    pub fn remove_project_item(&self, owner: &str, number: u64, content: &str) {
        self.with(|st| {
            let project = st
                .projects
                .iter_mut()
                .find(|p| p.owner.login() == owner && p.number == number)
                .expect("the project");
            project.items.remove(content);
        });
    }

    /// The option name the board's `Status` field has for an item, by the
    /// item's content node id (`None`: no item, or no status set).
    pub fn project_item_status(&self, owner: &str, number: u64, content: &str) -> Option<String> {
        self.project_item_value(owner, number, content, "Status")
    }

    /// The option name a single-select `field` has for an item.
    pub fn project_item_value(
        &self,
        owner: &str,
        number: u64,
        content: &str,
        field: &str,
    ) -> Option<String> {
        self.project(owner, number).value(content, field)
    }

    // ---- faults and the request log ----

    /// Makes the next matching request(s) fail; see [`Fault`].
    pub fn inject(&self, rule: impl Into<FaultRule>) {
        self.with(|st| st.faults.push(rule.into()));
    }

    /// Lifts every injected fault (an outage is over).
    pub fn clear_faults(&self) {
        self.with(|st| st.faults.clear());
    }

    /// Sets the primary rate limit's remaining count reported in headers.
    pub fn set_rate_limit_remaining(&self, remaining: u32) {
        self.with(|st| st.rate_limit.remaining = remaining);
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.with(|st| st.requests.clone())
    }

    /// Requests with this method whose path starts with `prefix`.
    pub fn requests_to(&self, method: &str, prefix: &str) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.method == method && r.path.starts_with(prefix))
            .collect()
    }

    /// Resolves once a request with this method, under `prefix`, whose body
    /// carries `text` has been received (answered or not: a held or delayed
    /// one counts); fails the test after 60 s.
    pub async fn received(&self, method: &str, prefix: &str, text: &str) {
        let seen = self.with(|st| st.request_seen.clone());
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            // Listening before looking: a request recorded in between wakes it.
            let next = seen.notified();
            tokio::pin!(next);
            next.as_mut().enable();
            let requests = self.requests_to(method, prefix);
            if requests.iter().any(|r| r.body.contains(text)) {
                return;
            }
            let woken = tokio::time::timeout_at(deadline, next).await;
            assert!(woken.is_ok(), "no {method} {prefix} with {text:?}");
        }
    }

    /// Requests that would change something (anything but GET/HEAD), the
    /// token exchange excluded.
    pub fn writes(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.method != "GET" && r.method != "HEAD")
            .filter(|r| !r.path.ends_with("/access_tokens"))
            .collect()
    }

    pub fn clear_requests(&self) {
        self.with(|st| st.requests.clear());
    }
}

/// The issues of the same repository a pull request's body (or a commit
/// message) names with one of GitHub's closing keywords ("Linking a pull
/// request to an issue using a keyword": close, fix, resolve and their
/// forms, any case, an optional colon).
pub fn closing_refs(body: &str) -> Vec<u64> {
    let keyword =
        regex::Regex::new(r"(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?\s+#(\d+)\b")
            .expect("the closing keyword pattern");
    let mut refs: Vec<u64> = keyword
        .captures_iter(body)
        .filter_map(|c| c[1].parse().ok())
        .collect();
    refs.sort_unstable();
    refs.dedup();
    refs
}
