//! Where a run's work happens: the mirror and the run's worktree (through
//! the sandbox), where its repository comes from (the clone URL, with a
//! token for http(s)), the scratch directory for prompt files, the copy of
//! the base commit's completion handler (outside the worktree), and each
//! run's own HOME for its agent (kept a while after last use, then swept).
//!
//! Each run's files have a lock (`<data>/locks/runs/<run>.lock`): every step
//! of the run holds it shared while it works, and the retention task takes
//! it exclusively, without waiting, to remove an ended run's directories.
//! So retention never removes what a step is using, and a step (a
//! `/closer retry` of a run retention is pruning) waits for the removal to
//! end and then makes the worktree afresh. A step sweeping stale HOMEs
//! takes another run's lock the same way before removing its HOME.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::context::RunContext;
use super::{EngineError, other};
use crate::agent::home::HOME_MARKER;
use crate::agent::process::BaseEnv;
use crate::agent::sandbox::branch::BranchSync;
use crate::agent::sandbox::lock::{self, FileLock};
use crate::agent::sandbox::prune::entries;
use crate::agent::sandbox::purpose::Purpose;
use crate::agent::sandbox::remove::remove_tree;
use crate::agent::sandbox::{RepoSource, Sandbox, SandboxError, SandboxOptions, Worktree};
use crate::github::TokenScope;
use crate::model::RunId;

/// How long a step waits for the retention task to finish removing its
/// run's files (one tree, however big: an agent's `node_modules`).
const FILES_PATIENCE: Duration = Duration::from_secs(30 * 60);

/// The identity of the commits closer makes.
const COMMITTER_NAME: &str = "closer";
const COMMITTER_EMAIL: &str = "closer@users.noreply.github.com";

/// What a push did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// The branch is on the remote at the worktree's head.
    Done,
    /// The branch moved on the remote since closer last saw it; nothing
    /// was pushed.
    BranchMoved,
    /// GitHub refused the change to the workflow file `path` (the App has
    /// no `workflows` permission); pushing again cannot succeed.
    WorkflowRefused { path: String },
    /// The repository's rules (rulesets, branch protection) declined the
    /// push, naming `rules`; pushing again cannot succeed.
    RulesRefused { rules: Vec<String> },
}

/// Mirrors, worktrees and scratch space under the data directory.
pub struct Workspace {
    /// The data directory's own id (`<data>/workspace-id`, made once):
    /// what a run records as the place of its worktree (decision 254).
    id: String,
    sandbox: Sandbox,
    scratch: PathBuf,
    homes: PathBuf,
    handlers: PathBuf,
    /// The homes of the checks' checkouts.
    check_homes: PathBuf,
    /// The runs' file locks (see the module notes).
    file_locks: PathBuf,
}

impl Workspace {
    pub fn new(data_dir: &Path, base_env: &BaseEnv) -> Workspace {
        Workspace {
            id: workspace_id(data_dir),
            sandbox: Sandbox::new(SandboxOptions {
                root: data_dir.join("sandbox"),
                base_env: base_env.clone(),
                git_timeout: Duration::from_secs(600),
                committer_name: COMMITTER_NAME.to_owned(),
                committer_email: COMMITTER_EMAIL.to_owned(),
            }),
            scratch: data_dir.join("scratch"),
            homes: data_dir.join("homes"),
            handlers: data_dir.join("handlers"),
            check_homes: data_dir.join("goals").join("checks"),
            file_locks: data_dir.join("locks").join("runs"),
        }
    }

    /// The data directory's id, which processes sharing it share.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Holds the run's files for a step, shared with its other holders;
    /// waits (up to [`FILES_PATIENCE`]) while the retention task removes
    /// them.
    pub async fn hold_files(&self, run: &RunId) -> Result<FileLock, EngineError> {
        lock::lock_shared_within(&self.file_lock(run.as_str()), FILES_PATIENCE)
            .await
            .map_err(|e| {
                other(format!(
                    "run {run}'s files are still being removed (by the retention task or \
                     another run's HOME sweep): {e}"
                ))
            })
    }

    /// The run's files for the retention task to remove, if no step holds
    /// them now.
    pub async fn try_take_files(&self, run_id: &str) -> std::io::Result<Option<FileLock>> {
        lock::try_lock(&self.file_lock(run_id)).await
    }

