//! The repository sandbox: per repository a cached mirror (a bare repository
//! fetched, not re-cloned, each run), per run a git worktree on branch
//! `closer/issue-<n>` from the default branch's head, reused across the run's
//! iterations and removed when the run ends.
//!
//! It must never write the installation token anywhere: not into the
//! mirror's or worktree's config (remotes are given as URLs per command, no
//! `origin` is configured), not into files, logs or the agent's environment.
//! Pushing is closer's job, done here with the token at push time, with
//! `--force-with-lease` against the head closer last saw on the remote
//! (`branch.rs`): never a plain force, so a commit somebody else pushed to
//! the branch is never lost.

pub mod base_file;
pub mod branch;
pub mod commit;
pub mod git;
pub mod lock;
pub mod nested;
pub mod prune;
pub mod purpose;
pub mod remove;
pub mod verified;

use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use self::git::{GitError, GitRunner, wants_token};
use self::purpose::Purpose;
use crate::agent::process::BaseEnv;
use crate::model::RepositoryId;

/// Where a repository is fetched from.
#[derive(Debug, Clone)]
pub struct RepoSource {
    /// The repository's `clone_url` (`https://…`, or `file://…` in tests).
    pub url: String,
    /// The installation token, for http(s) URLs.
    pub token: Option<SecretString>,
    /// The default branch when known (webhook payload); else asked of the remote.
    pub default_branch: Option<String>,
    /// GitHub's id of the repository, when known: the mirror is the
    /// repository's, not the URL's, so a repository created under a name
    /// another one had (the same URL) never shares that one's objects.
    pub repository_id: Option<RepositoryId>,
}

impl RepoSource {
    fn token(&self) -> Option<&SecretString> {
        self.token.as_ref().filter(|_| wants_token(&self.url))
    }
}

/// A run's worktree, where the agent works, or a clean checkout of one of
/// its commits, where the checks run (`branch` empty).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Worktree {
    pub path: PathBuf,
    /// `closer/issue-<n>`; empty for a detached (baseline) worktree.
    pub branch: String,
    /// The default branch's head when the run started: what changes are measured against.
    pub base_commit: String,
    pub mirror: PathBuf,
}

impl Worktree {
    /// The worktree's administrative directory inside the mirror (git names
    /// it after the worktree's directory). closer reads the worktree through
    /// it rather than through the worktree's `.git` file, which the agent
    /// could point elsewhere.
    pub fn git_dir(&self) -> PathBuf {
        admin_dir(&self.mirror, &self.path)
    }

    /// `git --git-dir=… --work-tree=… <args>`: a command on this worktree.
    pub async fn git(&self, runner: &GitRunner, args: &[&str]) -> Result<String, GitError> {
        let git_dir = format!("--git-dir={}", self.git_dir().display());
        let work_tree = format!("--work-tree={}", self.path.display());
        let mut full = vec![git_dir.as_str(), work_tree.as_str()];
        full.extend_from_slice(args);
        runner.run(&self.path, &full).await
    }
}

/// Sandbox errors.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("sandbox file system error: {0}")]
    Io(#[from] std::io::Error),
    #[error("the remote has no default branch (HEAD)")]
    NoDefaultBranch,
    /// The remote has no commit at all (a repository just created, before
    /// its first push): there is nothing to start from.
    #[error("the repository has no commits yet (its default branch {branch} is empty)")]
    EmptyRepository { branch: String },
    #[error("git placed the worktree's metadata somewhere unexpected: {0}")]
    UnexpectedLayout(String),
    #[error("{0}")]
    BaseFile(String),
    /// The push was refused: the branch on the remote is no longer at the
    /// commit closer last saw (somebody pushed to it).
    #[error("the branch {branch} moved on the remote since closer last saw it")]
    StaleBranch { branch: String },
    /// GitHub refused the push: its commits create or update the workflow
    /// file `path`, which the App's token may not (no `workflows`
    /// permission). Pushing again cannot succeed.
    #[error("GitHub refused to take a change to the workflow {path} from the App")]
    WorkflowRefused { path: String },
    /// GitHub declined the push: it breaks the repository's rules
    /// (rulesets, branch protection), those it named in `rules`. Pushing
    /// the same commits again cannot succeed.
    #[error("GitHub declined the push under the repository's rules: {}", rules.join(" "))]
    RulesRefused { rules: Vec<String> },
}

