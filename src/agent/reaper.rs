//! Nothing a subprocess starts outlives it.
//!
//! A process group is not enough: an agent's shell tool may call `setsid`, and
//! a daemon in its own session escapes `killpg`. So every subprocess closer
//! starts (agents, goal commands, git) is run under a small reaper: between
//! `fork` and `exec`, the child makes itself a *child subreaper*
//! (`PR_SET_CHILD_SUBREAPER`) and forks once more; the grandchild execs the
//! real program, and the reaper stays behind. Every orphaned descendant is
//! re-parented to the reaper, whatever session or group it moved to, so the
//! reaper can find and kill all of them.
//!
//! The reaper kills the whole tree (and then exits with the program's status)
//! when either
//! - the program exits: nothing it started stays behind, or
//! - its *lifeline* closes: closer holds the write end of a pipe whose read
//!   end the reaper watches; closer closes it at the deadline, when a run is
//!   stopped, or by dying. No signal has to reach the reaper for cleanup.
//!
//! Once every descendant is gone, the reaper writes one byte to its
//! *report* pipe before it exits. A reaper that exited without it was
//! killed before it could clean up (where the sandbox cannot stop the
//! program from signalling it: no sandbox, or Landlock below ABI 6), so
//! whatever the program started may still run: [`Report::cleaned_up`] says
//! which, and the caller treats the second as a failure of its own.
//!
//! The reaper never returns to Rust code after the fork: it only calls
//! async-signal-safe functions (`waitpid`, `poll`, `read`, `open`, `kill`,
//! `_exit`) and allocates nothing, as a forked child of a threaded program
//! must.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use tokio::process::Command;

/// How often the reaper looks at its children while the program runs.
const POLL_MS: libc::c_int = 100;

/// Descriptors closed one by one where `close_range` is missing.
const FALLBACK_MAX_FD: RawFd = 65_536;

/// Bounds the cleanup loop (each round kills every current child).
const MAX_KILL_ROUNDS: usize = 10_000;

/// closer's end of the lifeline: closing it (dropping this) makes the reaper
/// kill the whole tree.
#[derive(Debug)]
pub struct Lifeline {
    _write: OwnedFd,
    report: Option<Report>,
}

impl Lifeline {
    /// The reaper's report, read once the reaper has exited.
    pub fn take_report(&mut self) -> Option<Report> {
        self.report.take()
    }
}

/// closer's end of the reaper's report pipe (non-blocking).
#[derive(Debug)]
pub struct Report {
    read: OwnedFd,
}

impl Report {
    /// Whether the reaper reported every descendant gone. Ask once the
    /// reaper has exited: it writes before it exits, so the byte is there
    /// then or never.
    pub fn cleaned_up(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: a one-byte read into a stack byte from a descriptor we own.
        unsafe { libc::read(self.read.as_raw_fd(), (&raw mut byte).cast(), 1) == 1 }
    }
}

/// A pipe, both ends close-on-exec (so kept out of every other program
/// closer starts), plus `flags`: `(read, write)`.
fn pipe(flags: libc::c_int) -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 fills the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | flags) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Arranges for `command` to run under a reaper. Returns the lifeline,
/// which must be kept until the child has been waited for.
pub fn install(command: &mut Command) -> io::Result<Lifeline> {
    let (read, write) = pipe(0)?;
    let (report, report_write) = pipe(libc::O_NONBLOCK)?;
    // The lifeline's read end and the report's write end move into the
    // closure: the child keeps them across fork (the program loses them at
    // its exec), the parent closes its copies when the command is dropped.
    // SAFETY: the closure runs in the forked child before exec and only
    // calls async-signal-safe functions (see `become_reaper`).
    unsafe {
        command.pre_exec(move || become_reaper(read.as_raw_fd(), report_write.as_raw_fd()));
    }
    Ok(Lifeline {
        _write: write,
        report: Some(Report { read: report }),
    })
}

