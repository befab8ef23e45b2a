//! Resource limits of a sandboxed process (`[sandbox.limits]`), set between
//! fork and exec with `setrlimit`, and the privileges it gives up.
//!
//! Wall time is not here: every process has its own deadline (the agent's
//! `timeout_secs`, a goal's `timeout_secs`).

use std::io;

use serde::Deserialize;

/// Ceiling on each limit, so a typo cannot overflow anything.
const MAX_MB: u64 = 1 << 24;

/// `[sandbox.limits]`. `0` turns a limit off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Address space per process, MiB (`RLIMIT_AS`). Off by default: V8 and
    /// the JVM reserve far more address space than they use.
    pub memory_mb: u64,
    /// Largest file a process may write, MiB (`RLIMIT_FSIZE`).
    pub max_file_mb: u64,
    /// Processes of the sandbox's user (`RLIMIT_NPROC`); the kernel does
    /// not apply it to root.
    pub processes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            memory_mb: 0,
            max_file_mb: 4096,
            processes: 0,
        }
    }
}

impl Limits {
    /// The first value out of range, as an error for the operator.
    pub fn problem(&self) -> Option<String> {
        [
            ("memory_mb", self.memory_mb),
            ("max_file_mb", self.max_file_mb),
        ]
        .into_iter()
        .find(|(_, v)| *v > MAX_MB)
        .map(|(name, v)| format!("[sandbox.limits] {name} = {v} is above {MAX_MB}"))
        .or_else(|| {
            (self.processes > 1 << 22).then(|| {
                format!(
                    "[sandbox.limits] processes = {} is above {}",
                    self.processes,
                    1 << 22
                )
            })
        })
    }

    /// Sets the limits on the calling process.
    ///
    /// Async-signal-safe: only `setrlimit`, fit for a forked child.
    pub fn apply(&self) -> io::Result<()> {
        set(libc::RLIMIT_CORE, 0)?;
        if self.memory_mb > 0 {
            set(libc::RLIMIT_AS, self.memory_mb.min(MAX_MB) << 20)?;
        }
        if self.max_file_mb > 0 {
            set(libc::RLIMIT_FSIZE, self.max_file_mb.min(MAX_MB) << 20)?;
        }
        if self.processes > 0 {
            set(libc::RLIMIT_NPROC, self.processes)?;
        }
        Ok(())
    }
}

fn set(resource: libc::__rlimit_resource_t, value: u64) -> io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: setrlimit reads the struct; async-signal-safe.
    if unsafe { libc::setrlimit(resource, &limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `no_new_privs`: a setuid program gains nothing, and the process may
/// restrict itself with Landlock. Async-signal-safe.
pub fn no_new_privs() -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `no_new_privs` (setuid programs gain nothing) and, for root, no
/// capability left: bounding set, effective, permitted, inheritable.
///
/// Async-signal-safe: `prctl` and `capset` only.
pub fn drop_privileges() -> io::Result<()> {
    no_new_privs()?;
    if !super::is_root() {
        return Ok(());
    }
    for cap in 0..64 {
        // SAFETY: prctl with integer arguments; EINVAL past the last capability.
        unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) };
    }
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: capset reads a v3 header and two data structs.
    if unsafe { libc::syscall(libc::SYS_capset, &header, data.as_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
