//! The bubblewrap backend: the program runs as
//! `bwrap <namespaces> <view> -- program args…`.
//!
//! Order matters in bwrap's arguments, later mounts covering earlier ones:
//! system and toolchain directories, the operator's shared directories,
//! then closer's hidden files masked (a directory by an empty tmpfs, a file
//! by `/dev/null`), then the run's own places — which may lie inside a
//! hidden directory (the worktree inside the data directory) — and last the
//! masks remounted read-only.

use std::ffi::OsString;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};

use super::view::shows_nothing_hidden;
use super::{Backend, Jail, Network, landlock};

/// The user a sandboxed process is when closer runs as root.
pub const NOBODY: u32 = 65_534;

/// The sandbox's own `/tmp` (memory-backed): 1 GiB at most. Programs that
/// need more use `TMPDIR`, the run's home on disk.
const TMP_BYTES: &str = "1073741824";

/// bwrap when it is on `PATH` and can make its namespaces here (a
/// container may forbid user namespaces); started under Landlock's scoping
/// when the kernel has it and bwrap still works under it.
pub fn probe() -> Result<Backend, String> {
    let Some(program) = find_on_path("bwrap") else {
        return Err("bubblewrap (bwrap) is not installed".to_owned());
    };
    // Scoped first: where that works (the usual case) one start is enough.
    let scoped = landlock::abi().is_ok_and(|abi| abi >= landlock::SCOPE_ABI)
        && namespaces(&program, true).is_ok();
    if !scoped {
        namespaces(&program, false)?;
    }
    Ok(Backend::Bwrap { program, scoped })
}

/// Whether `program` makes its namespaces here, `scoped` or not.
fn namespaces(program: &Path, scoped: bool) -> Result<(), String> {
    let mut command = std::process::Command::new(program);
    command
        .args([
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--ro-bind",
            "/",
            "/",
        ])
        .args(["--proc", "/proc", "--dev", "/dev", "--", "true"])
        .env_clear();
    if scoped {
        let scope = landlock::Ruleset::scope_only().map_err(|e| e.to_string())?;
        // SAFETY: prctl and landlock_restrict_self are plain system calls.
        unsafe {
            command.pre_exec(move || {
                super::limits::no_new_privs()?;
                scope.restrict()
            });
        }
    }
    match crate::agent::fork_lock::output(&mut command) {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(format!(
            "bwrap cannot create namespaces here: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )),
        Err(e) => Err(format!("bwrap cannot be started: {e}")),
    }
}

/// `name` in an absolute directory of closer's `PATH`.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = crate::agent::process::BaseEnv::from_process().path;
    let found = crate::agent::process::resolve_program(name, Some(&path));
    found.is_absolute().then_some(found)
}

/// bwrap's arguments up to and including `--`; `program` is the
/// executable's installation, `cwd` where it starts.
pub fn args(jail: &Jail, program: &[PathBuf], cwd: &Path) -> Vec<OsString> {
    let mut a = Args::default();
    a.flags(&["--die-with-parent", "--new-session"]);
    a.flags(&["--unshare-user", "--unshare-pid"]);
    a.flags(&["--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]);
    // No `--disable-userns`: tools run sandboxes of their own (Codex its
    // bundled bwrap), which need a user namespace. Nested, they gain no
    // access: the masks are locked mounts a nested namespace cannot undo.
    a.flags(&["--hostname", "closer-sandbox"]);
    if jail.network == Network::None {
        a.flags(&["--unshare-net"]);
    }
    if jail.pid_one {
        a.flags(&["--as-pid-1"]);
    }
    if super::is_root() {
        let id = NOBODY.to_string();
        a.flags(&["--uid", &id, "--gid", &id]);
    }
    a.flags(&[
        "--proc", "/proc", "--dev", "/dev", "--size", TMP_BYTES, "--tmpfs", "/tmp",
    ]);
    for dir in jail.shared_read_only() {
        a.bind("--ro-bind", dir);
    }
    for dir in jail.shared_read_write() {
        a.bind("--bind", dir);
    }
    // Masked from the outermost in: a mask inside another hidden
    // directory would be buried by it, and could not be remounted.
    let hidden = jail.hidden();
    let outermost = outermost(&hidden);
    for hidden in &outermost {
        a.mask(hidden);
    }
    // The program's installation may sit in a hidden directory (a custom
    // handler closer copied from the base commit into its data directory):
    // it is shown after the masks, unless it would show something hidden.
    for dir in jail
        .view
        .read_only
        .iter()
        .chain(program.iter().filter(|d| shows_nothing_hidden(d, &hidden)))
    {
        a.bind("--ro-bind", dir);
    }
    for dir in &jail.view.read_write {
        a.bind("--bind", dir);
    }
    // The masks' empty tmpfs would take writes (into memory) that nobody
    // reads; the run's own places bound inside them stay writable.
    for hidden in &outermost {
        if hidden.is_dir() {
            a.path("--remount-ro", hidden);
        }
    }
    a.path("--chdir", cwd);
    a.flags(&["--"]);
    a.0
}

/// The hidden paths not inside another hidden directory.
fn outermost(hidden: &[PathBuf]) -> Vec<&Path> {
    hidden
        .iter()
        .filter(|h| !hidden.iter().any(|o| o != *h && h.starts_with(o)))
        .map(PathBuf::as_path)
        .collect()
}

#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn flags(&mut self, flags: &[&str]) {
        self.0.extend(flags.iter().map(OsString::from));
    }

    fn path(&mut self, flag: &str, path: &Path) {
        self.0.push(flag.into());
        self.0.push(path.into());
    }

    /// A bind of `dir` onto itself; a symbolic link (`/bin` → `usr/bin`)
    /// is recreated as one.
    fn bind(&mut self, flag: &str, dir: &Path) {
        match std::fs::read_link(dir) {
            Ok(target) if dir.symlink_metadata().is_ok_and(|m| m.is_symlink()) => {
                self.0.push("--symlink".into());
                self.0.push(target.into());
                self.0.push(dir.into());
            }
            _ => {
                self.path(flag, dir);
                self.0.push(dir.into());
            }
        }
    }

    /// Covers a hidden path: a directory with an empty tmpfs, a file with
    /// `/dev/null`. Missing paths need no mask.
    fn mask(&mut self, hidden: &Path) {
        match std::fs::metadata(hidden) {
            Ok(m) if m.is_dir() => self.path("--tmpfs", hidden),
            Ok(_) => {
                self.0.push("--ro-bind".into());
                self.0.push("/dev/null".into());
                self.0.push(hidden.into());
            }
            Err(_) => {}
        }
    }
}
