//! A live goal whose server has a network of its own (decision 197).
//!
//! Under bwrap the goal's command runs in a network namespace with only its
//! own loopback, so nothing else on the host (another run's server, a
//! hostile agent of another run racing for the port) can answer for it, and
//! two runs' goals on one port no longer wait for each other. closer cannot
//! reach into that namespace, so a copy of itself goes in with the server:
//! `closer goal-probe` (hidden from `--help`) reads the goal from its
//! standard input, starts the command in a process group of its own, waits
//! for the port, makes the request ([`super::http::request`]), stops the
//! group and writes the answer: one JSON header line, then the body. A host
//! name the probe's network cannot resolve comes with the address it
//! resolved to outside.
//!
//! The server is the agent's code and runs as the same user as the probe,
//! so the probe marks itself non-dumpable before it starts the server: the
//! server cannot open the probe's standard output through `/proc`, nor
//! trace it, and gets none of its descriptors. The probe is process 1 of
//! the sandbox (`--as-pid-1`): bwrap's own process 1 would hold the same
//! output open, dumpable, and process 1 takes no signal it has no handler
//! for from inside its namespace, so the server cannot kill it either.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use super::GoalContext;
use super::http::{MAX_RESPONSE_BYTES, Response, Target, Want, request};
use super::sandbox::GoalJail;
use crate::agent::confine::Network;
use crate::agent::process::{self, GroupGuard};

/// The most of the header line read back.
const MAX_HEADER_BYTES: u64 = 64 * 1024;

/// How long past the goal's timeout the probe may take (its own start, the
/// server's stop).
const PROBE_GRACE: Duration = Duration::from_secs(15);

/// The probe's allocator setting, not passed on to the goal's command.
const ARENA_RESERVE: &str = "MIMALLOC_ARENA_RESERVE";

/// What the probe is given on its standard input.
#[derive(Serialize, Deserialize)]
struct ProbeJob {
    command: String,
    url: String,
    /// What the URL's host resolved to outside, when the probe is to use
    /// it; empty: the probe resolves it.
    #[serde(default)]
    addresses: Vec<SocketAddr>,
    timeout_ms: u64,
    want_body: bool,
}

/// The probe's header line.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Answer {
    Response { status: u16, body_len: usize },
    Error(String),
}

/// A URL on this machine, and the addresses its host resolved to when the
/// probe is to connect there instead of resolving it.
pub(super) struct Local<'a> {
    pub url: &'a str,
    pub addresses: Vec<SocketAddr>,
}

/// Runs the goal's `command` with the probe `prober` (closer's binary) in
/// `sandbox`, its network taken away, and reads the probe's answer.
pub(super) async fn fetch(
    ctx: GoalContext<'_>,
    prober: &Path,
    sandbox: GoalJail,
    command: &str,
    local: Local<'_>,
    timeout: Duration,
    want: Want,
) -> Result<Response, String> {
    let mut jail = sandbox.jail.clone();
    jail.network = Network::None;
    // No bwrap process beside the probe: it would hold the probe's output
    // open to the command through `/proc/1/fd/1`, and it is dumpable.
    jail.pid_one = true;
    // The binary alone, visible even where its directory is hidden (beside
    // closer's config or key): its siblings stay hidden.
    jail.view.read_only.push(prober.to_path_buf());
    let argv = vec![prober.display().to_string(), "goal-probe".to_owned()];
    // mimalloc reserves 1 GiB arenas by default, which an operator's
    // address-space limit (`[sandbox.limits] memory_mb`) would refuse.
    let mut env = sandbox.env.clone();
    env.insert(ARENA_RESERVE.to_owned(), "64MiB".to_owned());
    let (mut cmd, lifeline) =
        process::command(&argv, ctx.worktree, &env, Some(&jail)).map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = crate::agent::fork_lock::spawning(|| cmd.spawn())
        .map_err(|e| format!("could not start: {e}"))?;
    let mut group = GroupGuard::new(child.id(), lifeline);
    let job = serde_json::to_vec(&ProbeJob {
        command: command.to_owned(),
        url: local.url.to_owned(),
        addresses: local.addresses,
        timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        want_body: want == Want::Body,
    })
    .map_err(|e| e.to_string())?;
    let answer = tokio::time::timeout(timeout.saturating_add(PROBE_GRACE), talk(&mut child, &job))
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {} s", timeout.as_secs())));
    group.stop(&mut child).await;
    answer
}

