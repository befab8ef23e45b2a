//! Running one untrusted subprocess (an agent, a goal command) under control:
//! its own process group, a wall-clock deadline after which the whole group is
//! killed, stdout/stderr captured up to a cap, and an environment built from
//! nothing.
//!
//! This module must never inherit closer's environment (that is where the App
//! key path, the webhook secret and tokens live) and never let a child outlive
//! its deadline or fill memory with output.

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::capture::capture;
use super::confine::{Backend, Jail, landlock::Ruleset, limits, view};
use super::fork_lock;
use super::reaper::{self, Lifeline, Report};

pub use super::search_path::{BaseEnv, absolute_dirs, resolve_program};

/// How long the pipes are drained after the process ended: the reaper has
/// killed every descendant by then, so only a process closer did not start
/// could still hold them.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// How long the reaper is given to kill the tree before the group is killed.
pub const STOP_GRACE: Duration = Duration::from_secs(3);

/// The most a [`ProcessOutput::tail`] returns: a log excerpt, not the log.
pub const TAIL_MAX_BYTES: usize = 16 * 1024;

/// What to run.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// The argv; `argv[0]` is looked up on the spec's `PATH`.
    pub argv: Vec<String>,
    pub cwd: PathBuf,
    /// The complete environment of the child (nothing else is inherited).
    pub env: BTreeMap<String, String>,
    /// Written to the child's stdin, which is then closed.
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    /// Cap on captured stdout and on captured stderr, each.
    pub max_output_bytes: usize,
    /// Past the cap, keep stdout's end too (half the cap for its start,
    /// half for its end): an agent's final report comes last.
    pub keep_end: bool,
    /// The confinement it runs in; `None` only for closer's own programs
    /// (git on closer's mirror).
    pub jail: Option<Jail>,
    /// A descriptor the child gets as fd 3 (git's credential pipe).
    pub fd3: Option<Arc<OwnedFd>>,
}

impl ProcessSpec {
    /// `sh -c <script>` in `cwd`.
    pub fn shell(
        script: &str,
        cwd: &Path,
        env: BTreeMap<String, String>,
        timeout: Duration,
    ) -> Self {
        ProcessSpec {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            cwd: cwd.to_path_buf(),
            env,
            stdin: None,
            timeout,
            max_output_bytes: 1024 * 1024,
            keep_end: false,
            jail: None,
            fd3: None,
        }
    }
}

/// One captured stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Captured {
    /// The first `max_output_bytes` bytes (with `keep_end`, the first and
    /// the last half of them, the end from a whole line on), lossily
    /// decoded.
    pub text: String,
    /// Bytes read and dropped past the cap (0 when nothing was dropped).
    pub dropped_bytes: u64,
}

impl Captured {
    pub fn truncated(&self) -> bool {
        self.dropped_bytes > 0
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessOutput {
    /// The exit code; `None` when the process was ended by a signal.
    pub exit_code: Option<i32>,
    /// The deadline passed and the group was killed.
    pub timed_out: bool,
    /// Stopped early through [`Watch::stop`].
    #[serde(default)]
    pub stopped: bool,
    pub duration_ms: u64,
    pub stdout: Captured,
    pub stderr: Captured,
}

impl ProcessOutput {
    /// Exited by itself with status 0.
    pub fn success(&self) -> bool {
        !self.timed_out && self.exit_code == Some(0)
    }

    /// The last `max_lines` lines of stdout then stderr (at most
    /// [`TAIL_MAX_BYTES`]), for evidence and logs.
    pub fn tail(&self, max_lines: usize) -> String {
        let mut lines: Vec<&str> = self
            .stdout
            .text
            .lines()
            .chain(self.stderr.text.lines())
            .collect();
        if lines.len() > max_lines {
            lines.drain(..lines.len() - max_lines);
        }
        let joined = lines.join("\n");
        if joined.len() <= TAIL_MAX_BYTES {
            return joined;
        }
        let mut start = joined.len() - TAIL_MAX_BYTES;
        while !joined.is_char_boundary(start) {
            start += 1;
        }
        format!("…{}", &joined[start..])
    }

    /// stdout and stderr together, for parsers that look at both.
    pub fn combined(&self) -> String {
        format!("{}\n{}", self.stdout.text, self.stderr.text)
    }
}

/// Failures to start or supervise the process (its own failure is an
/// [`ProcessOutput`] with a non-zero exit code).
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    #[error("empty command")]
    EmptyCommand,
    #[error("could not start `{program}`: {source}")]
    Spawn {
        program: String,
        source: std::io::Error,
    },
    #[error("waiting for `{program}` failed: {source}")]
    Wait {
        program: String,
        source: std::io::Error,
    },
    /// The reaper exited without reporting the tree gone: something (the
    /// program, where no sandbox stops it) killed it first.
    #[error(
        "`{program}` killed the process closer watches it with (its reaper), so what it \
         started may still be running"
    )]
    Escaped { program: String },
}

