//! The one place completion handlers start a process: run an executable in a
//! directory with a given environment (nothing inherited), bytes on stdin, a
//! wall-clock limit that kills the whole process group, and capped output.
//! It starts through the agent runner's process code (a reaper, the
//! sandbox's jail) and never passes a shell: the program runs as it is,
//! with no arguments.

use std::collections::BTreeMap;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::agent::confine::Jail;
use crate::agent::process::{self, GroupGuard};

/// What a finished process left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessOutput {
    /// The exit code; `None` when killed by a signal.
    pub code: Option<i32>,
    /// The signal that ended it, if any.
    pub signal: Option<i32>,
    /// Stdout, at most the cap.
    pub stdout: Vec<u8>,
    /// Stderr, at most the cap.
    pub stderr: Vec<u8>,
}

/// Why a process gave no output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcessError {
    /// It could not be started.
    #[error("cannot start `{program}`: {message}")]
    Spawn { program: String, message: String },
    /// It ran past the limit and was killed.
    #[error("`{program}` did not finish within {}s and was killed", *ms as f64 / 1000.0)]
    Timeout { program: String, ms: u64 },
    /// Reading its output failed.
    #[error("reading the output of `{program}` failed: {message}")]
    Io { program: String, message: String },
}

/// Runs `program` in `cwd` with exactly `env`, writes `stdin`, and waits at
/// most `timeout`. Output beyond `max_output` bytes per stream is dropped.
pub async fn run_process(
    program: &Path,
    cwd: &Path,
    env: &[(String, String)],
    jail: Option<&Jail>,
    stdin: &[u8],
    timeout: Duration,
    max_output: usize,
) -> Result<ProcessOutput, ProcessError> {
    let name = program.display().to_string();
    let spawn = |message: String| ProcessError::Spawn {
        program: name.clone(),
        message,
    };
    let env: BTreeMap<String, String> = env.iter().cloned().collect();
    let (mut command, lifeline) = process::command(std::slice::from_ref(&name), cwd, &env, jail)
        .map_err(|e| spawn(e.to_string()))?;
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child =
        crate::agent::fork_lock::spawning(|| command.spawn()).map_err(|e| spawn(e.to_string()))?;
    let pid = child.id();
    let _group = GroupGuard::new(pid, lifeline);
    let io = |e: std::io::Error| ProcessError::Io {
        program: name.clone(),
        message: e.to_string(),
    };
    let (mut input, mut out, mut err) =
        match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
            (Some(i), Some(o), Some(e)) => (i, o, e),
            _ => return Err(io(std::io::Error::other("pipes were not set up"))),
        };
    let data = stdin.to_vec();
    let cap = max_output as u64;
    let work = async {
        // A process that does not read its stdin must not block us: a write
        // error (broken pipe) is ignored, the exit status tells the story.
        let write = async {
            let _ = input.write_all(&data).await;
            drop(input);
        };
        let (_, stdout, stderr) = tokio::join!(
            write,
            read_capped(&mut out, cap),
            read_capped(&mut err, cap)
        );
        let (stdout, stderr) = (stdout?, stderr?);
        let status = child.wait().await?;
        Ok::<_, std::io::Error>((status, stdout, stderr))
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(Ok((status, stdout, stderr))) => Ok(ProcessOutput {
            code: status.code(),
            signal: status.signal(),
            stdout,
            stderr,
        }),
        Ok(Err(e)) => Err(io(e)),
        Err(_) => {
            if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
                // SAFETY: killpg only sends a signal to the group the child
                // leads (it called setsid); the child is still ours (not reaped).
                unsafe {
                    libc::killpg(pid, libc::SIGKILL);
                }
            }
            Err(ProcessError::Timeout {
                program: name,
                ms: timeout.as_millis() as u64,
            })
        }
    }
}

/// Reads to the end, keeping the first `cap` bytes and draining the rest so
/// the process never blocks on a full pipe.
async fn read_capped<R: tokio::io::AsyncRead + Unpin>(
    reader: &mut R,
    cap: u64,
) -> std::io::Result<Vec<u8>> {
    let mut kept = Vec::new();
    reader.take(cap).read_to_end(&mut kept).await?;
    tokio::io::copy(reader, &mut tokio::io::sink()).await?;
    Ok(kept)
}

/// The minimal environment a handler sees when the caller has none:
/// `PATH`, `HOME` and `LANG`, with safe fallbacks.
pub fn minimal_env(home: &Path) -> Vec<(String, String)> {
    vec![
        ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
        ("HOME".to_owned(), home.display().to_string()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
    ]
}