/// Gives the probe its job and reads its answer.
async fn talk(child: &mut tokio::process::Child, job: &[u8]) -> Result<Response, String> {
    let lost = |e: std::io::Error| format!("the goal's probe failed: {e}");
    let mut stdin = child.stdin.take().ok_or("the probe has no input")?;
    stdin.write_all(job).await.map_err(lost)?;
    drop(stdin);
    let stdout = child.stdout.take().ok_or("the probe has no output")?;
    let mut reader = BufReader::new(stdout);
    let mut header = Vec::new();
    (&mut reader)
        .take(MAX_HEADER_BYTES)
        .read_until(b'\n', &mut header)
        .await
        .map_err(lost)?;
    let answer: Answer = serde_json::from_slice(&header).map_err(|_| {
        "the goal's probe ended without an answer (killed by the goal's command?)".to_owned()
    })?;
    let (status, body_len) = match answer {
        Answer::Response { status, body_len } => (status, body_len),
        Answer::Error(why) => return Err(why),
    };
    if body_len > MAX_RESPONSE_BYTES {
        return Err("the probe's answer is larger than the cap".to_owned());
    }
    let mut body = Vec::with_capacity(body_len);
    (&mut reader)
        .take(body_len as u64)
        .read_to_end(&mut body)
        .await
        .map_err(lost)?;
    if body.len() != body_len {
        return Err("the goal's probe ended in the middle of its answer".to_owned());
    }
    Ok(Response {
        status,
        body: String::from_utf8_lossy(&body).into_owned(),
    })
}

/// `closer goal-probe`: reads a [`ProbeJob`], answers on standard output.
pub fn child_main() -> ExitCode {
    let answer = match protect_output() {
        Ok(()) => read_job().and_then(run_job),
        Err(why) => Err(why),
    };
    let (header, body) = match answer {
        Ok(response) => {
            let body = response.body.into_bytes();
            let header = Answer::Response {
                status: response.status,
                body_len: body.len(),
            };
            (header, body)
        }
        Err(why) => (Answer::Error(why), Vec::new()),
    };
    let mut out = serde_json::to_vec(&header).unwrap_or_default();
    out.push(b'\n');
    out.extend_from_slice(&body);
    match std::io::Write::write_all(&mut std::io::stdout(), &out) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

/// Marks this process non-dumpable (closer's `main` already does; the
/// probe does not rely on it), before it starts the goal's command: a
/// process of the same user can then neither open its descriptors through
/// `/proc` nor trace it.
fn protect_output() -> Result<(), String> {
    // SAFETY: PR_SET_DUMPABLE takes plain integers and touches no memory.
    match unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } {
        0 => Ok(()),
        _ => Err("the goal's probe could not protect its output".to_owned()),
    }
}

/// The job on standard input.
fn read_job() -> Result<ProbeJob, String> {
    let mut input = Vec::new();
    std::io::Read::read_to_end(&mut std::io::stdin(), &mut input)
        .map_err(|e| format!("could not read the probe job: {e}"))?;
    serde_json::from_slice(&input).map_err(|e| format!("bad probe job: {e}"))
}

/// Starts the job's command, requests its URL, stops the command.
fn run_job(job: ProbeJob) -> Result<Response, String> {
    let url = reqwest::Url::parse(&job.url).map_err(|e| format!("bad url: {e}"))?;
    let host = super::http::url_host(&url)
        .ok_or("url has no host")?
        .to_owned();
    let port = url.port_or_known_default().ok_or("url has no port")?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("the probe's runtime: {e}"))?;
    runtime.block_on(async {
        let mut server = tokio::process::Command::new("sh")
            .args(["-c", &job.command])
            .env_remove(ARENA_RESERVE)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("could not start: {e}"))?;
        let target = Target {
            host: &host,
            port,
            url: url.clone(),
            addresses: job.addresses,
        };
        let want = if job.want_body {
            Want::Body
        } else {
            Want::Status
        };
        let timeout = Duration::from_millis(job.timeout_ms);
        let result = request(&mut server, target, timeout, want).await;
        if let Some(pid) = server.id().and_then(|p| i32::try_from(p).ok()) {
            // SAFETY: killpg takes plain integers; the group is the server's own.
            unsafe { libc::killpg(pid, libc::SIGKILL) };
        }
        let _ = server.wait().await;
        result
    })
}
