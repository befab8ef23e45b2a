//! Running one untrusted subprocess (an agent, a goal command) under control:
//! its own process group, a wall-clock deadline after which the whole group is
//! killed, stdout/stderr captured up to a cap, and an environment built from
//! nothing.
//!
//! This module must never inherit closer's environment (that is where the App
//! key path, the webhook secret and tokens live) and never let a child outlive
//! its deadline or fill memory with output.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

/// How long the pipes are drained after the group was killed; a grandchild
/// that escaped into another process group cannot hold closer up longer.
const DRAIN_GRACE: Duration = Duration::from_secs(2);

/// The most a [`ProcessOutput::tail`] returns: a log excerpt, not the log.
pub const TAIL_MAX_BYTES: usize = 16 * 1024;

/// The minimal environment every subprocess starts from: `PATH`, `HOME` and
/// `LANG`, nothing inherited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseEnv {
    pub path: String,
    pub home: PathBuf,
    pub lang: String,
}

impl BaseEnv {
    /// `PATH` and `HOME` copied from closer's own environment (read once, at
    /// start), `LANG=C.UTF-8`. Neither holds a secret.
    pub fn from_process() -> BaseEnv {
        BaseEnv {
            path: std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into()),
            home: std::env::var_os("HOME").map_or_else(|| PathBuf::from("/"), PathBuf::from),
            lang: "C.UTF-8".to_owned(),
        }
    }

    /// The three variables as a map to extend.
    pub fn vars(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("PATH".to_owned(), self.path.clone()),
            ("HOME".to_owned(), self.home.display().to_string()),
            ("LANG".to_owned(), self.lang.clone()),
        ])
    }
}

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
        }
    }
}

/// One captured stream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Captured {
    /// The first `max_output_bytes` bytes, lossily decoded.
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
}

/// A started child in its own process group; the group is killed when this
/// is dropped, so nothing started here can outlive its owner.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: Option<i32>,
}

impl GroupGuard {
    /// Guards the group led by `pid` (a child started with [`command`]).
    pub fn from_pid(pid: Option<u32>) -> Self {
        GroupGuard {
            pgid: pid.and_then(|p| i32::try_from(p).ok()),
        }
    }

    /// Sends SIGKILL to every process of the group (no-op once it is gone).
    pub fn kill(&self) {
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
        self.kill();
    }
}

/// Builds the tokio command: own process group, empty environment plus `env`.
pub fn command(
    argv: &[String],
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> Result<Command, ProcessError> {
    let (program, args) = argv.split_first().ok_or(ProcessError::EmptyCommand)?;
    let mut cmd = Command::new(resolve_program(
        program,
        env.get("PATH").map(String::as_str),
    ));
    cmd.args(args)
        .current_dir(cwd)
        .env_clear()
        .envs(env)
        .process_group(0)
        .kill_on_drop(true);
    Ok(cmd)
}

/// `Command` looks a bare name up on closer's own `PATH`; the child's `PATH`
/// is the one that counts, so resolve against it.
fn resolve_program(program: &str, path: Option<&str>) -> PathBuf {
    if program.contains('/') {
        return PathBuf::from(program);
    }
    path.into_iter()
        .flat_map(|p| p.split(':'))
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(program))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| PathBuf::from(program))
}

/// Runs `spec` to completion or to its deadline, whichever comes first.
/// Whatever is left of the group afterwards is killed as well.
pub async fn run(spec: &ProcessSpec) -> Result<ProcessOutput, ProcessError> {
    let program = spec.argv.first().cloned().unwrap_or_default();
    let mut cmd = command(&spec.argv, &spec.cwd, &spec.env)?;
    cmd.stdin(if spec.stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|source| ProcessError::Spawn {
        program: program.clone(),
        source,
    })?;
    let group = GroupGuard::from_pid(child.id());

    if let (Some(input), Some(mut stdin)) = (spec.stdin.clone(), child.stdin.take()) {
        // A child that never reads its stdin must not block us: write in the background.
        tokio::spawn(async move {
            let _ = stdin.write_all(&input).await;
            let _ = stdin.shutdown().await;
        });
    }
    let cap = spec.max_output_bytes;
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let stdout = child
        .stdout
        .take()
        .map(|s| tokio::spawn(capture(s, cap, stopped.clone())));
    let stderr = child
        .stderr
        .take()
        .map(|s| tokio::spawn(capture(s, cap, stopped.clone())));

    let (status, timed_out) = match tokio::time::timeout(spec.timeout, child.wait()).await {
        Ok(status) => (
            Some(status.map_err(|source| ProcessError::Wait {
                program: program.clone(),
                source,
            })?),
            false,
        ),
        Err(_) => {
            group.kill();
            let _ = child.wait().await;
            (None, true)
        }
    };
    // Children left behind by the main process die with it. A grandchild
    // that escaped into another group may hold the pipes open: after a grace
    // period the readers stop and keep what they have.
    group.kill();
    let stopper = tokio::spawn(async move {
        tokio::time::sleep(DRAIN_GRACE).await;
        let _ = stop.send(true);
    });
    let stdout = collect(stdout).await;
    let stderr = collect(stderr).await;
    stopper.abort();
    Ok(ProcessOutput {
        exit_code: status.and_then(|s| s.code()),
        timed_out,
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        stdout,
        stderr,
    })
}

async fn collect(task: Option<tokio::task::JoinHandle<Captured>>) -> Captured {
    match task {
        Some(task) => task.await.unwrap_or_default(),
        None => Captured::default(),
    }
}

/// Reads a stream to its end (or until told to stop), keeping the first
/// `cap` bytes and counting the rest.
async fn capture(
    mut stream: impl AsyncRead + Unpin,
    cap: usize,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> Captured {
    let mut kept = Vec::with_capacity(cap.min(64 * 1024));
    let mut dropped: u64 = 0;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let read = tokio::select! {
            read = stream.read(&mut buf) => read,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        let n = match read {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let room = cap.saturating_sub(kept.len());
        let keep = n.min(room);
        kept.extend_from_slice(&buf[..keep]);
        dropped += (n - keep) as u64;
    }
    Captured {
        text: String::from_utf8_lossy(&kept).into_owned(),
        dropped_bytes: dropped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(stdout: &str, stderr: &str) -> ProcessOutput {
        ProcessOutput {
            exit_code: Some(0),
            timed_out: false,
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

    #[tokio::test]
    async fn a_grandchild_that_escapes_the_group_cannot_hold_closer_up() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("escaped");
        // The shell returns only once the grandchild is in its own session,
        // still holding stdout.
        let script = format!(
            "echo hello; setsid sh -c 'touch {m}; exec sleep 8' & \
             while [ ! -f {m} ]; do sleep 0.01; done",
            m = marker.display()
        );
        let started = Instant::now();
        let out = run(&sh(&script, Duration::from_secs(20))).await.unwrap();
        let elapsed = started.elapsed();
        assert!(out.success());
        assert_eq!(out.stdout.text, "hello\n", "what was read before is kept");
        assert!(
            elapsed >= DRAIN_GRACE && elapsed < DRAIN_GRACE * 3,
            "{elapsed:?}"
        );
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
}