/// Settings of the sandbox.
#[derive(Debug, Clone)]
pub struct SandboxOptions {
    /// Holds `mirrors/` and `worktrees/`.
    pub root: PathBuf,
    pub base_env: BaseEnv,
    /// Deadline per git command (fetches of big repositories take a while).
    pub git_timeout: Duration,
    /// Identity of commits made in worktrees (set in the mirror's config).
    pub committer_name: String,
    pub committer_email: String,
}

/// Mirrors and worktrees under one directory.
#[derive(Debug, Clone)]
pub struct Sandbox {
    options: SandboxOptions,
    git: GitRunner,
}

impl Sandbox {
    /// A relative `root` is made absolute against the current directory:
    /// git runs the worktree commands inside the mirror, where a relative
    /// path would name a place under the mirror.
    pub fn new(mut options: SandboxOptions) -> Sandbox {
        if let Ok(root) = std::path::absolute(&options.root) {
            options.root = root;
        }
        let git = GitRunner::new(options.base_env.clone(), options.git_timeout);
        Sandbox { options, git }
    }

    /// The git runner the sandbox uses (the engine reads worktrees with it).
    pub fn git(&self) -> &GitRunner {
        &self.git
    }

    /// The run's worktree, made on first call (fetching the mirror first)
    /// from the default branch's head, and returned as it is on later calls
    /// of the same run. `known_base` is the base commit closer stored for
    /// the run: it wins over the ref in the mirror, which the agent can move.
    pub async fn prepare(
        &self,
        source: &RepoSource,
        issue: u64,
        run_id: &str,
        known_base: Option<&str>,
    ) -> Result<Worktree, SandboxError> {
        self.prepare_at(source, issue, run_id, known_base, None)
            .await
    }

    /// [`Sandbox::prepare`], a worktree made afresh starting at `start_at`
    /// when the mirror has that commit and the run's branch is on the remote
    /// (else at the default branch's head): the base of a branch the run
    /// pushed, so following that branch takes it as it is instead of
    /// rebasing it onto the default branch's newer commits.
    pub async fn prepare_at(
        &self,
        source: &RepoSource,
        issue: u64,
        run_id: &str,
        known_base: Option<&str>,
        start_at: Option<&str>,
    ) -> Result<Worktree, SandboxError> {
        let Worktree {
            path,
            branch,
            mirror,
            ..
        } = self.run_worktree(source, issue, run_id);
        let base_ref = format!("refs/closer/base/{}", safe_name(run_id));
        let _lock = lock::lock(&mirror.with_extension("lock")).await?;
        let admin = admin_dir(&mirror, &path);
        if path.is_dir()
            && admin.is_dir()
            && let Ok(base) = self
                .git
                .run(&mirror, &["rev-parse", "--verify", &base_ref])
                .await
        {
            let worktree = Worktree {
                path,
                branch,
                base_commit: known_base.map_or_else(|| base.trim().to_owned(), str::to_owned),
                mirror,
            };
            relink(&worktree).await?;
            return Ok(worktree);
        }
        self.fetch_locked(source, &mirror).await?;
        // Only while the branch is there to continue: one merged and
        // deleted since starts afresh from the default branch's head.
        let branch_there = format!("refs/remotes/origin/{branch}");
        let base = match start_at {
            Some(sha)
                if self.mirror_has(&mirror, &format!("{sha}^{{commit}}")).await
                    && self.mirror_has(&mirror, &branch_there).await =>
            {
                sha.to_owned()
            }
            _ => self.default_head(source, &mirror).await?,
        };
        // Removed and unlocked before the prune, so a worktree a crash left
        // at `path` is no longer registered when it is added again.
        remove::remove_tree(&path).await?;
        unlock(&admin).await?;
        self.git.run(&mirror, &["worktree", "prune"]).await?;
        self.release_branch(&mirror, &branch).await?;
        self.git
            .run(&mirror, &["update-ref", &base_ref, &base])
            .await?;
        let path_str = path.display().to_string();
        // Locked: a prune (the checks' checkouts run one) never forgets it,
        // even when the agent deleted its `.git` file (decision 233).
        self.git
            .run(
                &mirror,
                &["worktree", "add", "--lock", "-B", &branch, &path_str, &base],
            )
            .await?;
        let worktree = Worktree {
            path,
            branch,
            base_commit: base,
            mirror,
        };
        check_layout(&worktree).await?;
        Ok(worktree)
    }

