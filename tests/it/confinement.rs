//! Attacks on the sandbox, from inside it: each probe is a shell command a
//! hostile agent (or a repository's goal) would run, run once in a jail of
//! every backend this machine has (bwrap, Landlock) and once unconfined —
//! the control that shows the probe works when nothing stops it.
//!
//! The layout mimics an installation: `etc/closer/` holds the App key and
//! the config (hidden) beside a public file; `data/` (hidden) holds the
//! database, this run's worktree (read-write in the view), another run's
//! worktree and the mirror (read-only in the view).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use closer::agent::confine::{Backend, Confinement, Kind, Limits, Mode, SandboxConfig, View};
use closer::agent::process::{self, ProcessOutput, ProcessSpec};

use crate::support::OutputApart as _;

struct Install {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Install {
    fn new() -> Install {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical");
        for (path, text) in [
            (
                "etc/closer/app.pem",
                "-----BEGIN RSA PRIVATE KEY----- app key",
            ),
            ("etc/closer/config.toml", "webhook_secret = \"hunter2\""),
            ("etc/closer/public.txt", "nothing secret"),
            ("data/closer.db", "SQLite format 3"),
            (
                "data/worktrees/run-a/calc.py",
                "def add(a, b): return a - b",
            ),
            ("data/worktrees/run-b/private.py", "other customer's code"),
            ("data/mirrors/calc.git/HEAD", "ref: refs/heads/main"),
            ("data/homes/run-a/.keep", ""),
        ] {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        Install { _dir: dir, root }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The sandbox as `closer serve` would configure it here.
    fn confinement(&self, mode: Mode) -> Option<Confinement> {
        self.limited(mode, Limits::default())
    }

    /// The same, with `limits`.
    fn limited(&self, mode: Mode, limits: Limits) -> Option<Confinement> {
        let config = SandboxConfig {
            mode,
            limits,
            read_only: vec![self.path("etc")],
            hide: vec![
                self.path("etc/closer/app.pem"),
                self.path("etc/closer/config.toml"),
                self.path("data"),
            ],
            ..SandboxConfig::default()
        };
        match Confinement::detect(&config, &std::env::var("PATH").unwrap_or_default()) {
            Ok(c) => Some(c),
            Err(e) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CI must have every sandbox backend: {e}"
                );
                eprintln!("SKIPPED {mode:?}: {e}");
                None
            }
        }
    }

    fn view(&self) -> View {
        View {
            read_write: vec![
                self.path("data/worktrees/run-a"),
                self.path("data/homes/run-a"),
            ],
            read_only: vec![self.path("data/mirrors/calc.git")],
        }
    }

