//! Forks and the writing of files closer runs next, kept apart.
//!
//! A descriptor open for writing is inherited by every child forked
//! meanwhile, and the child holds it until it `exec`s (closer's descriptors
//! are close-on-exec). Executing the file while any process holds it open
//! for writing fails with "Text file busy" (`ETXTBSY`). closer copies files
//! that are run next (the `custom` handler from the base commit, the head's
//! test files into the reproduction's checkout) while other tasks start
//! processes, so a spawn holds this lock shared until its child has
//! `exec`ed (std's `spawn` returns only then), and such a write holds it
//! exclusively from open to close. It is the remedy of Go's
//! `syscall.ForkLock`. A spawn waits for the writes under way: only files
//! that can be executed are written under it (the handler's script, an
//! executable test file), not every copy.

use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock};

static LOCK: RwLock<()> = RwLock::new(());

/// Runs `spawn` (a fork and `exec`) while no file that may be run is being
/// written.
pub fn spawning<T>(spawn: impl FnOnce() -> T) -> T {
    let _shared = LOCK.read().unwrap_or_else(PoisonError::into_inner);
    spawn()
}

/// Runs `write` (from open to close of a file that may be run) while no
/// process is being forked.
pub fn writing<T>(write: impl FnOnce() -> T) -> T {
    let _exclusive = LOCK.write().unwrap_or_else(PoisonError::into_inner);
    write()
}

/// `command.output()`, holding the lock only until the child has `exec`ed:
/// stdin from `/dev/null`, stdout and stderr collected.
pub fn output(command: &mut std::process::Command) -> std::io::Result<std::process::Output> {
    use std::process::Stdio;
    command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    spawning(|| command.spawn())?.wait_with_output()
}

/// Writes `contents` to `path` with the permission bits `mode`, apart from
/// forks.
pub async fn write_file(path: PathBuf, contents: Vec<u8>, mode: u32) -> std::io::Result<()> {
    blocking(move || {
        writing(|| {
            use std::os::unix::fs::OpenOptionsExt as _;
            use std::os::unix::fs::PermissionsExt as _;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(mode)
                .open(&path)?;
            std::io::Write::write_all(&mut file, &contents)?;
            // `mode` at creation is masked by the umask; an existing file
            // keeps its bits: set them either way.
            file.set_permissions(std::fs::Permissions::from_mode(mode))
        })
    })
    .await
}

/// Copies `from` to `to` (with `from`'s permission bits), apart from forks.
pub async fn copy_file(from: &Path, to: &Path) -> std::io::Result<u64> {
    let (from, to) = (from.to_path_buf(), to.to_path_buf());
    blocking(move || writing(|| std::fs::copy(&from, &to))).await
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(std::io::Error::other)?
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::CommandExt as _;
    use std::process::Command;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use super::*;

    /// Marks the child copy of the test binary that runs the probe below.
    const PROBE_CHILD: &str = "CLOSER_TEST_FORK_LOCK_CHILD";

    #[test]
    fn a_file_written_apart_from_forks_runs_at_once_and_without_that_it_is_busy() {
        // Other tests of this process fork without the lock, so a child copy
        // of the binary, running nothing else, holds the probe.
        crate::alone::run(
            "agent::fork_lock::tests::busy_probe",
            PROBE_CHILD,
            "BUSY_PROBE_DONE",
        );
    }

    /// Runs only in the child started above (it returns at once elsewhere).
    /// A thread forks again and again, each child holding what it inherited
    /// for 5 ms before it `exec`s; meanwhile scripts are written, each held
    /// open for 10 ms, and run at once.
    #[test]
    fn busy_probe() {
        if !crate::alone::is_the_child(PROBE_CHILD) {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        // How many of `tries` scripts were busy; with `first`, up to the first.
        let busy = |apart: bool, tries: u32, first: bool| {
            let stop = AtomicBool::new(false);
            std::thread::scope(|scope| {
                scope.spawn(|| fork_until(&stop));
                let mut busy = 0;
                for n in 0..tries {
                    if !write_and_run(&dir.path().join(format!("{apart}-{n}")), apart) {
                        busy += 1;
                        if first {
                            break;
                        }
                    }
                }
                stop.store(true, Ordering::Relaxed);
                busy
            })
        };
        assert_eq!(
            busy(true, 20, false),
            0,
            "a script written under the lock was busy"
        );
        // The control: written without the lock, one is busy (most are; a
        // loaded machine may need a few tries).
        assert!(
            busy(false, 200, true) > 0,
            "no script was ever busy: the probe proves nothing"
        );
        println!("BUSY_PROBE_DONE");
    }

    fn fork_until(stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let mut cmd = Command::new("true");
            // SAFETY: nanosleep is async-signal-safe and allocates nothing.
            unsafe {
                cmd.pre_exec(|| {
                    std::thread::sleep(Duration::from_millis(5));
                    Ok(())
                });
            }
            let mut child = spawning(|| cmd.spawn()).unwrap();
            child.wait().unwrap();
        }
    }

    /// Writes a script at `path` (under the lock when `apart`) and runs it;
    /// false when it was busy.
    fn write_and_run(path: &Path, apart: bool) -> bool {
        use std::os::unix::fs::OpenOptionsExt as _;
        let write = || {
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o700)
                .open(path)
                .unwrap();
            std::io::Write::write_all(&mut file, b"#!/bin/sh\nexit 0\n").unwrap();
            std::thread::sleep(Duration::from_millis(10));
        };
        if apart {
            writing(write)
        } else {
            write()
        }
        match spawning(|| Command::new(path).spawn()) {
            Ok(mut child) => child.wait().unwrap().success(),
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) => false,
            Err(e) => panic!("{}: {e}", path.display()),
        }
    }
}