    /// Where the run's worktree is, or would be made, in the mirror of
    /// `source` (its base unknown here: empty).
    pub fn run_worktree(&self, source: &RepoSource, issue: u64, run_id: &str) -> Worktree {
        Worktree {
            path: self.options.root.join("worktrees").join(safe_name(run_id)),
            branch: crate::model::issue_branch(crate::model::IssueNumber(issue)),
            base_commit: String::new(),
            mirror: self.mirror_path(source),
        }
    }

    /// Where [`Sandbox::checkout`] puts the checkout for `purpose`.
    pub fn checkout_path(&self, run_id: &str, purpose: Purpose) -> PathBuf {
        self.options
            .root
            .join("worktrees")
            .join(purpose.dir_name(&safe_name(run_id)))
    }

    /// A clean detached worktree of `commit` beside the run's, named after
    /// its `purpose`, for checks that must see only what the commit holds: not
    /// the ignored files, build output or anything else the agent left in
    /// its own worktree. Remove it with [`Sandbox::remove`] when done; one
    /// left by a crash is replaced.
    pub async fn checkout(
        &self,
        run: &Worktree,
        run_id: &str,
        commit: &str,
        purpose: Purpose,
    ) -> Result<Worktree, SandboxError> {
        let path = self.checkout_path(run_id, purpose);
        let _lock = lock::lock(&run.mirror.with_extension("lock")).await?;
        // Removed before the prune, so one a crash left at `path` is no
        // longer registered when it is added again.
        remove::remove_tree(&path).await?;
        self.git.run(&run.mirror, &["worktree", "prune"]).await?;
        // What an agent left in the mirror's config or attributes would
        // shape the checkout (sandbox `mode = "none"` lets it write there).
        self.reset_config(&run.mirror).await?;
        let path_str = path.display().to_string();
        self.git
            .run(
                &run.mirror,
                &["worktree", "add", "--detach", &path_str, commit],
            )
            .await?;
        let worktree = Worktree {
            path,
            branch: String::new(),
            base_commit: run.base_commit.clone(),
            mirror: run.mirror.clone(),
        };
        check_layout(&worktree).await?;
        Ok(worktree)
    }

    /// Commits what the agent left changed (see [`commit`]) as closer's
    /// committer identity; the new commit, if there was anything to commit.
    ///
    /// The mirror's config is rewritten first: whatever the agent put there
    /// (an fsmonitor hook, a clean filter, a textconv driver) would otherwise
    /// run inside closer's own git commands from here on.
    pub async fn commit_changes(
        &self,
        worktree: &Worktree,
        summary: &str,
        fallback_subject: &str,
    ) -> Result<Option<String>, SandboxError> {
        {
            let _lock = lock::lock(&worktree.mirror.with_extension("lock")).await?;
            self.reset_config(&worktree.mirror).await?;
        }
        let author = commit::Author {
            name: self.options.committer_name.clone(),
            email: self.options.committer_email.clone(),
        };
        Ok(commit::commit_changes(&self.git, worktree, &author, summary, fallback_subject).await?)
    }

    /// Removes a worktree, its branch and its base ref (the run has ended).
    pub async fn remove(&self, worktree: &Worktree, run_id: &str) -> Result<(), SandboxError> {
        let mirror = &worktree.mirror;
        let _lock = lock::lock(&mirror.with_extension("lock")).await?;
        // Not `git worktree remove`: git deletes by full path after an
        // `lstat`, so a directory that a daemon left behind swaps for a link
        // meanwhile leads git's deletion out of the tree (into closer's data
        // directory). `remove_tree` never follows a link, and opens up what
        // the run's processes made unwritable; `prune` then forgets the
        // worktree whose directory is gone (decision 230). Gone already
        // (a crash, a manual cleanup) is not an error.
        remove::remove_tree(&worktree.path).await?;
        unlock(&worktree.git_dir()).await?;
        self.git.run(mirror, &["worktree", "prune"]).await?;
        if !worktree.branch.is_empty() {
            let _ = self
                .git
                .run(mirror, &["branch", "-D", &worktree.branch])
                .await;
            let base_ref = format!("refs/closer/base/{}", safe_name(run_id));
            let _ = self.git.run(mirror, &["update-ref", "-d", &base_ref]).await;
        }
        Ok(())
    }

    /// The worktree's `HEAD` commit.
    pub async fn head(&self, worktree: &Worktree) -> Result<String, SandboxError> {
        let head = worktree
            .git(&self.git, &["rev-parse", "--verify", "HEAD^{commit}"])
            .await?;
        Ok(head.trim().to_owned())
    }