/// A started child in its own process group, under a [`reaper`]. Dropping
/// the guard closes the lifeline, so the reaper kills the whole tree — even
/// descendants that left the group with `setsid` — and, should the reaper
/// itself be gone, the group is killed a moment later.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: Option<i32>,
    lifeline: Option<Lifeline>,
    report: Option<Report>,
    /// What the report said, once read (reading takes the byte).
    reported: Option<bool>,
    /// closer killed the reaper itself: its cleanup outlasted the grace.
    reaper_killed: bool,
}

impl GroupGuard {
    /// Guards the group led by `pid` (a child started with [`command`]).
    pub fn new(pid: Option<u32>, mut lifeline: Lifeline) -> Self {
        GroupGuard {
            pgid: pid.and_then(|p| i32::try_from(p).ok()),
            report: lifeline.take_report(),
            lifeline: Some(lifeline),
            reported: None,
            reaper_killed: false,
        }
    }

    /// Whether the reaper, after it exited, left the whole tree gone or was
    /// stopped by closer (ask after [`GroupGuard::finished`] or
    /// [`GroupGuard::stop`]). `false`: something else killed it before its
    /// report (the program, where no sandbox stops it), and what the
    /// program started may still run.
    pub fn cleaned_up(&mut self) -> bool {
        if self.reaper_killed {
            return true;
        }
        let report = &self.report;
        *self
            .reported
            .get_or_insert_with(|| report.as_ref().is_some_and(Report::cleaned_up))
    }

    /// Stops everything: closes the lifeline, gives the reaper
    /// [`STOP_GRACE`] to kill the tree and exit, then kills the group (the
    /// reaper with it, when it is still at work).
    pub async fn stop(&mut self, child: &mut tokio::process::Child) {
        self.lifeline = None;
        if tokio::time::timeout(STOP_GRACE, child.wait())
            .await
            .is_err()
        {
            self.reaper_killed = true;
        }
        self.kill_group();
        self.pgid = None;
    }

    /// The reaper exited by itself: nothing is left to stop, unless it was
    /// killed before its report, when what is left of its group is killed.
    pub fn finished(&mut self) {
        self.lifeline = None;
        if !self.cleaned_up() {
            self.kill_group();
        }
        self.pgid = None;
    }

