//! The retention task's files: the directories of ended runs, unused
//! mirrors, and the data directory's size against its budget.

use std::path::Path;

use super::Retention;
use crate::agent::sandbox::remove::remove_tree;
use crate::store::{jobs, runs};

impl Retention {
    /// Removes the worktrees, prompt files and HOMEs of runs that ended
    /// before the cutoff (or, with no run row, whose directory is that
    /// old). Each run's directories go together under its file lock, taken
    /// only if no step holds it, with the run's state and jobs read under
    /// the lock: a run retried meanwhile, or with a step queued or at work,
    /// keeps them all, and a step that starts meanwhile waits for the
    /// removal to end.
    pub(super) async fn prune_run_dirs(&self) -> u64 {
        let cutoff = self.cutoff(self.config.run_files);
        let mut removed = 0;
        for (run_id, paths) in self.workspace.run_dirs().await {
            let _files = match self.workspace.try_take_files(&run_id).await {
                Ok(Some(files)) => files,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(run = run_id, error = %e, "run's file lock not taken; its files are kept");
                    continue;
                }
            };
            let ended = self.run_ended_before(&run_id, cutoff).await;
            for path in paths {
                let goes = match ended {
                    Ended::Before => true,
                    Ended::NotBefore => false,
                    Ended::NoRow => modified_ms(&path).await.is_some_and(|t| t < cutoff),
                };
                if !goes {
                    continue;
                }
                match remove_tree(&path).await {
                    Ok(()) => removed += 1,
                    Err(e) => {
                        tracing::warn!(dir = %path.display(), error = %e, "run directory not removed")
                    }
                }
            }
        }
        removed
    }

    /// Whether the run has ended, was last updated before `cutoff`, and
    /// has no step queued or at work (a `reverify` or a review round of a
    /// done run works in its files without changing its state until it
    /// ends). An unreadable run is treated as open.
    async fn run_ended_before(&self, run_id: &str, cutoff: i64) -> Ended {
        let id = crate::model::RunId::from_stored(run_id);
        let pool = self.store.pool();
        match runs::get(pool, &id).await {
            Ok(Some(run)) if run.state.is_final() && run.updated_at < cutoff => {
                let key = crate::model::run_job_key(&id);
                match jobs::has_live_job(pool, &key).await {
                    Ok(false) => Ended::Before,
                    Ok(true) => Ended::NotBefore,
                    Err(e) => {
                        tracing::warn!(run = run_id, error = %e, "run's jobs unreadable; its files are kept");
                        Ended::NotBefore
                    }
                }
            }
            Ok(Some(_)) => Ended::NotBefore,
            Ok(None) => Ended::NoRow,
            Err(e) => {
                tracing::warn!(run = run_id, error = %e, "run unreadable; its files are kept");
                Ended::NotBefore
            }
        }
    }

    /// Removes mirrors unused for longer than `mirrors_unused`; never one a
    /// worktree (an open run's, or one not yet pruned) is registered in.
    /// From a mirror that stays, the refs of runs whose worktree is gone go.
    pub(super) async fn prune_mirrors(&self) -> u64 {
        let unused_before = self.file_cutoff(self.config.mirrors_unused);
        let sandbox = self.workspace.sandbox();
        let mut removed = 0;
        for mirror in sandbox.mirror_dirs().await {
            match sandbox.prune_mirror(&mirror, unused_before).await {
                Ok(true) => removed += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(mirror = %mirror.display(), error = %e, "mirror not pruned")
                }
            }
        }
        removed
    }

    /// Measures the data directory, exports its size and budget, and warns
    /// when the size is over the budget.
    pub(super) async fn check_budget(&self) -> u64 {
        let dir = self.data_dir.clone();
        let bytes = tokio::task::spawn_blocking(move || dir_size(&dir))
            .await
            .unwrap_or(0);
        metrics::gauge!("closer_data_dir_bytes").set(bytes as f64);
        if let Some(budget) = self.config.disk_budget_bytes {
            metrics::gauge!("closer_data_dir_budget_bytes").set(budget as f64);
            if bytes > budget {
                tracing::warn!(
                    data_dir = %self.data_dir.display(),
                    bytes,
                    budget,
                    "the data directory is over its disk budget; lower the [retention] ages or raise disk_budget_mb"
                );
            }
        }
        bytes
    }
}