    /// Pushes the run's branch to the remote, with `--force-with-lease`
    /// against `seen`, the branch's head on the remote when closer last
    /// looked (`None`: it was not there). A branch that moved since is
    /// refused as [`SandboxError::StaleBranch`]; nothing is overwritten. A
    /// change to a workflow file GitHub will not take from the App is
    /// [`SandboxError::WorkflowRefused`], a push the repository's rules
    /// decline [`SandboxError::RulesRefused`].
    pub async fn push(
        &self,
        worktree: &Worktree,
        source: &RepoSource,
        seen: Option<&str>,
    ) -> Result<(), SandboxError> {
        // The commit comes from the worktree (a local read, no token); the
        // push runs in the mirror, whose config closer has just rewritten, so
        // nothing the agent configured (a proxy, an `insteadOf` rewrite, a
        // hook) takes part in the one command that carries the token.
        let head = worktree
            .git(&self.git, &["rev-parse", "--verify", "HEAD^{commit}"])
            .await?;
        let remote_ref = format!("refs/heads/{}", worktree.branch);
        let refspec = format!("{}:{remote_ref}", head.trim());
        let lease = format!("--force-with-lease={remote_ref}:{}", seen.unwrap_or(""));
        let _lock = lock::lock(&worktree.mirror.with_extension("lock")).await?;
        self.reset_config(&worktree.mirror).await?;
        let pushed = self
            .git
            .run_with(
                &worktree.mirror,
                &["push", "--quiet", &lease, &source.url, &refspec],
                source.token(),
            )
            .await;
        match pushed {
            Ok(_) => Ok(()),
            Err(e) if branch::is_stale(&e) => Err(SandboxError::StaleBranch {
                branch: worktree.branch.clone(),
            }),
            Err(e) => {
                if let Some(path) = branch::refused_workflow(&e) {
                    return Err(SandboxError::WorkflowRefused { path });
                }
                match branch::refused_by_rules(&e) {
                    Some(rules) => Err(SandboxError::RulesRefused { rules }),
                    None => Err(e.into()),
                }
            }
        }
    }