    fn file_lock(&self, run_id: &str) -> PathBuf {
        self.file_locks.join(format!("{run_id}.lock"))
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The run's own scratch directory (prompt files).
    pub fn scratch(&self, run: &RunId) -> PathBuf {
        self.scratch.join(run.as_str())
    }

    /// The home the setup and goals of one check share (see `checkout`).
    pub fn check_home(&self, run_id: &str, purpose: Purpose) -> PathBuf {
        self.check_homes.join(purpose.dir_name(run_id))
    }

    /// The run's own HOME for the agent: tool state, transcripts, TMPDIR.
    pub fn home(&self, run: &RunId) -> PathBuf {
        self.homes.join(run.as_str())
    }

    /// The run's completion-handler directory, made afresh: `handler` (a
    /// repository path), when given, copied from the base commit. A handler
    /// that cannot be copied is logged and left out, so the handler's
    /// verdict says it cannot be found; the worktree's copy is never used.
    pub async fn handler_scripts(
        &self,
        run: &RunId,
        worktree: &Worktree,
        handler: Option<&str>,
    ) -> Result<PathBuf, EngineError> {
        let dir = self.handlers.join(run.as_str());
        remove_tree(&dir).await.map_err(other)?;
        tokio::fs::create_dir_all(&dir).await.map_err(other)?;
        if let Some(path) = handler
            && let Err(e) = self.sandbox.copy_from_base(worktree, path, &dir).await
        {
            tracing::warn!(run = %run, error = %e, "completion handler not copied from the base commit");
        }
        Ok(dir)
    }

    /// Where the repository is cloned from, with a token for http(s)
    /// minted for this repository alone and `scope` (read to fetch, push
    /// to push). The repository at the run's name must still be the run's
    /// (by GitHub's id; [`EngineError::NameTaken`] otherwise): a fetch
    /// from a stranger's repository of the same name would mix its objects
    /// into the run's mirror, a push would send the run's work there.
    pub async fn source(
        &self,
        ctx: &RunContext,
        scope: TokenScope,
    ) -> Result<RepoSource, EngineError> {
        let run = &ctx.run;
        let (url, branch) = match (run.repository_id, &run.clone_url, &run.default_branch) {
            // Stored before closer kept the id: nothing to check it by.
            (None, Some(u), Some(b)) => (u.clone(), b.clone()),
            (id, url, _) => {
                let r = ctx.client.get_repository(ctx.repo()).await?;
                if id.is_some_and(|id| id != r.id) {
                    return Err(EngineError::NameTaken {
                        name: ctx.repo().clone(),
                        holder: r.id,
                    });
                }
                // The URL GitHub gives now: the stored one's name may lead
                // to another repository one day.
                let url = match id {
                    Some(_) => r.clone_url,
                    None => url.clone().unwrap_or(r.clone_url),
                };
                // The default branch GitHub names now, not the one stored
                // when the run began: a renamed one is gone from the
                // remote, and fetching it would fail (decision 253).
                (url, r.default_branch)
            }
        };
        let token = match url.starts_with("http") {
            true => Some(ctx.client.token_for(ctx.repo(), scope).await?),
            false => None,
        };
        Ok(RepoSource {
            url,
            token,
            default_branch: Some(branch),
            repository_id: run.repository_id,
        })
    }

    /// The run's worktree, made (or found again) from the mirror. Made
    /// afresh for a run that pushed its branch, still on the remote (the
    /// old worktree was removed after `run_files_days`), it starts at the
    /// run's base commit, which the branch grew from; otherwise from the
    /// default branch's head, with a new baseline.
    pub async fn prepare(&self, ctx: &RunContext) -> Result<Worktree, EngineError> {
        let source = self.source(ctx, TokenScope::Read).await?;
        let known_base = ctx.run.base_commit.as_deref();
        let start_at = known_base.filter(|_| ctx.data.branch_head.is_some());
        let (issue, run_id) = (ctx.issue().0, ctx.run.id.as_str());
        self.sandbox
            .prepare_at(&source, issue, run_id, known_base, start_at)
            .await
            .map_err(|e| match e {
                SandboxError::EmptyRepository { .. } => EngineError::EmptyRepository,
                e => other(e),
            })
    }

    /// Removes the run's worktree, branch and base ref, wherever they are:
    /// the next [`Self::prepare`] starts afresh.
    pub async fn discard(&self, ctx: &RunContext) -> Result<(), EngineError> {
        let source = self.source(ctx, TokenScope::Read).await?;
        let run_id = ctx.run.id.as_str();
        let worktree = self.sandbox.run_worktree(&source, ctx.issue().0, run_id);
        // A mirror retention removed holds nothing of the run any more.
        if !worktree.mirror.join("HEAD").exists() {
            return remove_tree(&worktree.path).await.map_err(other);
        }
        self.sandbox.remove(&worktree, run_id).await.map_err(other)
    }

    /// The worktree the run's data remembers, if it is still there; else
    /// made again.
    pub async fn existing_or_prepare(&self, ctx: &RunContext) -> Result<Worktree, EngineError> {
        match ctx.data.worktree.clone() {
            Some(w) if w.path.exists() => Ok(w),
            _ => self.prepare(ctx).await,
        }
    }

    /// Pushes the run's branch, with a lease on the head closer last saw
    /// (`RunData::branch_head`). Nothing is pushed when the branch moved on
    /// the remote meanwhile, or when GitHub will never take the change (a
    /// workflow file, the repository's rules); another error (the network, a token) may pass and
    /// is the step's to retry. In dry run nothing is pushed: the push is
    /// recorded with the other writes that were not sent.
    pub async fn push(
        &self,
        ctx: &mut RunContext,
        worktree: &Worktree,
    ) -> Result<Pushed, EngineError> {
        let head = self.sandbox.head(worktree).await.map_err(other)?;
        if ctx.client.is_dry_run() {
            ctx.client.record_push(ctx.repo(), &worktree.branch, &head);
            return Ok(Pushed::Done);
        }
        let source = self.source(ctx, TokenScope::Push).await?;
        let seen = ctx.data.branch_head.as_deref();
        match self.sandbox.push(worktree, &source, seen).await {
            Ok(()) => {
                ctx.data.branch_head = Some(head);
                Ok(Pushed::Done)
            }
            Err(SandboxError::StaleBranch { .. }) => Ok(Pushed::BranchMoved),
            Err(SandboxError::WorkflowRefused { path }) => Ok(Pushed::WorkflowRefused { path }),
            Err(SandboxError::RulesRefused { rules }) => Ok(Pushed::RulesRefused { rules }),
            Err(e) => Err(other(e)),
        }
    }

    /// Continues the worktree from the branch's head on the remote (people
    /// may have pushed to it, reset it or deleted it) and remembers that
    /// head for the next push's lease.
    pub async fn follow_branch(
        &self,
        ctx: &mut RunContext,
        worktree: &Worktree,
    ) -> Result<BranchSync, EngineError> {
        let source = self.source(ctx, TokenScope::Read).await?;
        let remote = self
            .sandbox
            .fetch_branch(worktree, &source)
            .await
            .map_err(other)?;
        let seen = std::mem::replace(&mut ctx.data.branch_head, remote.clone());
        // The merged branch left on GitHub: its work is on the default
        // branch, and following it would bring a squash merge's commits
        // back. The lease is on it, so the next push replaces it.
        if remote.is_some() && remote == ctx.data.merged_head {
            return Ok(BranchSync::MergedLeft);
        }
        match remote {
            // Deleted after closer pushed it: the maintainer's fresh start.
            None if seen.is_some() => self.sandbox.start_afresh(worktree).await.map_err(other),
            None => Ok(BranchSync::Absent),
            Some(sha) => self
                .sandbox
                .continue_from(worktree, &sha, seen.as_deref())
                .await
                .map_err(other),
        }
    }

    /// Every directory a run has under the data directory (its worktrees,
    /// prompt files, handler scripts, HOME and the homes of checks a crash
    /// left), by the run's id: what the retention task removes once the
    /// run has ended.
    pub async fn run_dirs(&self) -> BTreeMap<String, Vec<PathBuf>> {
        let mut found = self.sandbox.worktree_dirs().await;
        for root in [
            &self.scratch,
            &self.handlers,
            &self.homes,
            &self.check_homes,
        ] {
            for path in entries(root).await {
                if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                    let run = Purpose::run_of(name).to_owned();
                    found.push((path, run));
                }
            }
        }
        let mut by_run: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        for (path, run) in found {
            by_run.entry(run).or_default().push(path);
        }
        by_run
    }