    /// Runs `script` as a process of `kind` in `confinement`.
    async fn probe(&self, confinement: &Confinement, kind: Kind, script: &str) -> ProcessOutput {
        let worktree = self.path("data/worktrees/run-a");
        let mut env = BTreeMap::from([
            ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
            (
                "HOME".to_owned(),
                self.path("data/homes/run-a").display().to_string(),
            ),
        ]);
        env.insert("LANG".into(), "C.UTF-8".into());
        let mut spec = ProcessSpec::shell(script, &worktree, env, Duration::from_secs(30));
        spec.jail = Some(confinement.jail(kind, self.view()));
        process::run(&spec).await.expect("the probe ran")
    }
}

/// The backends to attack, with the unconfined control first.
fn backends(install: &Install) -> (Confinement, Vec<Confinement>) {
    let control = install
        .confinement(Mode::None)
        .expect("mode none always works");
    let confined = [Mode::Bwrap, Mode::Landlock]
        .into_iter()
        .filter_map(|m| install.confinement(m))
        .collect();
    (control, confined)
}

/// Each probe succeeds (exit 0) unconfined and fails in every sandbox.
async fn blocked_everywhere(install: &Install, kind: Kind, what: &str, script: &str) {
    let (control, confined) = backends(install);
    let out = install.probe(&control, kind, script).await;
    assert!(
        out.success(),
        "control: unconfined, {what} works: {}",
        out.tail(10)
    );
    for confinement in confined {
        let out = install.probe(&confinement, kind, script).await;
        assert!(
            !out.success(),
            "{what} must fail under {}: {}",
            confinement.backend().name(),
            out.tail(10)
        );
    }
}

/// Each `script` succeeds in every sandbox: what a confined process must
/// still be able to do.
async fn allowed_in_every_sandbox(install: &Install, kind: Kind, what: &str, script: &str) {
    let (_, confined) = backends(install);
    for confinement in confined {
        let out = install.probe(&confinement, kind, script).await;
        assert!(
            out.success(),
            "{what} under {}: {}",
            confinement.backend().name(),
            out.tail(5)
        );
    }
}

#[tokio::test]
async fn the_agent_cannot_read_the_app_key_or_the_config() {
    let i = Install::new();
    let key = i.path("etc/closer/app.pem");
    let config = i.path("etc/closer/config.toml");
    blocked_everywhere(
        &i,
        Kind::Agent,
        "reading the App key",
        &format!("cat '{}'", key.display()),
    )
    .await;
    blocked_everywhere(
        &i,
        Kind::Agent,
        "reading the config",
        &format!("cat '{}'", config.display()),
    )
    .await;
    // The directory itself stays visible: only closer's files are hidden.
    let public = i.path("etc/closer/public.txt");
    let read_public = format!("cat '{}'", public.display());
    allowed_in_every_sandbox(&i, Kind::Agent, "reading a public file", &read_public).await;
}

#[tokio::test]
async fn the_agent_cannot_read_the_database_or_another_runs_worktree() {
    let i = Install::new();
    let db = i.path("data/closer.db");
    let other = i.path("data/worktrees/run-b/private.py");
    blocked_everywhere(
        &i,
        Kind::Agent,
        "reading the database",
        &format!("cat '{}'", db.display()),
    )
    .await;
    blocked_everywhere(
        &i,
        Kind::Agent,
        "reading another run",
        &format!("cat '{}'", other.display()),
    )
    .await;
}

#[tokio::test]
async fn the_agent_cannot_read_closers_environment_through_proc() {
    let i = Install::new();
    let script = format!("cat /proc/{}/environ | grep -q PATH", std::process::id());
    blocked_everywhere(
        &i,
        Kind::Agent,
        "reading closer's /proc/<pid>/environ",
        &script,
    )
    .await;
}

#[tokio::test]
async fn the_agent_cannot_write_outside_its_worktree_and_home() {
    let i = Install::new();
    let outside = i.path("etc/planted");
    blocked_everywhere(
        &i,
        Kind::Agent,
        "writing outside",
        &format!("echo x > '{}'", outside.display()),
    )
    .await;
    let mirror = i.path("data/mirrors/calc.git/HEAD");
    blocked_everywhere(
        &i,
        Kind::Agent,
        "moving a ref in the mirror",
        &format!("echo evil > '{}'", mirror.display()),
    )
    .await;
    // Its own places are writable under every backend.
    let own = "echo fixed > calc.py && echo x > \"$HOME/state\" && cat calc.py";
    allowed_in_every_sandbox(&i, Kind::Agent, "writing its own places", own).await;
}

#[tokio::test]
async fn goals_have_no_network_while_agents_and_the_setup_do() {
    let i = Install::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            drop(stream);
        }
    });
    let connect = format!(
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=5)'"
    );
    blocked_everywhere(&i, Kind::Goal, "a goal connecting out", &connect).await;
    allowed_in_every_sandbox(&i, Kind::Agent, "an agent reaching its model", &connect).await;
    allowed_in_every_sandbox(&i, Kind::Setup, "a setup reaching its registry", &connect).await;
}

#[tokio::test]
async fn the_sandbox_sees_none_of_closers_processes() {
    let i = Install::new();
    // Unconfined, closer (this test process) is in /proc; in the sandbox it
    // is not (bwrap: own PID namespace) or cannot be inspected (Landlock:
    // ptrace scoping keeps `environ`, `mem`, `fd` and `root` out of reach).
    let me = std::process::id();
    let script = format!("ls /proc/{me}/root/ >/dev/null && ls /proc/{me}/fd >/dev/null");
    blocked_everywhere(&i, Kind::Agent, "looking into closer's process", &script).await;
}

/// Nothing closer runs shares its session, so none can reach the terminal
/// closer was started from and type into the operator's shell (TIOCSTI).
#[tokio::test]
async fn a_sandboxed_process_has_a_session_of_its_own() {
    let i = Install::new();
    // SAFETY: getsid only reads.
    let ours = unsafe { libc::getsid(0) };
    // 0: the session's leader is outside the sandbox's PID namespace.
    let script = format!("python3 -c 'import os, sys; sys.exit(os.getsid(0) in (0, {ours}))'");
    // The control: started as a plain child, the probe sees closer's session.
    let plain = std::process::Command::new("sh")
        .args(["-c", &script])
        .status_apart()
        .unwrap();
    assert!(!plain.success(), "a plain child shares our session");
    let (control, confined) = backends(&i);
    for c in std::iter::once(control).chain(confined) {
        let out = i.probe(&c, Kind::Agent, &script).await;
        assert!(out.success(), "{}: {}", c.backend().name(), out.tail(5));
    }
}

