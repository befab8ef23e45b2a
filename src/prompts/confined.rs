//! A repository's prompt override rendered in a process of its own.
//!
//! An override is untrusted template code. Fuel bounds how many
//! instructions it runs, not how much memory one instruction takes:
//! `{% set s = s ~ s %}` doubles a string each time, and an allocation the
//! system refuses aborts the whole process, intake and workers with it. So
//! closer renders an override in a child copy of itself (`closer
//! render-prompt`, hidden from `--help`) with an address-space limit, a CPU
//! limit and an empty environment, and reads its output up to a cap. The
//! built-in prompts are closer's own and render in-process.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::{PromptError, PromptTemplate};

/// The address space a render may use.
pub const MEMORY_LIMIT_BYTES: u64 = 1024 * 1024 * 1024;
/// The CPU time a render may use.
pub const CPU_LIMIT_SECS: u64 = 10;
/// The most of a rendered prompt read back.
pub const MAX_PROMPT_BYTES: usize = 16 * 1024 * 1024;
/// The wall-clock time a render may take, start-up included.
const DEADLINE: Duration = Duration::from_secs(30);
/// The exit status of a render the template itself failed.
const TEMPLATE_ERROR: i32 = 3;

/// What the child is given on its standard input.
#[derive(Serialize, Deserialize)]
struct Job {
    template: PromptTemplate,
    params: serde_json::Value,
}

/// Renders overrides by running `program render-prompt`, at most one
/// child per CPU at a time (each may take [`MEMORY_LIMIT_BYTES`]).
#[derive(Debug, Clone)]
pub struct Renderer {
    program: PathBuf,
    /// Shared by the clones: every worker renders through one set.
    permits: Arc<tokio::sync::Semaphore>,
}

impl Renderer {
    /// `program` must be closer's binary.
    pub fn new(program: impl Into<PathBuf>) -> Renderer {
        let cpus = std::thread::available_parallelism().map_or(1, usize::from);
        Renderer::with_concurrency(program, cpus)
    }

    /// Like [`Renderer::new`], with at most `children` renders at once
    /// (at least one).
    pub fn with_concurrency(program: impl Into<PathBuf>, children: usize) -> Renderer {
        Renderer {
            program: program.into(),
            permits: Arc::new(tokio::sync::Semaphore::new(children.max(1))),
        }
    }

    /// The running binary (what `closer serve` uses). On Linux that is
    /// `/proc/self/exe`, which names the binary running even after an
    /// upgrade replaced or removed its file: the child speaks the same
    /// [`Job`] format as its parent.
    pub fn this_program() -> std::io::Result<Renderer> {
        let running = std::path::Path::new("/proc/self/exe");
        if running.exists() {
            return Ok(Renderer::new(running));
        }
        std::env::current_exe().map(Renderer::new)
    }

    /// The binary's file, if it still exists: the path given, or the one
    /// `/proc/self/exe` names (a process in a sandbox cannot follow that
    /// link to its parent's binary).
    pub fn program_file(&self) -> Option<std::path::PathBuf> {
        let file = match self.program == std::path::Path::new("/proc/self/exe") {
            true => std::fs::read_link(&self.program).ok()?,
            false => self.program.clone(),
        };
        file.is_file().then_some(file)
    }

