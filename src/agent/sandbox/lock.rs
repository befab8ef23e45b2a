//! File locks on the data directory: an exclusive one per mirror, so
//! concurrent runs on one repository (in this process or in another closer
//! process on the same disk) never fetch into or add worktrees to the same
//! mirror at once; and one per run's files, which the run's steps hold
//! shared and the retention task exclusively (`engine::run::workspace`).
//!
//! `flock(2)` locks belong to an open file description, so two opens in one
//! process exclude each other as well; the lock is released when the guard
//! (the open file) is dropped, also when the holder crashes. Lock files
//! stay: a waiter may hold one open. A child closer spawns (git, an agent)
//! shares the open file descriptions of the moment between its fork and
//! its exec (they are close-on-exec), so a lock let go may stay held that
//! long: a waiter waits a little longer, and the retention task, which does
//! not wait, tries again next pass.
//!
//! The wait is asynchronous and bounded: the lock is tried without blocking
//! every [`RETRY_EVERY`], for up to a patience. No thread sits blocked in
//! `flock`, so a job given up while it waits (lease lost, shutdown) leaves
//! nothing behind, and a holder that is wedged fails the waiter with an error
//! naming the lock instead of holding it forever.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;

/// How long a run waits in all for a mirror other runs hold: a few runs in
/// line, each holding it for some git commands (each bounded by its own
/// timeout); past it, the holder is stuck or the line too long.
pub const PATIENCE: Duration = Duration::from_secs(30 * 60);

/// How often a waiter tries the lock again.
const RETRY_EVERY: Duration = Duration::from_millis(50);

/// Holds the lock until dropped.
#[derive(Debug)]
pub struct FileLock {
    _file: File,
}

/// Waits for the exclusive lock on `path` (created if missing), for up to
/// [`PATIENCE`].
pub async fn lock(path: &Path) -> std::io::Result<FileLock> {
    lock_within(path, PATIENCE).await
}

/// [`lock`] with another patience.
pub async fn lock_within(path: &Path, patience: Duration) -> std::io::Result<FileLock> {
    acquire(path, libc::LOCK_EX, Some(patience))
        .await?
        .ok_or_else(|| held_too_long(path, patience))
}

/// Waits for a shared lock on `path` (created if missing), for up to
/// `patience`: shared holders do not exclude each other, only an exclusive
/// one.
pub async fn lock_shared_within(path: &Path, patience: Duration) -> std::io::Result<FileLock> {
    acquire(path, libc::LOCK_SH, Some(patience))
        .await?
        .ok_or_else(|| held_too_long(path, patience))
}

/// The exclusive lock on `path` if nobody holds it now; `None` if somebody
/// does.
pub async fn try_lock(path: &Path) -> std::io::Result<Option<FileLock>> {
    acquire(path, libc::LOCK_EX, None).await
}

/// Takes the lock in `mode`, trying again until `patience` runs out (once,
/// with none); `None` when it stayed held.
async fn acquire(
    path: &Path,
    mode: libc::c_int,
    patience: Option<Duration>,
) -> std::io::Result<Option<FileLock>> {
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent).await?;
    }
    let file = tokio::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .await?
        .into_std()
        .await;
    let deadline = patience.map(|p| tokio::time::Instant::now() + p);
    loop {
        // SAFETY: flock on a file descriptor we own for the call's duration;
        // LOCK_NB makes it return at once.
        let rc = unsafe { libc::flock(file.as_raw_fd(), mode | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(Some(FileLock { _file: file }));
        }
        let err = std::io::Error::last_os_error();
        match err.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::Interrupted => {}
            _ => return Err(err),
        }
        if deadline.is_none_or(|d| tokio::time::Instant::now() >= d) {
            return Ok(None);
        }
        tokio::time::sleep(RETRY_EVERY).await;
    }
}

fn held_too_long(path: &Path, patience: Duration) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        format!(
            "the lock {} was still held by another holder after {:?}",
            path.display(),
            patience
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_held_lock_is_waited_for_and_taken_once_released() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.lock");
        let held = lock(&path).await.unwrap();
        let waiter = tokio::spawn({
            let path = path.clone();
            async move { lock(&path).await }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!waiter.is_finished(), "the lock was taken while held");
        drop(held);
        let taken = tokio::time::timeout(Duration::from_secs(10), waiter).await;
        assert!(taken.unwrap().unwrap().is_ok());
    }

    #[tokio::test]
    async fn a_lock_held_past_the_patience_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.lock");
        let _held = lock(&path).await.unwrap();
        let err = lock_within(&path, Duration::from_millis(150))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        assert!(err.to_string().contains("m.lock"), "{err}");
    }

    #[tokio::test]
    async fn shared_holders_exclude_only_an_exclusive_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.lock");
        let patience = Duration::from_millis(150);
        let first = lock_shared_within(&path, patience).await.unwrap();
        let second = lock_shared_within(&path, patience).await.unwrap();
        assert!(try_lock(&path).await.unwrap().is_none(), "held shared");
        drop((first, second));
        let exclusive = try_lock(&path).await.unwrap().expect("free again");
        let err = lock_shared_within(&path, patience).await.unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::TimedOut);
        drop(exclusive);
        assert!(lock_shared_within(&path, patience).await.is_ok());
    }
}
