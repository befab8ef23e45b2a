//! The Landlock backend: the kernel's allow-list of file-system (and, from
//! ABI 4, TCP) access, built in closer before the fork and applied by the
//! child right before exec, where only async-signal-safe calls may run.
//!
//! The rules: system and toolchain directories read and execute; the
//! operator's `read_write` and the run's own places everything; a few device
//! files; `/proc` read (the domain's ptrace scoping keeps other processes'
//! `environ` and memory out of reach). A directory holding a hidden path is
//! not allowed as a whole: its entries are, one by one, except the hidden.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::view::{hidden_inside, is_hidden, shows_nothing_hidden};
use super::{Backend, Jail, Network};

/// The first ABI that filters TCP.
pub const NET_ABI: u32 = 4;
/// The first ABI that scopes abstract Unix sockets and signals.
pub const SCOPE_ABI: u32 = 6;

const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;

const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
const REFER: u64 = 1 << 13;
const TRUNCATE: u64 = 1 << 14;
const IOCTL_DEV: u64 = 1 << 15;
/// Rights that apply to a file (the rest only to directories).
const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;
const READ: u64 = EXECUTE | READ_FILE | READ_DIR;

const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;

const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

/// Device files a program may use. Not `/dev/pts`: its entries are every
/// terminal on the machine, an operator's `ssh` or `kubectl exec` session
/// of closer's user among them (decision 202). A program opens a terminal
/// of its own through `/dev/ptmx` and reaches the other end by `ioctl`
/// (`TIOCGPTPEER`, which the C library's `openpty` uses), with no path.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/shm",
];

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// Landlock when the kernel has it.
pub fn probe() -> Result<Backend, String> {
    abi().map(|abi| Backend::Landlock { abi })
}

/// The kernel's Landlock ABI, when it has Landlock.
pub fn abi() -> Result<u32, String> {
    // SAFETY: the version query takes no attribute.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    match u32::try_from(abi) {
        Ok(abi) if abi >= 1 => Ok(abi),
        _ => Err(format!(
            "Landlock is not enabled in this kernel ({})",
            io::Error::last_os_error()
        )),
    }
}

/// The file-system rights the kernel of `abi` knows.
fn handled_fs(abi: u32) -> u64 {
    let mut rights = (1 << 13) - 1;
    if abi >= 2 {
        rights |= REFER;
    }
    if abi >= 3 {
        rights |= TRUNCATE;
    }
    if abi >= 5 {
        rights |= IOCTL_DEV;
    }
    rights
}

/// A ruleset ready for [`restrict`].
#[derive(Debug)]
pub struct Ruleset {
    fd: OwnedFd,
}

impl Ruleset {
    /// Builds the ruleset of `jail` (in closer, before the fork); `program`
    /// is the executable's installation.
    pub fn build(jail: &Jail, abi: u32, program: &[PathBuf]) -> io::Result<Ruleset> {
        let all = handled_fs(abi);
        let network = abi >= NET_ABI && jail.network == Network::None;
        let attr = RulesetAttr {
            handled_access_fs: all,
            handled_access_net: if network {
                NET_BIND_TCP | NET_CONNECT_TCP
            } else {
                0
            },
            scoped: if abi >= SCOPE_ABI {
                SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL
            } else {
                0
            },
        };
        let size = match abi {
            0..=3 => std::mem::size_of::<u64>(),
            4 | 5 => 2 * std::mem::size_of::<u64>(),
            _ => std::mem::size_of::<RulesetAttr>(),
        };
        let ruleset = Ruleset::create(&attr, size)?;
        let hidden = jail.hidden();
        let hidden = hidden.as_slice();
        for dir in jail.shared_read_only() {
            ruleset.allow(dir, READ, hidden)?;
        }
        for dir in program.iter().filter(|d| shows_nothing_hidden(d, hidden)) {
            ruleset.add(dir, READ)?;
        }
        ruleset.allow(Path::new("/proc"), READ_FILE | READ_DIR, hidden)?;
        for dir in jail.shared_read_write() {
            ruleset.allow(dir, all, hidden)?;
        }
        for dir in &jail.view.read_only {
            ruleset.add(dir, READ)?;
        }
        for dir in &jail.view.read_write {
            ruleset.add(dir, all)?;
        }
        for device in DEVICES {
            ruleset.add(Path::new(device), all & !EXECUTE)?;
        }
        Ok(ruleset)
    }

    /// The scoping alone (ABI 6), for bwrap to start under: its processes
    /// reach no abstract Unix socket, and signal no process, made outside
    /// the sandbox (a container runtime's shim, an X server, D-Bus, another
    /// run's tools; decision 226). A domain that handles no file-system
    /// access leaves mounts alone, so bwrap still builds its view.
    pub fn scope_only() -> io::Result<Ruleset> {
        let attr = RulesetAttr {
            handled_access_fs: 0,
            handled_access_net: 0,
            scoped: SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL,
        };
        Ruleset::create(&attr, std::mem::size_of::<RulesetAttr>())
    }

    /// A new ruleset of the first `size` bytes of `attr`.
    fn create(attr: &RulesetAttr, size: usize) -> io::Result<Ruleset> {
        // SAFETY: the kernel reads `size` bytes of `attr`.
        let fd = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, attr, size, 0u32) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a new descriptor owned by nobody else.
        Ok(Ruleset {
            fd: unsafe { OwnedFd::from_raw_fd(fd as i32) },
        })
    }

    /// Allows `path` with `access`, except what is hidden inside it.
    fn allow(&self, path: &Path, access: u64, hidden: &[PathBuf]) -> io::Result<()> {
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if is_hidden(path, hidden) || is_hidden(&real, hidden) {
            return Ok(());
        }
        if hidden_inside(path, hidden).is_empty() && hidden_inside(&real, hidden).is_empty() {
            return self.add(path, access);
        }
        let Ok(entries) = std::fs::read_dir(path) else {
            return Ok(());
        };
        for entry in entries.flatten() {
            self.allow(&entry.path(), access, hidden)?;
        }
        Ok(())
    }

    /// One rule; a path that does not exist is skipped.
    fn add(&self, path: &Path, access: u64) -> io::Result<()> {
        let Ok(name) = CString::new(path.as_os_str().as_bytes()) else {
            return Ok(());
        };
        // SAFETY: a NUL-terminated path; O_PATH opens nothing for I/O.
        let fd = unsafe { libc::open(name.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
        if fd < 0 {
            return Ok(());
        }
        // SAFETY: fd was just opened.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let is_dir = std::fs::metadata(path).is_ok_and(|m| m.is_dir());
        let rule = PathBeneathAttr {
            allowed_access: if is_dir { access } else { access & FILE_RIGHTS },
            parent_fd: fd.as_raw_fd(),
        };
        // SAFETY: the kernel reads the packed attribute.
        let added = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                RULE_PATH_BENEATH,
                &rule,
                0u32,
            )
        };
        if added != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Applies the ruleset to the calling process (a forked child, after
    /// `no_new_privs`). Async-signal-safe: one system call.
    pub fn restrict(&self) -> io::Result<()> {
        // SAFETY: a ruleset descriptor and no flags.
        let done =
            unsafe { libc::syscall(libc::SYS_landlock_restrict_self, self.fd.as_raw_fd(), 0u32) };
        if done != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