    /// Removes the HOMEs of runs not used for longer than `keep` (their
    /// tool state and transcripts were kept that long for debugging), for
    /// a step of `own` (which holds its own run's files). Another run's
    /// HOME goes only under that run's file lock, taken without waiting: a
    /// step of it at work (resuming after the keep period) keeps it. A run
    /// that comes back after that starts a fresh agent session.
    pub async fn sweep_homes(&self, own: &RunId, keep: Duration) {
        for home in entries(&self.homes).await {
            let Some(run_id) = home.file_name().and_then(|n| n.to_str()) else {
                continue;
            };
            if !last_used_before(&home, keep).await {
                continue;
            }
            let _files = if run_id == own.as_str() {
                None
            } else {
                match self.try_take_files(run_id).await {
                    // Still stale once held: a step may have used it meanwhile.
                    Ok(Some(files)) if last_used_before(&home, keep).await => Some(files),
                    Ok(_) => continue,
                    Err(e) => {
                        tracing::warn!(run = run_id, error = %e, "run's file lock not taken; its HOME is kept");
                        continue;
                    }
                }
            };
            if let Err(e) = remove_tree(&home).await {
                tracing::warn!(home = %home.display(), error = %e, "run HOME not removed");
            }
        }
    }

    /// Removes the run's worktree and handler copy; a failure is logged,
    /// not fatal.
    pub async fn remove(&self, worktree: &Worktree, run: &RunId) {
        let _ = remove_tree(&self.handlers.join(run.as_str())).await;
        if let Err(e) = self.sandbox.remove(worktree, run.as_str()).await {
            tracing::warn!(run = %run, error = %e, "worktree not removed");
        }
    }
}

