//! Pruning the sandbox: the worktrees of runs that ended, and mirrors no
//! run has used for a while. The caller (the retention task) decides which
//! runs have ended; this file never removes a mirror that a worktree is
//! registered in or that was used after the cutoff, and checks both under
//! the mirror's lock, so a run preparing its worktree at that moment waits
//! and then finds a fresh mirror to fetch into.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::purpose::Purpose;
use super::remove::remove_tree;
use super::{Sandbox, SandboxError, lock};

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

    /// Removes `mirror` when, under its lock, no worktree is registered in
    /// it (after git forgets the ones whose directory is gone) and it was
    /// last used (fetched, committed or pushed through) before
    /// `unused_before`. Whether it was removed. Its lock file stays: a
    /// waiter may hold it open.
    pub async fn prune_mirror(
        &self,
        mirror: &Path,
        unused_before: SystemTime,
    ) -> Result<bool, SandboxError> {
        let _lock = lock::lock(&mirror.with_extension("lock")).await?;
        if !mirror.join("HEAD").exists() || last_used(mirror).await >= unused_before {
            return Ok(false);
        }
        // A run's worktree is locked (decision 233): once retention removed
        // its directory, the lock goes too, and the prune forgets it.
        for admin in entries(&mirror.join("worktrees")).await {
            if !worktree_of(&admin).await.is_some_and(|dir| dir.exists()) {
                super::unlock(&admin).await?;
            }
        }
        self.git.run(mirror, &["worktree", "prune"]).await?;
        if !entries(&mirror.join("worktrees")).await.is_empty() {
            return Ok(false);
        }
        remove_tree(mirror).await?;
        Ok(true)
    }
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