/// In the forked child: fork the program off and stay behind as its reaper.
/// Returns (in the grandchild only) to let the exec go ahead.
fn become_reaper(lifeline: RawFd, report: RawFd) -> io::Result<()> {
    // SAFETY: prctl and fork are async-signal-safe; see the module note.
    unsafe {
        if libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        match libc::fork() {
            -1 => Err(io::Error::last_os_error()),
            0 => Ok(()),
            program => reap(program, lifeline, report),
        }
    }
}

/// The reaper's life: wait for the program or the lifeline, kill the tree,
/// report it gone, exit as the program did.
///
/// # Safety
/// Only in the forked child, single-threaded; never returns.
unsafe fn reap(program: libc::pid_t, lifeline: RawFd, report: RawFd) -> ! {
    // SAFETY: async-signal-safe calls only; the descriptors kept are the
    // lifeline and stdio (std's exec-error pipe and every other inherited
    // descriptor are closed, so the parent sees the program's exec, not ours).
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        close_all_but([lifeline, report]);
        // A pidfd turns readable when the program exits: the wait below
        // wakes at once for either event, and every POLL_MS besides to reap
        // orphans. Without one (kernels before 5.3) the wait only wakes
        // every POLL_MS to look.
        let pidfd = libc::syscall(libc::SYS_pidfd_open, program, 0) as RawFd;
        let mut status: libc::c_int = 0;
        let mut exited = false;
        while !exited {
            let reaped = libc::waitpid(-1, &mut status, libc::WNOHANG);
            if reaped == program {
                exited = true;
            } else if reaped > 0 {
                continue;
            } else if lifeline_closed(lifeline, pidfd) {
                libc::kill(program, libc::SIGKILL);
                libc::waitpid(program, &mut status, 0);
                exited = true;
            }
        }
        if kill_descendants() {
            libc::write(report, c"1".as_ptr().cast(), 1);
        }
        exit_as(status)
    }
}