    /// `template` rendered with `params` in the child.
    pub async fn render(
        &self,
        template: &PromptTemplate,
        params: &serde_json::Value,
    ) -> Result<String, PromptError> {
        template.check_params(params)?;
        let failed = |message: String| PromptError::Render {
            prompt: template.name.clone(),
            message,
        };
        let job = serde_json::to_vec(&Job {
            template: template.clone(),
            params: params.clone(),
        })
        .map_err(|e| failed(e.to_string()))?;
        // The semaphore is never closed; waiting for a permit is outside
        // the render's deadline.
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|e| failed(e.to_string()))?;
        let run = tokio::time::timeout(DEADLINE, self.run(job)).await;
        let (status, output) = match run {
            Ok(result) => result.map_err(|e| failed(format!("the renderer failed: {e}")))?,
            Err(_) => return Err(failed(format!("rendering took more than {DEADLINE:?}"))),
        };
        if output.len() > MAX_PROMPT_BYTES {
            return Err(failed(format!(
                "the rendered prompt is larger than {} MiB",
                MAX_PROMPT_BYTES >> 20
            )));
        }
        let text = String::from_utf8_lossy(&output).into_owned();
        match status.code() {
            Some(0) => Ok(text),
            Some(TEMPLATE_ERROR) => Err(failed(text)),
            Some(_) => Err(failed(format!("the renderer failed ({status})"))),
            // A signal: the kernel's CPU limit, or an allocation the memory
            // limit refused (an abort).
            None => Err(failed(format!(
                "rendering stopped ({status}): over its limits of {} MiB of memory \
                 or {CPU_LIMIT_SECS} s of CPU",
                MEMORY_LIMIT_BYTES >> 20
            ))),
        }
    }

    /// Runs the child with `job` on its input; its status and at most one
    /// byte more than [`MAX_PROMPT_BYTES`] of its output.
    async fn run(&self, job: Vec<u8>) -> std::io::Result<(std::process::ExitStatus, Vec<u8>)> {
        let mut command = tokio::process::Command::new(&self.program);
        command
            .arg("render-prompt")
            .env_clear()
            // mimalloc reserves address space in 1 GiB arenas by default,
            // which under the address-space limit made one render in three
            // of a 64 MiB string fail; smaller arenas leave the limit to
            // what the template takes.
            .env("MIMALLOC_ARENA_RESERVE", "64MiB")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        let mut child = crate::agent::fork_lock::spawning(|| command.spawn())?;
        let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(std::io::Error::other("the renderer's pipes are missing"));
        };
        let feed = tokio::spawn(async move {
            // A child that stopped reading (over its limits) closes the pipe.
            let _ = stdin.write_all(&job).await;
        });
        let mut output = Vec::new();
        stdout
            .take(MAX_PROMPT_BYTES as u64 + 1)
            .read_to_end(&mut output)
            .await?;
        if output.len() > MAX_PROMPT_BYTES {
            let _ = child.kill().await;
        }
        let status = child.wait().await?;
        feed.abort();
        Ok((status, output))
    }
}

/// `closer render-prompt`: limits itself, reads a [`Job`] from standard
/// input, writes the prompt to standard output (status 0) or the template's
/// error ([`TEMPLATE_ERROR`]).
pub fn child_main() -> ExitCode {
    if let Err(e) = limit_self() {
        eprintln!("cannot limit the renderer: {e}");
        return ExitCode::FAILURE;
    }
    let mut input = Vec::new();
    if std::io::stdin().read_to_end(&mut input).is_err() {
        return ExitCode::FAILURE;
    }
    let Ok(job) = serde_json::from_slice::<Job>(&input) else {
        return ExitCode::FAILURE;
    };
    let (text, code) = match job.template.render(&job.params) {
        Ok(text) => (text, ExitCode::SUCCESS),
        // The parent names the prompt.
        Err(PromptError::Render { message, .. }) => (message, ExitCode::from(TEMPLATE_ERROR as u8)),
        Err(e) => (e.to_string(), ExitCode::from(TEMPLATE_ERROR as u8)),
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => code,
        Err(_) => ExitCode::FAILURE,
    }
}

/// The address space and CPU time of this process, capped (at most at the
/// limits it already has: a process may not raise its hard limit).
fn limit_self() -> std::io::Result<()> {
    for (resource, value) in [
        (libc::RLIMIT_AS, MEMORY_LIMIT_BYTES),
        (libc::RLIMIT_CPU, CPU_LIMIT_SECS),
    ] {
        let mut current = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given and nothing else.
        if unsafe { libc::getrlimit(resource, &mut current) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let value = value.min(current.rlim_max);
        let limit = libc::rlimit {
            rlim_cur: value,
            rlim_max: value,
        };
        // SAFETY: setrlimit reads the struct it is given and nothing else.
        if unsafe { libc::setrlimit(resource, &limit) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