/// Another terminal of closer's user (an operator's `ssh` or `kubectl exec
/// -it` session: a `/dev/pts` entry closer's user owns) cannot be opened
/// from the sandbox, so nothing there reads the operator's keystrokes or
/// writes to their screen. Before (decision 202), Landlock allowed all of
/// `/dev/pts`. Under bwrap a program still gets a terminal of its own (its
/// own `/dev/pts`); under Landlock it cannot, since the kernel checks even
/// the other end reached by `ioctl` against its path (the known limit
/// decision 202 names).
#[tokio::test]
async fn another_terminal_of_closers_user_cannot_be_opened() {
    let i = Install::new();
    let (mut operator, mut terminal) = (-1, -1);
    // SAFETY: openpty fills the two descriptors; the name, window size
    // and terminal settings are not asked for.
    let opened = unsafe {
        libc::openpty(
            &mut operator,
            &mut terminal,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    assert_eq!(opened, 0, "{}", std::io::Error::last_os_error());
    let path = std::fs::read_link(format!("/proc/self/fd/{terminal}")).unwrap();
    let script = format!(
        "python3 -c \"import os; os.close(os.open('{}', os.O_RDWR | os.O_NOCTTY))\"",
        path.display()
    );
    blocked_everywhere(&i, Kind::Agent, "opening another terminal", &script).await;
    let own = "python3 -c \"import os; m, s = os.openpty(); os.write(s, b'x'); os.read(m, 1)\"";
    let (_, confined) = backends(&i);
    for c in confined {
        let out = i.probe(&c, Kind::Agent, own).await;
        let name = c.backend().name();
        if name == "bwrap" {
            assert!(
                out.success(),
                "a terminal of its own under bwrap: {}",
                out.tail(5)
            );
        } else {
            eprintln!("a terminal of its own under {name}: {}", out.success());
        }
    }
    // SAFETY: both descriptors are ours, closed once.
    unsafe {
        libc::close(operator);
        libc::close(terminal);
    }
}

#[tokio::test]
async fn a_sandboxed_process_holds_no_privilege() {
    let i = Install::new();
    let (_, confined) = backends(&i);
    for c in confined {
        let out = i
            .probe(
                &c,
                Kind::Agent,
                "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status",
            )
            .await;
        assert!(out.success(), "{}", out.tail(5));
        assert!(
            out.stdout.text.contains("CapEff:\t0000000000000000"),
            "{}: {}",
            c.backend().name(),
            out.stdout.text
        );
        assert!(
            out.stdout.text.contains("NoNewPrivs:\t1"),
            "{}: {}",
            c.backend().name(),
            out.stdout.text
        );
    }
}

/// An agent has the network, and with it every abstract Unix socket of the
/// machine's network namespace: a container runtime's shim, an X server,
/// D-Bus, another run's tools. Landlock's scoping (ABI 6) keeps the ones
/// made outside the sandbox out of reach, under bwrap too (decision 226);
/// one the sandbox makes itself still works. The control (unconfined)
/// connects.
#[tokio::test]
async fn an_agent_cannot_reach_an_abstract_socket_made_outside_its_sandbox() {
    use std::os::linux::net::SocketAddrExt as _;
    match closer::agent::confine::landlock::abi() {
        Ok(abi) if abi >= closer::agent::confine::landlock::SCOPE_ABI => {}
        found => {
            eprintln!("SKIPPED: this kernel has no Landlock scoping (ABI 6): {found:?}");
            return;
        }
    }
    let i = Install::new();
    let name = format!("closer-test-outside-{}", std::process::id());
    let address = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = std::os::unix::net::UnixListener::bind_addr(&address).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            drop(stream);
        }
    });
    let connect = format!(
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); \
         s.settimeout(5); s.connect(\"\\0{name}\")'"
    );
    blocked_everywhere(&i, Kind::Agent, "connecting to a socket outside", &connect).await;
    let inside = format!("closer-test-inside-{}", std::process::id());
    let own = format!(
        "python3 -c 'import socket; a = socket.socket(socket.AF_UNIX); \
         a.bind(\"\\0{inside}\"); a.listen(); \
         b = socket.socket(socket.AF_UNIX); b.connect(\"\\0{inside}\")'"
    );
    allowed_in_every_sandbox(&i, Kind::Agent, "a socket of the sandbox's own", &own).await;
    for c in backends(&i).1 {
        assert!(c.backend().scopes_sockets(), "{:?}", c.backend());
    }
}