/// Waits until the lifeline closes, the program exits (its `pidfd` turns
/// readable) or [`POLL_MS`] pass; true when the lifeline closed.
///
/// # Safety
/// Async-signal-safe; `fd` is the lifeline's read end.
unsafe fn lifeline_closed(fd: RawFd, pidfd: RawFd) -> bool {
    let mut fds = [
        libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: pidfd,
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // Bounded even with a pidfd: each wake reaps the orphans that died
    // since (a daemon's `cmd &`, a test runner's children), which would
    // otherwise stay zombies, counted against `RLIMIT_NPROC` and a
    // container's pids limit, until the program exits (decision 242).
    let count = if pidfd >= 0 { 2 } else { 1 };
    let timeout = POLL_MS;
    // SAFETY: valid pollfds; a closed write end reads as POLLHUP.
    unsafe { libc::poll(fds.as_mut_ptr(), count, timeout) > 0 && fds[0].revents != 0 }
}

/// Closes every descriptor above stderr except the two in `keep`.
///
/// # Safety
/// Async-signal-safe (`close_range` is a plain system call).
unsafe fn close_all_but(keep: [RawFd; 2]) {
    let (low, high) = (keep[0].min(keep[1]), keep[0].max(keep[1]));
    // SAFETY: closing descriptors we own in this process only.
    let close_range = |from: libc::c_uint, to: libc::c_uint| unsafe {
        from > to || libc::syscall(libc::SYS_close_range, from, to, 0 as libc::c_uint) == 0
    };
    let mut from: libc::c_uint = 3;
    let mut closed = true;
    for kept in [low, high] {
        let kept = kept as libc::c_uint;
        if kept > from {
            closed &= close_range(from, kept - 1);
        }
        from = from.max(kept + 1);
    }
    closed &= close_range(from, libc::c_uint::MAX);
    if !closed {
        // Kernels before 5.9 have no close_range: close one by one.
        for fd in 3..FALLBACK_MAX_FD {
            if fd != low && fd != high {
                // SAFETY: as above.
                unsafe {
                    libc::close(fd);
                }
            }
        }
    }
}

/// Kills every child, reaps every one that is gone, and repeats until
/// there are none: the grandchildren of a killed child are re-parented here
/// and killed next. Each round reads the whole `children` file (thousands
/// of orphans fill many reads) and reaps all the dead at once, so the dead
/// never crowd the living out of a round. True once none is left; false
/// when the rounds ran out first.
///
/// # Safety
/// Async-signal-safe; only in the reaper.
unsafe fn kill_descendants() -> bool {
    for _ in 0..MAX_KILL_ROUNDS {
        // SAFETY: our own unreaped children; their ids cannot have been reused.
        unsafe {
            each_child(|pid| {
                libc::kill(pid, libc::SIGKILL);
            });
            let mut status = 0;
            let mut reaped = false;
            loop {
                match libc::waitpid(-1, &mut status, libc::WNOHANG) {
                    0 => break,
                    gone if gone < 0 && no_children() => return true,
                    gone if gone < 0 => break,
                    _ => reaped = true,
                }
            }
            // Children left, none dead yet: wait for the first to go.
            if !reaped && libc::waitpid(-1, &mut status, 0) < 0 && no_children() {
                return true;
            }
        }
    }
    false
}

/// Whether the last `waitpid` failed for want of children (`ECHILD`), not
/// for an interruption.
///
/// # Safety
/// Async-signal-safe: reads this thread's `errno`.
unsafe fn no_children() -> bool {
    // SAFETY: the calling thread's errno location is always valid.
    unsafe { *libc::__errno_location() == libc::ECHILD }
}

/// Calls `kill` with each pid in `/proc/thread-self/children`, read to its
/// end a stack buffer at a time.
///
/// # Safety
/// Async-signal-safe; `kill` must be too.
unsafe fn each_child(mut kill: impl FnMut(libc::pid_t)) {
    let mut buf = [0u8; 4096];
    let mut pids = PidReader::default();
    // SAFETY: a static NUL-terminated path and a stack buffer.
    unsafe {
        let fd = libc::open(
            c"/proc/thread-self/children".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return;
        }
        loop {
            let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
            let Ok(n @ 1..) = usize::try_from(n) else {
                break;
            };
            pids.feed(&buf[..n], &mut kill);
        }
        libc::close(fd);
    }
    pids.finish(&mut kill);
}

/// Reads the decimal numbers of a `children` file, separated by spaces,
/// as they come, a number split between two reads included; allocates
/// nothing.
#[derive(Default)]
struct PidReader {
    pid: libc::pid_t,
    in_number: bool,
}

impl PidReader {
    fn feed(&mut self, bytes: &[u8], each: &mut impl FnMut(libc::pid_t)) {
        for b in bytes {
            if b.is_ascii_digit() {
                self.pid = self
                    .pid
                    .saturating_mul(10)
                    .saturating_add(libc::pid_t::from(b - b'0'));
                self.in_number = true;
            } else {
                self.finish(each);
            }
        }
    }

    fn finish(&mut self, each: &mut impl FnMut(libc::pid_t)) {
        if self.in_number {
            each(self.pid);
        }
        self.pid = 0;
        self.in_number = false;
    }
}

/// Exits with the program's exit code, or dies of the program's signal.
///
/// # Safety
/// Async-signal-safe; never returns.
unsafe fn exit_as(status: libc::c_int) -> ! {
    // SAFETY: resetting a disposition and signalling ourselves, then _exit.
    unsafe {
        if libc::WIFSIGNALED(status) {
            let signal = libc::WTERMSIG(status);
            libc::signal(signal, libc::SIG_DFL);
            libc::kill(libc::getpid(), signal);
            libc::_exit(128 + signal);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file read in pieces: a number split between two reads is one pid.
    #[test]
    fn children_files_are_read_as_pids_across_reads() {
        let read = |pieces: &[&[u8]]| {
            let mut pids = Vec::new();
            let mut reader = PidReader::default();
            for piece in pieces {
                reader.feed(piece, &mut |p| pids.push(p));
            }
            reader.finish(&mut |p| pids.push(p));
            pids
        };
        assert_eq!(read(&[b"12 345 7\n"]), [12, 345, 7]);
        assert_eq!(read(&[b"12 3", b"45 7"]), [12, 345, 7]);
        assert_eq!(read(&[b"", b""]), Vec::<libc::pid_t>::new());
    }
}
