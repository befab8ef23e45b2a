//! The retention task: hourly, it prunes what closer no longer needs, each
//! kind after its own age (`[retention]`, see docs/configuration.md), and
//! measures the data directory against its budget for `/metrics`.
//!
//! It must never prune anything an open run needs: rows and files of a run
//! are touched only once the run has ended (done, failed or stopped) and
//! was last updated before the cutoff, checked again right before its files
//! go; deliveries only once handled or orphaned; mirrors only under their
//! lock with no worktree in them. Every age is measured on the store's
//! clock, so tests move time instead of waiting.

mod disk;

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

use crate::clock::Millis;
use crate::config::retention::RetentionConfig;
use crate::engine::run::Workspace;
use crate::panic::Caught;
use crate::store::{Store, StoreError, deliveries, dry_run, jobs, runs};

pub use disk::dir_size;

/// How often the task runs.
pub const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// What one pass removed, and the data directory's size after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Handled deliveries.
    pub deliveries: u64,
    /// Deliveries whose job died or never ran.
    pub orphaned_deliveries: u64,
    pub done_jobs: u64,
    pub dead_jobs: u64,
    /// Iterations whose prompt and agent output were emptied.
    pub run_outputs: u64,
    pub dry_run_writes: u64,
    /// Worktrees, prompt-file directories and HOMEs of ended runs.
    pub run_dirs: u64,
    pub mirrors: u64,
    /// The data directory's size after the pass, in bytes.
    pub data_dir_bytes: u64,
}

/// The retention task's collaborators: the store and the data directory.
pub struct Retention {
    store: Store,
    workspace: Workspace,
    data_dir: PathBuf,
    config: RetentionConfig,
}

impl Retention {
    pub fn new(
        store: Store,
        workspace: Workspace,
        data_dir: PathBuf,
        config: RetentionConfig,
    ) -> Self {
        Retention {
            store,
            workspace,
            data_dir,
            config,
        }
    }

    /// Prunes every [`PRUNE_EVERY`] until shutdown.
    pub async fn run_forever(self, mut shutdown: watch::Receiver<bool>) {
        loop {
            // A panic costs this pass, not retention for good.
            if let Err(panic) = Caught(Box::pin(self.prune_once())).await {
                tracing::error!(%panic, "retention panicked");
            }
            tokio::select! {
                _ = tokio::time::sleep(PRUNE_EVERY) => {}
                _ = shutdown.changed() => return,
            }
        }
    }

    /// One pass: the database first, then the files, then the size. A
    /// failing part is logged and the others still run.
    pub async fn prune_once(&self) -> Pruned {
        let mut pruned = Pruned::default();
        if let Err(e) = self.prune_rows(&mut pruned).await {
            tracing::warn!(error = %e, "pruning the database failed");
        }
        pruned.run_dirs = self.prune_run_dirs().await;
        pruned.mirrors = self.prune_mirrors().await;
        pruned.data_dir_bytes = self.check_budget().await;
        report(&pruned);
        pruned
    }

    async fn prune_rows(&self, pruned: &mut Pruned) -> Result<(), StoreError> {
        let pool = self.store.pool();
        let c = &self.config;
        pruned.deliveries = deliveries::prune(pool, self.cutoff(c.deliveries)).await?;
        pruned.done_jobs = jobs::prune_done(pool, self.cutoff(c.deliveries)).await?;
        pruned.dead_jobs = jobs::prune_dead(pool, self.cutoff(c.dead_jobs)).await?;
        // After the dead jobs: a delivery whose job just went is orphaned now.
        pruned.orphaned_deliveries =
            deliveries::prune_orphaned(pool, self.cutoff(c.dead_jobs)).await?;
        pruned.run_outputs = runs::prune_output(pool, self.cutoff(c.run_output)).await?;
        pruned.dry_run_writes = dry_run::prune(pool, self.cutoff(c.dry_run_writes)).await?;
        Ok(())
    }

    /// The store's now minus `age`, in milliseconds.
    fn cutoff(&self, age: Duration) -> Millis {
        self.store.now_ms() - age.as_millis() as Millis
    }

    /// The same cutoff as a file time.
    fn file_cutoff(&self, age: Duration) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.cutoff(age).max(0) as u64)
    }
}

/// Logs and counts what a pass removed.
fn report(pruned: &Pruned) {
    let kinds = [
        ("deliveries", pruned.deliveries),
        ("orphaned_deliveries", pruned.orphaned_deliveries),
        ("done_jobs", pruned.done_jobs),
        ("dead_jobs", pruned.dead_jobs),
        ("run_outputs", pruned.run_outputs),
        ("dry_run_writes", pruned.dry_run_writes),
        ("run_dirs", pruned.run_dirs),
        ("mirrors", pruned.mirrors),
    ];
    for (kind, n) in kinds {
        metrics::counter!("closer_retention_pruned_total", "kind" => kind).increment(n);
    }
    if kinds.iter().any(|(_, n)| *n > 0) {
        tracing::info!(?pruned, "retention pass pruned old data");
    }
}