/// Whether the HOME at `home` was last used (its marker written, or else
/// the directory changed) longer than `keep` ago.
async fn last_used_before(home: &Path, keep: Duration) -> bool {
    let last_used = match tokio::fs::metadata(home.join(HOME_MARKER)).await {
        Ok(m) => m.modified().ok(),
        Err(_) => tokio::fs::metadata(home)
            .await
            .ok()
            .and_then(|m| m.modified().ok()),
    };
    last_used
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > keep)
}

/// The id in `<data_dir>/workspace-id`, made (16 random hex digits) when
/// the file is missing. Two processes starting at once on a new data
/// directory both read the one written first. A data directory closer
/// cannot write gets an id of this process alone (logged): its runs' steps
/// then keep to this process while it lives.
fn workspace_id(data_dir: &Path) -> String {
    let path = data_dir.join("workspace-id");
    let read = |path: &Path| {
        std::fs::read_to_string(path)
            .ok()
            .map(|id| id.trim().to_owned())
            .filter(|id| !id.is_empty())
    };
    if let Some(id) = read(&path) {
        return id;
    }
    let id = format!("{:016x}", fastrand::u64(..));
    // Written whole beside it, then linked in place: a process reading it
    // meanwhile never sees it empty, and only one link wins. A file system
    // without hard links (some network ones) gets it created in place.
    let made = private_dir(data_dir).and_then(|()| {
        let whole = data_dir.join(format!(".workspace-id.{id}"));
        std::fs::write(&whole, format!("{id}\n"))?;
        let linked = std::fs::hard_link(&whole, &path);
        let _ = std::fs::remove_file(&whole);
        match linked {
            Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => {
                use std::io::Write as _;
                let mut file = std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .open(&path)?;
                file.write_all(format!("{id}\n").as_bytes())
            }
            linked => linked,
        }
    });
    match made {
        Ok(()) => id,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => read(&path).unwrap_or(id),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "the data directory's id cannot be written; this process's id stands for it");
            id
        }
    }
}

/// `dir` and its parents, made closer's alone (0700) when missing.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_data_directory_keeps_one_id_which_another_does_not_share() {
        let one = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let inside = one.path().join("made/here");
        let first = workspace_id(&inside);
        assert_eq!(first.len(), 16, "{first}");
        assert_eq!(workspace_id(&inside), first, "read again");
        assert_ne!(workspace_id(other.path()), first);
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&inside).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o700);
        let left: Vec<_> = std::fs::read_dir(&inside)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, ["workspace-id"], "nothing but the id");
    }
}