    /// Writes the mirror's config as closer wants it, dropping whatever an
    /// agent (which can write to the shared repository) put there, and its
    /// `info/attributes`.
    async fn reset_config(&self, mirror: &Path) -> Result<(), SandboxError> {
        let quote = |v: &str| format!("\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\""));
        let config = format!(
            "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n\
             [user]\n\tname = {}\n\temail = {}\n",
            quote(&self.options.committer_name),
            quote(&self.options.committer_email)
        );
        let temp = mirror.join("config.closer-tmp");
        tokio::fs::write(&temp, config).await?;
        tokio::fs::rename(&temp, mirror.join("config")).await?;
        // Attributes there apply to every worktree's checkout (`eol`,
        // `ident`, an encoding): none is closer's.
        match tokio::fs::remove_file(mirror.join("info/attributes")).await {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
            _ => Ok(()),
        }
    }

    /// One run per issue is active at a time, so a worktree of an earlier
    /// run still holding the issue's branch is a crash leftover: remove it.
    async fn release_branch(&self, mirror: &Path, branch: &str) -> Result<(), SandboxError> {
        let listing = self
            .git
            .run(mirror, &["worktree", "list", "--porcelain"])
            .await?;
        let wanted = format!("branch refs/heads/{branch}");
        let mut current: Option<&str> = None;
        for line in listing.lines() {
            if let Some(path) = line.strip_prefix("worktree ") {
                current = Some(path);
            } else if line == wanted
                && let Some(stale) = current
            {
                tracing::warn!(
                    branch,
                    worktree = stale,
                    "removing a stale worktree of an earlier run"
                );
                remove::remove_tree(Path::new(stale)).await?;
                unlock(&admin_dir(mirror, Path::new(stale))).await?;
                self.git.run(mirror, &["worktree", "prune"]).await?;
            }
        }
        Ok(())
    }

    /// `mirrors/<name>-<digest>.git`, the digest of the repository's id
    /// (`id:<n>`) when known, else of its URL (runs stored before closer
    /// kept the id).
    fn mirror_path(&self, source: &RepoSource) -> PathBuf {
        let url = &source.url;
        let key = match source.repository_id {
            Some(id) => format!("id:{id}"),
            None => url.clone(),
        };
        let digest = hex::encode(Sha256::digest(key.as_bytes()));
        let tail = url
            .trim_end_matches('/')
            .trim_end_matches(".git")
            .rsplit('/')
            .next()
            .unwrap_or("repo");
        self.options
            .root
            .join("mirrors")
            .join(format!("{}-{}.git", safe_name(tail), &digest[..12]))
    }

    /// Creates the mirror if missing, resets its config, then fetches every
    /// branch into `refs/remotes/origin/*`. Call with the mirror's lock held.
    async fn fetch_locked(&self, source: &RepoSource, mirror: &Path) -> Result<(), SandboxError> {
        if !mirror.join("HEAD").exists() {
            tokio::fs::create_dir_all(mirror).await?;
            self.git.run(mirror, &["init", "--quiet", "--bare"]).await?;
        }
        self.reset_config(mirror).await?;
        self.git
            .run_with(
                mirror,
                &[
                    "fetch",
                    "--quiet",
                    "--prune",
                    "--no-tags",
                    &source.url,
                    "+refs/heads/*:refs/remotes/origin/*",
                ],
                source.token(),
            )
            .await?;
        Ok(())
    }

    /// Whether the mirror holds `object` (`<sha>^{commit}`, a ref).
    async fn mirror_has(&self, mirror: &Path, object: &str) -> bool {
        self.git
            .run(mirror, &["rev-parse", "--verify", "--quiet", object])
            .await
            .is_ok()
    }

    /// The commit at the head of the default branch, as just fetched.
    async fn default_head(
        &self,
        source: &RepoSource,
        mirror: &Path,
    ) -> Result<String, SandboxError> {
        let branch = match &source.default_branch {
            Some(branch) => branch.clone(),
            None => {
                let out = self
                    .git
                    .run_with(
                        mirror,
                        &["ls-remote", "--symref", &source.url, "HEAD"],
                        source.token(),
                    )
                    .await?;
                out.lines()
                    .find_map(|l| l.strip_prefix("ref: refs/heads/"))
                    .and_then(|l| l.split('\t').next())
                    .map(str::to_owned)
                    .ok_or(SandboxError::NoDefaultBranch)?
            }
        };
        let rev = format!("refs/remotes/origin/{branch}^{{commit}}");
        match self.git.run(mirror, &["rev-parse", "--verify", &rev]).await {
            Ok(sha) => Ok(sha.trim().to_owned()),
            Err(e) => {
                let refs = ["for-each-ref", "--count=1", "refs/remotes/origin/"];
                match self.git.run(mirror, &refs).await {
                    Ok(any) if any.trim().is_empty() => {
                        Err(SandboxError::EmptyRepository { branch })
                    }
                    _ => Err(e.into()),
                }
            }
        }
    }
}

/// Right after `worktree add` (before any agent ran) the `.git` file must
/// name [`Worktree::git_dir`].
async fn check_layout(worktree: &Worktree) -> Result<(), SandboxError> {
    let dot_git = tokio::fs::read_to_string(worktree.path.join(".git")).await?;
    let named = dot_git.trim().strip_prefix("gitdir: ").unwrap_or_default();
    let expected = worktree.git_dir();
    if Path::new(named) != expected {
        return Err(SandboxError::UnexpectedLayout(named.to_owned()));
    }
    Ok(())
}

/// Where `mirror` keeps what it knows of the worktree at `path` (git names
/// it after the worktree's directory; [`check_layout`] holds it to that).
fn admin_dir(mirror: &Path, path: &Path) -> PathBuf {
    mirror
        .join("worktrees")
        .join(path.file_name().unwrap_or_default())
}

/// Takes the lock off the worktree `admin` knows, so a prune may forget it
/// once its directory is gone. None there is done.
pub(super) async fn unlock(admin: &Path) -> Result<(), SandboxError> {
    match tokio::fs::remove_file(admin.join("locked")).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.into()),
        _ => Ok(()),
    }
}

/// Writes the worktree's `.git` file again when the agent deleted it
/// (closer's own git never reads it: it names the git directory itself),
/// so the tools the agent runs next find their repository.
async fn relink(worktree: &Worktree) -> Result<(), SandboxError> {
    let dot_git = worktree.path.join(".git");
    if tokio::fs::symlink_metadata(&dot_git).await.is_ok() {
        return Ok(());
    }
    let text = format!("gitdir: {}\n", worktree.git_dir().display());
    tokio::fs::write(&dot_git, text).await?;
    Ok(())
}

/// A file-name-safe form of an id.
fn safe_name(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}