/// Run as root, a sandboxed process is root to every file it sees (its
/// uid maps to closer's): what only root may read in the directories it is
/// shown is hidden as closer's own files are (decision 221). The control
/// (unconfined) reads each file; a public neighbour stays readable.
#[tokio::test]
async fn run_as_root_the_agent_cannot_read_what_only_root_may() {
    if !closer_is_root() {
        return;
    }
    let i = Install::new();
    for (rel, mode) in [
        ("etc/ssh/ssh_host_ed25519_key", 0o600),
        ("etc/ssh/ssh_host_ed25519_key.pub", 0o644),
        ("etc/private/inner.txt", 0o644),
    ] {
        let path = i.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "-----BEGIN OPENSSH PRIVATE KEY-----").unwrap();
        chmod(&path, mode);
    }
    chmod(&i.path("etc/private"), 0o700);
    let cat = |rel: &str| format!("cat '{}'", i.path(rel).display());
    let key = cat("etc/ssh/ssh_host_ed25519_key");
    blocked_everywhere(&i, Kind::Agent, "reading a host key", &key).await;
    let inner = cat("etc/private/inner.txt");
    blocked_everywhere(&i, Kind::Agent, "reading in a root-only directory", &inner).await;
    if std::path::Path::new("/etc/shadow").exists() {
        blocked_everywhere(&i, Kind::Goal, "reading /etc/shadow", "cat /etc/shadow").await;
    }
    let public = cat("etc/ssh/ssh_host_ed25519_key.pub");
    allowed_in_every_sandbox(&i, Kind::Agent, "reading a public key", &public).await;
    allowed_in_every_sandbox(&i, Kind::Goal, "reading /etc/passwd", "cat /etc/passwd").await;
}

/// Run as root, closer's data directory inside a directory only root may
/// use, under a directory every sandbox is shown (`/opt/closer/data`, with
/// `/opt/closer` 0700): the private directory is hidden whole, and the
/// run's own places inside it still work under every backend. Before, bwrap
/// masked the data directory inside the hidden one, then could not remount
/// it, and every process failed to start.
#[tokio::test]
async fn run_as_root_a_data_directory_in_a_private_directory_still_runs() {
    if !closer_is_root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for rel in [
        "opt/closer/data/worktrees/run-a/calc.py",
        "opt/closer/key.pem",
        "opt/public.txt",
    ] {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, rel).unwrap();
    }
    std::fs::create_dir_all(root.join("opt/closer/data/homes/run-a")).unwrap();
    chmod(&root.join("opt/closer"), 0o700);
    let data = root.join("opt/closer/data");
    let (worktree, home) = (data.join("worktrees/run-a"), data.join("homes/run-a"));
    let config = |mode| SandboxConfig {
        mode,
        read_only: vec![root.join("opt")],
        hide: vec![data.clone()],
        ..SandboxConfig::default()
    };
    let path = std::env::var("PATH").unwrap_or_default();
    for mode in [Mode::Bwrap, Mode::Landlock] {
        let confinement = Confinement::detect(&config(mode), &path).expect("every backend in CI");
        let script = format!(
            "cat calc.py && echo ok > written.txt && cat '{}' && ! cat '{}'",
            root.join("opt/public.txt").display(),
            root.join("opt/closer/key.pem").display()
        );
        let env = BTreeMap::from([
            ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
            ("HOME".to_owned(), home.display().to_string()),
        ]);
        let mut spec = ProcessSpec::shell(&script, &worktree, env, Duration::from_secs(30));
        let view = View {
            read_write: vec![worktree.clone(), home.clone()],
            read_only: Vec::new(),
        };
        spec.jail = Some(confinement.jail(Kind::Agent, view));
        let out = process::run(&spec).await.expect("the probe ran");
        assert!(out.success(), "{mode:?}: {}", out.tail(10));
    }
}