    /// Sends SIGKILL to every process of the group (no-op once it is gone).
    fn kill_group(&self) {
        if let Some(pgid) = self.pgid {
            // SAFETY: killpg only sends a signal; a stale or empty group yields ESRCH.
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.lifeline = None;
        if let Some(pgid) = self.pgid.take() {
            // The reaper kills the tree on the closed lifeline; the group kill
            // is the fallback for a reaper that is itself gone.
            std::thread::spawn(move || {
                std::thread::sleep(STOP_GRACE);
                // SAFETY: as in kill_group.
                unsafe {
                    libc::killpg(pgid, libc::SIGKILL);
                }
            });
        }
    }
}

/// Builds the tokio command: own process group, under a reaper, empty
/// environment plus `env`, inside `jail` when given. Keep the lifeline in a
/// [`GroupGuard`].
pub fn command(
    argv: &[String],
    cwd: &Path,
    env: &BTreeMap<String, String>,
    jail: Option<&Jail>,
) -> Result<(Command, Lifeline), ProcessError> {
    let (program, args) = argv.split_first().ok_or(ProcessError::EmptyCommand)?;
    let spawn_error = |source| ProcessError::Spawn {
        program: program.clone(),
        source,
    };
    let resolved = resolve_program(program, env.get("PATH").map(String::as_str));
    // Limits hold even unconfined; the view only in a sandbox.
    let limited = jail;
    let jail = jail.filter(|j| *j.backend() != Backend::Unconfined);
    let installation = jail
        .map(|_| view::program_dirs(&resolved))
        .unwrap_or_default();
    if let Some(Backend::Unavailable { reason }) = jail.map(Jail::backend) {
        return Err(spawn_error(std::io::Error::other(reason.clone())));
    }
    let mut cmd = match jail.map(|j| (j, j.backend())) {
        Some((jail, Backend::Bwrap { program: bwrap, .. })) => {
            if !resolved.is_file() {
                return Err(spawn_error(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "not found on PATH",
                )));
            }
            let mut cmd = Command::new(bwrap);
            cmd.args(super::confine::bwrap::args(jail, &installation, cwd))
                .arg(&resolved);
            cmd
        }
        _ => Command::new(&resolved),
    };
    cmd.args(args).current_dir(cwd).env_clear().envs(env);
    // A session of its own, which has no controlling terminal: nothing run
    // can open the terminal closer was started from (`/dev/tty`) and type
    // into the operator's shell with TIOCSTI (CVE-2017-5226). It also makes
    // the child the leader of the process group `GroupGuard` kills.
    // SAFETY: setsid is async-signal-safe and allocates nothing.
    unsafe {
        cmd.pre_exec(|| match libc::setsid() {
            -1 => Err(std::io::Error::last_os_error()),
            _ => Ok(()),
        });
    }
    let lifeline = reaper::install(&mut cmd).map_err(spawn_error)?;
    if let Some(jail) = limited {
        confine(&mut cmd, jail, &installation).map_err(spawn_error)?;
    }
    Ok((cmd, lifeline))
}

/// What runs in the child right before exec (after the reaper's fork):
/// resource limits (under every backend, `none` included); under Landlock
/// also no privileges and the ruleset; under bwrap, when the kernel can,
/// Landlock's scoping, which bwrap and everything it starts inherit.
fn confine(cmd: &mut Command, jail: &Jail, installation: &[PathBuf]) -> std::io::Result<()> {
    let limits = jail.limits();
    // bwrap keeps its privileges: as root it needs them to set up the
    // namespaces, and it drops them itself.
    let (ruleset, keep_privileges) = match jail.backend() {
        Backend::Landlock { abi } => (Some(Ruleset::build(jail, *abi, installation)?), false),
        Backend::Bwrap { scoped: true, .. } => (Some(Ruleset::scope_only()?), true),
        _ => (None, false),
    };
    // SAFETY: setrlimit, prctl, capset and landlock_restrict_self are plain
    // system calls, async-signal-safe; nothing allocates.
    unsafe {
        cmd.pre_exec(move || {
            limits.apply()?;
            if let Some(ruleset) = &ruleset {
                match keep_privileges {
                    true => limits::no_new_privs()?,
                    false => limits::drop_privileges()?,
                }
                ruleset.restrict()?;
            }
            Ok(())
        });
    }
    Ok(())
}

/// Watching a process while it runs: its stdout lines as they come, and a
/// signal to stop it early (a fatal condition seen in its output).
#[derive(Debug, Default)]
pub struct Watch {
    /// Receives each complete stdout line within the output cap.
    pub lines: Option<tokio::sync::mpsc::UnboundedSender<String>>,
    /// Stops the process (and its tree) when it turns `true`.
    pub stop: Option<tokio::sync::watch::Receiver<bool>>,
}

