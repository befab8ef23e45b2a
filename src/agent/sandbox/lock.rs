//! An exclusive lock per mirror, so concurrent runs on one repository (in
//! this process or in another closer process on the same disk) never fetch
//! into or add worktrees to the same mirror at once.
//!
//! `flock(2)` locks belong to an open file description, so two opens in one
//! process exclude each other as well; the lock is released when the guard
//! (the open file) is dropped, also when the holder crashes.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Holds the lock until dropped.
#[derive(Debug)]
pub struct MirrorLock {
    _file: File,
}

/// Waits for the exclusive lock on `path` (created if missing).
pub async fn lock(path: &Path) -> std::io::Result<MirrorLock> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)?;
        loop {
            // SAFETY: flock on a file descriptor we own for the call's duration.
            let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if rc == 0 {
                return Ok(MirrorLock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
    })
    .await
    .map_err(std::io::Error::other)?
}
