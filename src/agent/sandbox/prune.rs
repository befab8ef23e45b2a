//! Pruning the sandbox: the worktrees of runs that ended, the refs they
//! left in their mirror, and mirrors no run has used for a while. The
//! caller (the retention task) decides which runs have ended; this file
//! never removes a mirror that a worktree is
//! registered in or that was used after the cutoff, and checks both under
//! the mirror's lock, so a run preparing its worktree at that moment waits
//! and then finds a fresh mirror to fetch into.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::purpose::Purpose;
use super::remove::remove_tree;
use super::{Sandbox, SandboxError, lock, safe_name};
use crate::model::BRANCH_PREFIX;

impl Sandbox {
    /// Every worktree directory, with the id of the run it belongs to.
    pub async fn worktree_dirs(&self) -> Vec<(PathBuf, String)> {
        entries(&self.options.root.join("worktrees"))
            .await
            .into_iter()
            .filter_map(|path| {
                let name = path.file_name()?.to_str()?;
                let run = Purpose::run_of(name).to_owned();
                Some((path, run))
            })
            .collect()
    }

    /// Every mirror (`<name>-<digest>.git`).
    pub async fn mirror_dirs(&self) -> Vec<PathBuf> {
        entries(&self.options.root.join("mirrors"))
            .await
            .into_iter()
            .filter(|p| p.extension().is_some_and(|e| e == "git"))
            .collect()
    }

    /// Under `mirror`'s lock: forgets the worktrees whose directory is gone
    /// and the refs of their runs, then removes the mirror when no worktree
    /// is registered in it and it was last used (fetched, committed or
    /// pushed through) before `unused_before`. Whether it was removed. Its
    /// lock file stays: a waiter may hold it open.
    pub async fn prune_mirror(
        &self,
        mirror: &Path,
        unused_before: SystemTime,
    ) -> Result<bool, SandboxError> {
        let _lock = lock::lock(&mirror.with_extension("lock")).await?;
        if !mirror.join("HEAD").exists() {
            return Ok(false);
        }
        // Read before this pass writes anything to the mirror.
        let used = last_used(mirror).await;
        // A run's worktree is locked (decision 233): once retention removed
        // its directory, the lock goes too, and the prune forgets it.
        for admin in entries(&mirror.join("worktrees")).await {
            if !worktree_of(&admin).await.is_some_and(|dir| dir.exists()) {
                super::unlock(&admin).await?;
            }
        }
        self.git.run(mirror, &["worktree", "prune"]).await?;
        self.forget_ended_refs(mirror).await?;
        if used >= unused_before || !entries(&mirror.join("worktrees")).await.is_empty() {
            return Ok(false);
        }
        remove_tree(mirror).await?;
        Ok(true)
    }

    /// Deletes the refs of runs whose worktree is gone from a mirror still
    /// in use (decision 235): a run's base ref (`refs/closer/base/<run>`),
    /// an issue's branch no worktree has checked out (none while one is
    /// being rebased), and the remote head fetched for a branch that is
    /// gone (`refs/closer/remote/<branch>`). A run that
    /// comes back makes its worktree, branch and base afresh, as after a
    /// crash; what it pushed is on the remote. Called under the mirror's
    /// lock, after the prune, so every worktree still listed has its
    /// directory.
    async fn forget_ended_refs(&self, mirror: &Path) -> Result<(), SandboxError> {
        let listing = self
            .git
            .run(mirror, &["worktree", "list", "--porcelain"])
            .await?;
        let (worktrees, checked_out) = worktrees_and_branches(&listing);
        for name in self.refs(mirror, "refs/closer/base/").await? {
            if !worktrees.contains(name.trim_start_matches("refs/closer/base/")) {
                self.git.run(mirror, &["update-ref", "-d", &name]).await?;
            }
        }
        // A pattern matches a whole path component or by `fnmatch`.
        let heads = format!("refs/heads/{BRANCH_PREFIX}*");
        // A worktree being rebased shows its branch nowhere: no branch goes
        // while one is. Not `git branch -D`, which rewrites the config the
        // mirror's last use is read from. `branches`: the ones kept.
        let rebasing = self.rebasing(mirror).await;
        let mut branches = HashSet::new();
        for name in self.refs(mirror, &heads).await? {
            let branch = name.trim_start_matches("refs/heads/");
            if rebasing || checked_out.contains(branch) {
                branches.insert(safe_name(branch));
            } else {
                self.git.run(mirror, &["update-ref", "-d", &name]).await?;
            }
        }
        for name in self.refs(mirror, "refs/closer/remote/").await? {
            if !branches.contains(name.trim_start_matches("refs/closer/remote/")) {
                self.git.run(mirror, &["update-ref", "-d", &name]).await?;
            }
        }
        Ok(())
    }

    /// Whether a worktree of the mirror is in the middle of a rebase.
    async fn rebasing(&self, mirror: &Path) -> bool {
        for admin in entries(&mirror.join("worktrees")).await {
            for state in ["rebase-merge", "rebase-apply"] {
                if tokio::fs::symlink_metadata(admin.join(state)).await.is_ok() {
                    return true;
                }
            }
        }
        false
    }

    /// The full names of the mirror's refs under `prefix`.
    async fn refs(&self, mirror: &Path, prefix: &str) -> Result<Vec<String>, SandboxError> {
        let listed = self
            .git
            .run(mirror, &["for-each-ref", "--format=%(refname)", prefix])
            .await?;
        Ok(listed.lines().map(str::to_owned).collect())
    }
}

/// From `git worktree list --porcelain`: the names of the worktrees'
/// directories, and the branches they have checked out.
fn worktrees_and_branches(listing: &str) -> (HashSet<String>, HashSet<String>) {
    let mut worktrees = HashSet::new();
    let mut branches = HashSet::new();
    for line in listing.lines() {
        if let Some(path) = line.strip_prefix("worktree ") {
            let name = Path::new(path).file_name().unwrap_or_default();
            worktrees.insert(name.to_string_lossy().into_owned());
        } else if let Some(branch) = line.strip_prefix("branch refs/heads/") {
            branches.insert(branch.to_owned());
        }
    }
    (worktrees, branches)
}

/// The directory of the worktree `admin` knows: its `gitdir` file names
/// the worktree's `.git`.
async fn worktree_of(admin: &Path) -> Option<PathBuf> {
    let named = tokio::fs::read_to_string(admin.join("gitdir")).await.ok()?;
    Some(Path::new(named.trim()).parent()?.to_path_buf())
}

/// When a mirror was last used: closer rewrites its `config` before every
/// fetch, commit and push, and git writes `FETCH_HEAD` on every fetch.
async fn last_used(mirror: &Path) -> SystemTime {
    let mut last = SystemTime::UNIX_EPOCH;
    for file in ["config", "FETCH_HEAD", "HEAD"] {
        if let Ok(modified) = tokio::fs::metadata(mirror.join(file))
            .await
            .and_then(|m| m.modified())
        {
            last = last.max(modified);
        }
    }
    last
}

/// The entries of a directory; none when it does not exist.
pub async fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(mut listing) = tokio::fs::read_dir(dir).await else {
        return found;
    };
    while let Ok(Some(entry)) = listing.next_entry().await {
        found.push(entry.path());
    }
    found.sort();
    found
}