/// Runs `spec` to completion or to its deadline, whichever comes first.
/// Whatever is left of the group afterwards is killed as well.
pub async fn run(spec: &ProcessSpec) -> Result<ProcessOutput, ProcessError> {
    run_watched(spec, Watch::default()).await
}

/// Like [`run`], forwarding stdout lines to `watch.lines` and stopping early
/// when `watch.stop` says so (reported as `stopped`, not as a timeout).
pub async fn run_watched(spec: &ProcessSpec, watch: Watch) -> Result<ProcessOutput, ProcessError> {
    let program = spec.argv.first().cloned().unwrap_or_default();
    let (mut cmd, lifeline) = command(&spec.argv, &spec.cwd, &spec.env, spec.jail.as_ref())?;
    if let Some(fd) = spec.fd3.clone() {
        give_fd3(&mut cmd, fd);
    }
    cmd.stdin(if spec.stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = fork_lock::spawning(|| cmd.spawn()).map_err(|source| ProcessError::Spawn {
        program: program.clone(),
        source,
    })?;
    let mut group = GroupGuard::new(child.id(), lifeline);

    if let (Some(input), Some(mut stdin)) = (spec.stdin.clone(), child.stdin.take()) {
        // A child that never reads its stdin must not block us: write in the background.
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        });
    }
    let cap = spec.max_output_bytes;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let lines = watch.lines;
    let stdout = child
        .stdout
        .take()
        .map(|s| tokio::spawn(capture(s, cap, spec.keep_end, stopped.clone(), lines)));
    let stderr = child
        .stderr
        .take()
        .map(|s| tokio::spawn(capture(s, cap, false, stopped.clone(), None)));

    let ended = wait_or_stop(&mut child, &mut group, spec.timeout, watch.stop).await;
    let (status, timed_out, cut_short) = match ended {
        Ended::Exited(status) => {
            let status = status.map_err(|source| ProcessError::Wait {
                program: program.clone(),
                source,
            })?;
            (Some(status), false, false)
        }
        Ended::TimedOut => (None, true, false),
        Ended::Stopped => (None, false, true),
    };
    let cleaned_up = group.cleaned_up();
    // The reaper killed every descendant before it exited; the readers get
    // a grace period in case something else holds the pipes.
    let stopper = tokio::spawn(async move {
        tokio::time::sleep(DRAIN_GRACE).await;
        let _ = stop.send(true);
    });
    let stdout = collect(stdout).await;
    let stderr = collect(stderr).await;
    stopper.abort();
    if !cleaned_up {
        return Err(ProcessError::Escaped { program });
    }
    Ok(ProcessOutput {
        exit_code: status.and_then(|s| s.code()),
        timed_out,
        stopped: cut_short,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        stdout,
        stderr,
    })
}

/// How a process under a reaper ended.
enum Ended {
    Exited(std::io::Result<std::process::ExitStatus>),
    TimedOut,
    Stopped,
}

/// Waits for the reaper to exit, until `timeout` or `stop`, then stops the
/// tree (the reaper has exited in every case but the last resort of the
/// group kill).
async fn wait_or_stop(
    child: &mut tokio::process::Child,
    group: &mut GroupGuard,
    timeout: Duration,
    stop: Option<tokio::sync::watch::Receiver<bool>>,
) -> Ended {
    let ended = tokio::select! {
        ended = tokio::time::timeout(timeout, child.wait()) => Some(ended),
        () = stop_requested(stop) => None,
    };
    match ended {
        Some(Ok(status)) => {
            group.finished();
            Ended::Exited(status)
        }
        Some(Err(_)) => {
            group.stop(child).await;
            Ended::TimedOut
        }
        None => {
            group.stop(child).await;
            Ended::Stopped
        }
    }
}