/// True when the tests run as root, as CI does; else the caller skips,
/// saying so.
fn closer_is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        assert!(std::env::var_os("CI").is_none(), "CI runs as root");
        eprintln!("SKIPPED: closer is not root here, so its sandbox cannot be either");
    }
    root
}

/// A directory of programs with `git` and `sh` but no bwrap, for a `PATH`.
fn bin_without_bwrap(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["git", "sh"] {
        let found =
            closer::agent::process::resolve_program(tool, Some("/usr/local/bin:/usr/bin:/bin"));
        std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
    }
    bin
}

fn chmod(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[tokio::test]
async fn a_daemon_left_behind_dies_with_the_sandbox() {
    let i = Install::new();
    let (_, confined) = backends(&i);
    for c in confined {
        let marker = format!("600.{}{}", std::process::id(), c.backend().name().len());
        let out = i
            .probe(
                &c,
                Kind::Agent,
                &format!("setsid sleep {marker} >/dev/null 2>&1 < /dev/null & echo started"),
            )
            .await;
        assert!(out.success(), "{}", out.tail(5));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            crate::support::process::process_with_argument(&marker).is_none(),
            "a setsid daemon outlived the sandbox under {}",
            c.backend().name()
        );
    }
}

/// Orphans the program leaves (a shell's `cmd &` whose shell exits) are
/// re-parented to the reaper, which reaps them as they die, not only when
/// the program ends: zombies count against `RLIMIT_NPROC` and a
/// container's pids limit. Before, the reaper slept on its pidfd and the
/// lifeline only, and each dead orphan stayed a zombie for the iteration.
#[tokio::test]
async fn orphans_that_die_while_the_program_works_are_reaped() {
    let i = Install::new();
    let (control, confined) = backends(&i);
    // Thirty orphans that die at once; then the zombies among the
    // program's siblings (the reaper's children) are counted.
    let script = "for n in $(seq 30); do sh -c 'sleep 0.05 &'; done; sleep 1.5; \
                  echo zombies $(awk -v p=$PPID '$3 == \"Z\" && $4 == p' /proc/[0-9]*/stat 2>/dev/null | wc -l)";
    for c in std::iter::once(&control).chain(&confined) {
        let out = i.probe(c, Kind::Agent, script).await;
        assert!(out.success(), "{}", out.tail(5));
        assert_eq!(
            out.stdout.text.trim(),
            "zombies 0",
            "under {}",
            c.backend().name()
        );
    }
}

/// A program that kills its reaper (what keeps nothing it starts alive
/// past it) and leaves a daemon: where nothing stops the kill (no sandbox,
/// and Landlock below ABI 6), closer is told the tree was not cleaned up,
/// instead of taking the reaper's death for the program's exit; in every
/// sandbox here the kill fails or takes the sandbox down, and the daemon
/// dies. What stayed in the program's process group is killed when the
/// reaper is found gone. A program that kills itself is an ordinary exit
/// by a signal.
#[tokio::test]
async fn a_program_that_kills_its_reaper_is_reported_escaped() {
    let i = Install::new();
    let (control, confined) = backends(&i);
    // The daemon says when it is in a session of its own, and the program
    // kills its reaper only then: a loaded machine may otherwise run the
    // group kill before `setsid`, and the daemon dies as a group member.
    let escape = |marker: &str| {
        format!(
            "setsid sh -c 'touch .away.{marker}; exec sleep {marker}' >/dev/null 2>&1 < /dev/null & \
             sleep {marker}9 & n=0; while [ ! -e .away.{marker} ] && [ $n -lt 200 ]; \
             do sleep 0.05; n=$((n+1)); done; kill -9 $PPID; sleep 1"
        )
    };
    let run = |c: &Confinement, script: String| {
        let worktree = i.path("data/worktrees/run-a");
        let path = ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned());
        let mut spec = ProcessSpec::shell(
            &script,
            &worktree,
            BTreeMap::from([path]),
            Duration::from_secs(30),
        );
        spec.jail = Some(c.jail(Kind::Agent, i.view()));
        async move { process::run(&spec).await }
    };

    let marker = format!("601.{}", std::process::id());
    let escaped = run(&control, escape(&marker)).await;
    let daemon = appears_within(&marker, Duration::from_secs(5)).await;
    if let Some(pid) = daemon {
        // SAFETY: kill(2) on the daemon the probe left.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
    assert!(
        matches!(escaped, Err(process::ProcessError::Escaped { .. })),
        "unconfined: {escaped:?}"
    );
    assert!(daemon.is_some(), "the control's daemon did outlive it");
    // What stayed in the program's process group is killed with it.
    let member = crate::support::process::process_with_argument(&format!("{marker}9"));
    if let Some(pid) = member {
        assert!(
            crate::support::process::gone_within(pid, Duration::from_secs(5)).await,
            "a process of the group outlived the reaper"
        );
    }

    let itself = run(&control, "kill -9 $$".to_owned()).await;
    assert_eq!(itself.expect("an ordinary exit").exit_code, None);

    for c in confined {
        let marker = format!("602.{}{}", std::process::id(), c.backend().name().len());
        let out = run(&c, escape(&marker)).await;
        // A sandbox torn down kills its processes; a loaded machine may take
        // a moment to end them. The control's daemon lives ten minutes.
        let daemon = crate::support::process::process_with_argument(&marker);
        let mut outlived = None;
        if let Some(pid) = daemon
            && !crate::support::process::gone_within(pid, Duration::from_secs(5)).await
        {
            // SAFETY: kill(2) on the daemon the probe left.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            outlived = Some(pid);
        }
        // Landlock below ABI 6 does not scope signals: the escape works
        // there, and is reported as unconfined.
        if matches!(c.backend(), Backend::Landlock { abi } if *abi < 6) {
            let escaped = matches!(out, Err(process::ProcessError::Escaped { .. }));
            assert!(escaped, "landlock below ABI 6: {out:?}");
            continue;
        }
        assert!(out.is_ok(), "{}: {out:?}", c.backend().name());
        assert!(
            outlived.is_none(),
            "a daemon outlived the sandbox under {}",
            c.backend().name()
        );
    }
}