/// What the database says of a run whose files the retention task holds.
#[derive(Debug, Clone, Copy)]
enum Ended {
    /// Ended before the cutoff, with no step on its way: its files go.
    Before,
    /// Open, young, busy or unreadable: its files stay.
    NotBefore,
    /// No row (a run whose row was pruned, or a crash before it was
    /// stored): each directory goes by its own age.
    NoRow,
}

/// The bytes the files under `path` take on disk, as `du` counts them:
/// the blocks allocated to each file, directory and link (a sparse file
/// counts what it holds, not its length), each file once however many
/// hard links it has (a package manager links its cache into a worktree).
/// Symbolic links are not followed, and a file that vanishes while being
/// counted counts as nothing. Walked with a list of its own, not by
/// recursion: an agent can nest directories as deep as it likes.
pub fn dir_size(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    let mut total: u64 = 0;
    let mut linked = std::collections::HashSet::new();
    let mut pending = vec![path.to_path_buf()];
    while let Some(at) = pending.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&at) else {
            continue;
        };
        if meta.nlink() > 1 && !meta.is_dir() && !linked.insert((meta.dev(), meta.ino())) {
            continue;
        }
        total = total.saturating_add(meta.blocks().saturating_mul(512));
        if meta.is_dir()
            && let Ok(listing) = std::fs::read_dir(&at)
        {
            pending.extend(listing.flatten().map(|e| e.path()));
        }
    }
    total
}

/// A path's modification time on the store's scale (ms since the epoch).
async fn modified_ms(path: &Path) -> Option<i64> {
    let modified = tokio::fs::metadata(path).await.ok()?.modified().ok()?;
    let since = modified.duration_since(std::time::UNIX_EPOCH).ok()?;
    Some(since.as_millis() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_nested_as_deep_as_a_path_goes_is_counted_on_a_small_stack() {
        let dir = tempfile::tempdir().unwrap();
        let mut deepest = dir.path().to_path_buf();
        // Up to the length a path may have: about 2,000 levels.
        while deepest.as_os_str().len() < 4000 {
            deepest.push("d");
        }
        std::fs::create_dir_all(&deepest).unwrap();
        std::fs::write(deepest.join("f"), [0u8; 10]).unwrap();
        std::fs::write(dir.path().join("g"), [0u8; 5]).unwrap();
        let root = dir.path().to_path_buf();
        let counted = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || dir_size(&root))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(counted, du(dir.path()), "what du counts");
    }

    /// A sparse terabyte counts what it holds, a file linked twice counts
    /// once: the same figure as `du` (the control: the files' lengths add
    /// up to more than a terabyte).
    #[test]
    fn a_sparse_file_and_hard_links_count_as_du_counts_them() {
        let dir = tempfile::tempdir().unwrap();
        let sparse = std::fs::File::create(dir.path().join("sparse")).unwrap();
        sparse.set_len(1 << 40).unwrap();
        std::fs::write(dir.path().join("data"), vec![7u8; 100_000]).unwrap();
        std::fs::hard_link(dir.path().join("data"), dir.path().join("again")).unwrap();
        let lengths: u64 = ["sparse", "data", "again"]
            .iter()
            .map(|f| std::fs::metadata(dir.path().join(f)).unwrap().len())
            .sum();
        assert!(lengths > 1 << 40, "control: {lengths}");
        let counted = dir_size(dir.path());
        assert_eq!(counted, du(dir.path()), "what du counts");
        assert!(counted < 1 << 20, "{counted}");
    }

    /// `du`'s figure for `path`, in bytes.
    fn du(path: &Path) -> u64 {
        let out = std::process::Command::new("du")
            .args(["-s", "-B1"])
            .arg(path)
            .output()
            .expect("du runs");
        let text = String::from_utf8_lossy(&out.stdout);
        text.split_whitespace().next().unwrap().parse().unwrap()
    }
}