/// The child gets `fd` as its descriptor 3.
fn give_fd3(cmd: &mut Command, fd: Arc<OwnedFd>) {
    // SAFETY: dup2 and fcntl are async-signal-safe; the duplicate (unlike
    // the original, made O_CLOEXEC) survives the exec. When the original
    // already is descriptor 3, dup2 does nothing, close-on-exec included,
    // and the program would find 3 closed (or, worse, whatever it opens
    // next there): clear the flag instead.
    unsafe {
        cmd.pre_exec(move || {
            let placed = match fd.as_raw_fd() {
                3 => libc::fcntl(3, libc::F_SETFD, 0),
                raw => libc::dup2(raw, 3),
            };
            if placed < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Resolves once `stop` turns true; never without one.
async fn stop_requested(stop: Option<tokio::sync::watch::Receiver<bool>>) {
    match stop {
        Some(mut stop) => {
            if stop.wait_for(|s| *s).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

async fn collect(task: Option<tokio::task::JoinHandle<Captured>>) -> Captured {
    match task {
        Some(task) => task.await.unwrap_or_default(),
        None => Captured::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(stdout: &str, stderr: &str) -> ProcessOutput {
        ProcessOutput {
            exit_code: Some(0),
            timed_out: false,
            stopped: false,
            duration_ms: 1,
            stdout: Captured {
                text: stdout.into(),
                dropped_bytes: 0,
            },
            stderr: Captured {
                text: stderr.into(),
                dropped_bytes: 0,
            },
        }
    }

    #[test]
    fn tail_keeps_the_last_lines_and_bytes() {
        assert_eq!(output("a\nb\nc", "d").tail(2), "c\nd");
        let long = "é".repeat(TAIL_MAX_BYTES);
        let tail = output(&long, "").tail(10);
        assert!(tail.len() <= TAIL_MAX_BYTES + "…".len() + 1);
        assert!(tail.starts_with('…'));
    }

    fn sh(script: &str, timeout: Duration) -> ProcessSpec {
        let env = BaseEnv::from_process().vars();
        ProcessSpec::shell(script, Path::new("/"), env, timeout)
    }

    /// A script that leaves a daemon in its own session (as an agent's
    /// shell tool does with `setsid`), writing the daemon's pid to `pidfile`
    /// and then running `rest`.
    fn daemon_script(pidfile: &Path, rest: &str) -> String {
        format!(
            "echo hello; setsid sh -c 'echo $$ > {p}.tmp; mv {p}.tmp {p}; exec sleep 60' & \
             while [ ! -f {p} ]; do sleep 0.01; done; {rest}",
            p = pidfile.display()
        )
    }

    fn pid_in(pidfile: &Path) -> i32 {
        std::fs::read_to_string(pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// Alive and not a zombie.
    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            !stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
    }

    #[tokio::test]
    async fn a_daemon_that_left_the_group_dies_with_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("daemon.pid");
        let started = Instant::now();
        let out = run(&sh(
            &daemon_script(&pidfile, "exit 0"),
            Duration::from_secs(20),
        ))
        .await
        .unwrap();
        assert!(out.success());
        assert_eq!(out.stdout.text, "hello\n", "what was read is kept");
        assert!(started.elapsed() < DRAIN_GRACE, "{:?}", started.elapsed());
        assert!(
            !alive(pid_in(&pidfile)),
            "the setsid daemon outlived the program"
        );
    }

    #[tokio::test]
    async fn a_daemon_that_left_the_group_dies_at_the_deadline() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("daemon.pid");
        let out = run(&sh(
            &daemon_script(&pidfile, "sleep 60"),
            Duration::from_secs(2),
        ))
        .await
        .unwrap();
        assert!(out.timed_out);
        assert!(
            !alive(pid_in(&pidfile)),
            "the setsid daemon outlived the deadline"
        );
    }

    #[tokio::test]
    async fn a_daemon_that_left_the_group_dies_when_the_run_is_stopped() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("daemon.pid");
        let spec = sh(
            &daemon_script(&pidfile, "sleep 60"),
            Duration::from_secs(60),
        );
        let task = tokio::spawn(async move { run(&spec).await });
        while !pidfile.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let daemon = pid_in(&pidfile);
        task.abort();
        let deadline = Instant::now() + STOP_GRACE;
        while alive(daemon) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(!alive(daemon), "the setsid daemon outlived the stopped run");
    }

    /// The control: killing the process group, as closer did before the
    /// reaper, leaves the daemon running.
    #[test]
    fn control_a_group_kill_alone_leaves_the_daemon_running() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("daemon.pid");
        let mut child = std::process::Command::new("sh")
            .args(["-c", &daemon_script(&pidfile, "sleep 60")])
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap();
        while !pidfile.exists() {
            std::thread::sleep(Duration::from_millis(20));
        }
        let pgid = i32::try_from(child.id()).unwrap();
        // SAFETY: signalling the group this test created.
        unsafe { libc::killpg(pgid, libc::SIGKILL) };
        let _ = child.wait();
        let daemon = pid_in(&pidfile);
        std::thread::sleep(Duration::from_millis(300));
        let survived = alive(daemon);
        // SAFETY: cleaning up the daemon this test started.
        unsafe { libc::kill(daemon, libc::SIGKILL) };
        assert!(survived, "without the reaper the daemon should survive");
    }

    #[tokio::test]
    async fn a_program_killed_by_a_signal_is_reported_as_such() {
        let out = run(&sh("kill -9 $$", Duration::from_secs(20)))
            .await
            .unwrap();
        assert_eq!(out.exit_code, None);
    }

    #[tokio::test]
    async fn exit_codes_and_stderr_are_reported() {
        let out = run(&sh("echo oops >&2; exit 7", Duration::from_secs(20)))
            .await
            .unwrap();
        assert_eq!(out.exit_code, Some(7));
        assert!(!out.success());
        assert_eq!(out.stderr.text, "oops\n");
    }

    #[test]
    fn programs_are_found_on_the_childs_path() {
        let dir = tempfile::tempdir().unwrap();
        let tool = dir.path().join("tool");
        std::fs::write(&tool, "").unwrap();
        let path = format!("/nonexistent:{}", dir.path().display());
        assert_eq!(resolve_program("tool", Some(&path)), tool);
        assert_eq!(resolve_program("./x", Some(&path)), PathBuf::from("./x"));
        assert_eq!(
            resolve_program("missing", Some(&path)),
            PathBuf::from("missing")
        );
    }

    /// Marks the child copy of the test binary that runs the probe below.
    const FD3_CHILD: &str = "CLOSER_TEST_FD3_CHILD";

    #[test]
    fn a_descriptor_that_already_is_3_still_reaches_the_program_as_3() {
        // Placing a descriptor at 3 would disturb whatever this shared test
        // process keeps there, so a child copy of the binary runs the probe.
        crate::alone::run(
            "agent::process::tests::fd3_probe",
            FD3_CHILD,
            "FD3_PROBE_DONE",
        );
    }

    /// Runs only in the child started above (it returns at once elsewhere):
    /// the pipe's own descriptor is 3, as `pipe2` sometimes returns when 3
    /// was just freed.
    #[test]
    fn fd3_probe() {
        if !crate::alone::is_the_child(FD3_CHILD) {
            return;
        }
        // SAFETY: F_GETFD only reads the descriptor's flags.
        let free = unsafe { libc::fcntl(3, libc::F_GETFD) } == -1;
        assert!(free, "descriptor 3 is already taken in the probe's process");
        // pipe2 takes the lowest free descriptors: its read end is 3.
        let at_3 = pipe_holding(b"through fd 3\n");
        assert_eq!(at_3.as_raw_fd(), 3);
        let mut spec = sh("cat <&3", Duration::from_secs(20));
        spec.fd3 = Some(Arc::new(at_3));
        let out = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(run(&spec))
            .unwrap();
        assert_eq!(out.stdout.text, "through fd 3\n", "{}", out.stderr.text);
        println!("FD3_PROBE_DONE");
    }

    fn pipe_holding(content: &[u8]) -> OwnedFd {
        use std::io::Write as _;
        use std::os::fd::FromRawFd as _;
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills both descriptors, owned by nobody else.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        std::fs::File::from(write).write_all(content).unwrap();
        read
    }
}