/// The pid of the process with `argument` once it shows within `limit`:
/// a daemon `exec`s its program a moment after it is started.
async fn appears_within(argument: &str, limit: Duration) -> Option<i32> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        let found = crate::support::process::process_with_argument(argument);
        if found.is_some() || tokio::time::Instant::now() >= deadline {
            return found;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn memory_and_file_size_limits_hold_under_every_backend() {
    let i = Install::new();
    let tight = Limits {
        memory_mb: 256,
        max_file_mb: 1,
        processes: 0,
    };
    let allocate = "python3 -c 'b = bytearray(600 * 1024 * 1024); print(len(b))'";
    let big_file = "head -c 3000000 /dev/zero > big.bin";
    for mode in [Mode::None, Mode::Bwrap, Mode::Landlock] {
        // The control: the default limits allow both.
        let (Some(loose), Some(limited)) = (i.confinement(mode), i.limited(mode, tight)) else {
            continue;
        };
        for (what, script) in [("600 MB", allocate), ("a 3 MB file", big_file)] {
            let out = i.probe(&loose, Kind::Goal, script).await;
            assert!(
                out.success(),
                "{mode:?}, default limits, {what}: {}",
                out.tail(5)
            );
            let out = i.probe(&limited, Kind::Goal, script).await;
            assert!(
                !out.success(),
                "{mode:?}, tight limits, {what} must fail: {}",
                out.tail(5)
            );
        }
    }
}

#[tokio::test]
async fn a_missing_program_is_reported_as_missing_not_as_a_sandbox_failure() {
    let i = Install::new();
    let (_, confined) = backends(&i);
    for c in confined {
        let mut spec = ProcessSpec::shell(
            "true",
            Path::new("/"),
            BTreeMap::new(),
            Duration::from_secs(5),
        );
        spec.argv = vec!["closer-no-such-program".into()];
        spec.cwd = i.path("data/worktrees/run-a");
        spec.env.insert("PATH".into(), "/usr/bin:/bin".into());
        spec.jail = Some(c.jail(Kind::Agent, i.view()));
        let err = process::run(&spec).await.expect_err("not found");
        assert!(err.to_string().contains("closer-no-such-program"), "{err}");
    }
}

mod runs {
    use crate::support::SpawnApart;
    use closer::agent::confine::{Backend, Confinement, SandboxConfig};
    use closer::model::RunState;

    use crate::support::db::TestDb;
    use crate::support::process::closer_command;
    use crate::support::story::{CONFIG, Story};

    /// What `auto` leaves when a machine has neither bwrap nor Landlock.
    fn no_sandbox() -> Confinement {
        let reason = "no confinement is available here (bubblewrap (bwrap) is not installed; \
                      Landlock is not enabled in this kernel)";
        Confinement::new(
            Backend::Unavailable {
                reason: reason.into(),
            },
            &SandboxConfig::default(),
            "",
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn without_a_sandbox_a_run_fails_at_once_saying_why_and_nothing_runs() {
        let mut s = Story::start("nosandbox", Some(CONFIG)).await;
        s.kill_workers();
        s.confinement = Some(no_sandbox());
        s.spawn_workers();
        s.agent_step(1, "echo ran > ran.txt\necho '{\"summary\": \"done\"}'\n");
        let n = s
            .open_issue("add subtracts", "", &["closer", "type:bug"])
            .await;
        s.idle().await;
        let run = s.run(n).await.expect("a run");
        assert_eq!(run.state, RunState::Failed, "{run:#?}");
        assert!(!s.path("prompt-1.txt").exists(), "the agent never ran");
        // The diagnosis says why.
        let comments = s.github.comments(&s.repo, n);
        assert!(
            comments
                .iter()
                .any(|c| c.body.contains("no confinement is available here")),
            "{comments:#?}"
        );
        s.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn mode_none_runs_and_every_status_comment_says_it_is_unconfined() {
        let mut s = Story::start("unconfined", Some(CONFIG)).await;
        s.kill_workers();
        s.confinement = Some(Confinement::unconfined());
        s.spawn_workers();
        s.agent_step(1, &crate::stories::fix_add());
        s.llm
            .push([crate::support::fake_llm::Reply::closer(true, 0.95, &[])]);
        let n = s
            .open_issue("add subtracts", "", &["closer", "type:bug"])
            .await;
        s.idle().await;
        let run = s.run(n).await.expect("a run");
        assert_eq!(run.state, RunState::Done, "{run:#?}");
        let status = s.status_comment(n);
        assert!(status.body.contains("**unconfined**"), "{}", status.body);
        s.stop().await;
    }

    #[tokio::test]
    async fn a_backend_asked_for_by_name_that_is_missing_stops_closer_at_start() {
        let db = TestDb::new("nobwrap").await;
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("closer.toml");
        std::fs::write(&config, "[sandbox]\nmode = \"bwrap\"\n").unwrap();
        // A PATH without bwrap on it.
        let bin = super::bin_without_bwrap(dir.path());
        let output = closer_command(&db.url, &[("PATH", bin.to_str().unwrap())])
            .arg("--config")
            .arg(&config)
            .args(["serve", "--dry-run", "--bind", "127.0.0.1:0"])
            .output_apart()
            .await
            .expect("closer runs");
        let text = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{text}");
        assert!(
            text.contains("mode = \"bwrap\" is not available here")
                && text.contains("not installed"),
            "{text}"
        );
    }

    /// Run as root, `auto` does not fall back to Landlock when bubblewrap
    /// cannot be used: a sandboxed process would still be root outside it
    /// (decision 223). Asked for by name, Landlock is the operator's
    /// choice, and `closer doctor` fails on it saying why.
    #[tokio::test]
    async fn run_as_root_without_bubblewrap_auto_refuses_landlock_and_doctor_says_why() {
        if !super::closer_is_root() {
            return;
        }
        let db = TestDb::new("rootlandlock").await;
        let dir = tempfile::tempdir().unwrap();
        let bin = super::bin_without_bwrap(dir.path());
        for (mode, expected) in [
            ("auto", "FAIL sandbox: no confinement is available here"),
            (
                "landlock",
                "FAIL sandbox: [sandbox] mode = \"landlock\": closer runs as root",
            ),
        ] {
            let config = dir.path().join(format!("{mode}.toml"));
            std::fs::write(&config, format!("[sandbox]\nmode = \"{mode}\"\n")).unwrap();
            let output = closer_command(&db.url, &[("PATH", bin.to_str().unwrap())])
                .current_dir(dir.path())
                .arg("--config")
                .arg(&config)
                .arg("doctor")
                .output_apart()
                .await
                .expect("closer runs");
            let text = String::from_utf8_lossy(&output.stdout);
            let line = text.lines().find(|l| l.contains("sandbox:")).unwrap_or("");
            assert!(line.starts_with(expected), "{mode}: {text}");
            assert!(
                line.contains("Run closer as an unprivileged user"),
                "{mode}: {line}"
            );
        }
    }
}

/// A hostile agent inside a real run: it tries every probe, writes down
/// what each gave, then fixes the bug. In the sandbox every probe fails and
/// the run completes as usual; unconfined (the control) the same script
/// reads and writes what it should not.
mod hostile_run {
    use closer::agent::confine::{Confinement, Mode, SandboxConfig};
    use closer::model::RunState;

    use crate::support::fake_llm::Reply;
    use crate::support::story::{CONFIG, Story};

    /// One line per probe: `name: LEAKED` when the command succeeded.
    fn probes(s: &Story) -> String {
        let data = s.data_dir();
        let db = s
            .store
            .sqlite_file()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "/nonexistent".into());
        let probes = [
            (
                "app key",
                format!("cat '{}'", s.path("etc/app.pem").display()),
            ),
            (
                "server config",
                format!("cat '{}'", s.path("etc/closer.toml").display()),
            ),
            ("database", format!("head -c 16 '{db}'")),
            (
                "closer environ",
                format!("cat /proc/{}/environ | grep -q PATH", std::process::id()),
            ),
            (
                "another run",
                format!(
                    "cat '{}'",
                    data.join("worktrees/other-run/secret.txt").display()
                ),
            ),
            (
                "move the base ref",
                "git update-ref refs/closer/base/evil HEAD".to_owned(),
            ),
        ];
        probes
            .iter()
            .map(|(name, cmd)| {
                format!(
                    "if ( {cmd} ) >/dev/null 2>&1; then echo '{name}: LEAKED'; else echo '{name}: blocked'; fi >> '{}'\n",
                    s.path("out/probes.txt").display()
                )
            })
            .chain([format!("touch '{}' 2>/dev/null\n", data.join("planted").display())])
            .collect()
    }

    async fn hostile_story(
        name: &str,
        confinement: impl Fn(&Story) -> Confinement,
    ) -> (Story, String) {
        let mut s = Story::start(name, Some(CONFIG)).await;
        for (file, text) in [("etc/app.pem", "KEY"), ("etc/closer.toml", "secret = 1")] {
            std::fs::create_dir_all(s.path(file).parent().unwrap()).unwrap();
            std::fs::write(s.path(file), text).unwrap();
        }
        // The probes' findings: a directory of their own, since under
        // Landlock nothing new can be made directly in a visible directory
        // that holds a hidden one (docs/security.md, "Known limits").
        std::fs::create_dir(s.path("out")).unwrap();
        let other = s.dir.path().join("data/worktrees/other-run");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("secret.txt"), "other customer's code").unwrap();
        s.kill_workers();
        s.confinement = Some(confinement(&s));
        s.spawn_workers();
        s.agent_step(1, &format!("{}{}", probes(&s), crate::stories::fix_add()));
        s.llm.push([Reply::closer(true, 0.95, &[])]);
        let n = s
            .open_issue("add subtracts", "", &["closer", "type:bug"])
            .await;
        s.idle().await;
        let run = s.run(n).await.expect("a run");
        assert_eq!(run.state, RunState::Done, "{run:#?}\n{}", s.journal().await);
        let found = std::fs::read_to_string(s.path("out/probes.txt")).expect("the probes ran");
        (s, found)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn every_probe_of_a_hostile_agent_fails_and_the_run_completes() {
        let (s, found) = hostile_story("hostile", |s| {
            // As `closer serve` configures it: its own files hidden.
            let config = SandboxConfig {
                mode: Mode::Auto,
                read_write: vec![s.shared_dir()],
                hide: vec![
                    s.data_dir(),
                    s.path("etc/app.pem"),
                    s.path("etc/closer.toml"),
                ],
                ..SandboxConfig::default()
            };
            Confinement::detect(&config, &std::env::var("PATH").unwrap_or_default())
                .expect("a sandbox")
        })
        .await;
        assert_eq!(found.lines().count(), 6, "{found}");
        assert!(!found.contains("LEAKED"), "{found}");
        assert!(!s.dir.path().join("data/planted").exists(), "wrote outside");
        s.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn control_unconfined_the_same_agent_reaches_everything() {
        let (s, found) = hostile_story("hostile-control", |_| Confinement::unconfined()).await;
        let leaked = found.lines().filter(|l| l.ends_with("LEAKED")).count();
        // Without SQLite (the PostgreSQL suite) the database probe has no file.
        let expected = if s.store.sqlite_file().is_some() {
            6
        } else {
            5
        };
        assert_eq!(leaked, expected, "{found}");
        assert!(s.dir.path().join("data/planted").exists(), "wrote outside");
        s.stop().await;
    }
}
