//! The workers' runtime when they share the process with intake (`closer
//! serve`, role `all`): its threads run at a lower CPU priority, so on a
//! busy machine the kernel serves webhook intake first and the queue waits
//! (decision 195). GitHub waits ten seconds for an answer and redelivers
//! nothing by itself; a job can wait.
//!
//! On Linux a nice value belongs to a thread, and a process inherits the
//! value of the thread that started it: agents, git and the checks the
//! workers start run at the workers' priority too.

use std::io;

/// How much lower the workers' threads run than intake's (`nice` +10: under
/// contention the kernel gives them about a tenth of intake's share).
pub const WORK_NICE: i32 = 10;

/// The name of the workers' threads (`/proc/<pid>/task/*/comm`).
pub const THREAD_NAME: &str = "closer-work";

/// A multi-thread runtime whose threads, blocking ones included, run at
/// [`WORK_NICE`].
pub fn build() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .thread_name(THREAD_NAME)
        .on_thread_start(lower_this_thread)
        .enable_all()
        .build()
}

/// Lowers the calling thread's priority by [`WORK_NICE`]. Raising a nice
/// value needs no privilege; a failure is logged and the thread runs on.
fn lower_this_thread() {
    // SAFETY: gettid and setpriority take and return plain integers; on
    // Linux `PRIO_PROCESS` with a thread id sets that thread's nice value.
    let rc = unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, WORK_NICE)
    };
    if rc != 0 {
        let error = io::Error::last_os_error();
        tracing::warn!(%error, "a worker thread keeps intake's priority");
    }
}
