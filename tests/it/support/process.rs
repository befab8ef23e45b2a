//! `closer` as a real process: the shipped binary, started with a clean
//! environment on a free port, for tests that kill it or run two of them.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use super::SpawnApart;
use super::app::SECRET;

pub struct CloserProcess {
    pub child: Child,
    pub url: String,
}

/// Alive and not a zombie waiting to be reaped.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Whether process `pid` is gone within `limit`: SIGKILL is delivered
/// asynchronously, and a loaded machine may take a moment to end it.
pub async fn gone_within(pid: i32, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while alive(pid) && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    !alive(pid)
}

/// The pid of a process with `argument` on its command line: how a test
/// finds a sandboxed process, whose own `$!` and `$$` are pids of its PID
/// namespace and mean nothing out here.
pub fn process_with_argument(argument: &str) -> Option<i32> {
    processes().find_map(|(pid, proc)| {
        let cmdline = std::fs::read(proc.join("cmdline")).ok()?;
        cmdline
            .split(|b| *b == 0)
            .any(|arg| arg == argument.as_bytes())
            .then_some(pid)
    })
}

/// The processes working in `dir` or naming it on their command line, one
/// line each (pid, working directory, command line): what a story that
/// hangs was still running.
pub fn processes_in(dir: &Path) -> Vec<String> {
    let needle = dir.to_string_lossy().into_owned();
    processes()
        .filter_map(|(pid, proc)| {
            let cwd = std::fs::read_link(proc.join("cwd")).unwrap_or_default();
            let cmdline = std::fs::read(proc.join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (cwd.starts_with(dir) || cmdline.contains(&needle))
                .then(|| format!("pid {pid} in {}: {}", cwd.display(), cmdline.trim_end()))
        })
        .collect()
}

/// Every process this one can see: its pid and its `/proc` directory.
fn processes() -> impl Iterator<Item = (i32, std::path::PathBuf)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| Some((entry.file_name().to_str()?.parse().ok()?, entry.path())))
}

/// A `sleep` argument no other process has: 300 s and a unique fraction.
pub fn unique_sleep() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(1);
    format!(
        "300.{}{:04}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// The binary with only the environment a test gives it.
pub fn closer_command(database_url: &str, extra_env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_closer"));
    command
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "warn")
        .env("DATABASE_URL", database_url)
        .env("GITHUB_WEBHOOK_SECRET", SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (name, value) in extra_env {
        command.env(name, value);
    }
    command
}

impl CloserProcess {
    /// Starts `closer serve --dry-run` with `args` and waits until it answers
    /// `/readyz`.
    pub async fn serve(database_url: &str, config: Option<&Path>, args: &[&str]) -> CloserProcess {
        let process = CloserProcess::start(database_url, config, args);
        process.wait_ready().await;
        process
    }

    /// Starts `closer serve --dry-run` with `args` without waiting for it.
    pub fn start(database_url: &str, config: Option<&Path>, args: &[&str]) -> CloserProcess {
        let port = free_port();
        let bind = format!("127.0.0.1:{port}");
        let mut command = closer_command(database_url, &[("CLOSER_BIND", &bind)]);
        if let Some(config) = config {
            command.arg("--config").arg(config);
        }
        command.arg("serve").arg("--dry-run").args(args);
        let child = command.spawn_apart().expect("closer starts");
        CloserProcess {
            child,
            url: format!("http://{bind}"),
        }
    }

    /// Waits until something accepts connections on the process's port:
    /// bound, though perhaps not serving yet.
    pub async fn wait_bound(&self) {
        let address = self.url.trim_start_matches("http://");
        for _ in 0..1000 {
            if tokio::net::TcpStream::connect(address).await.is_ok() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("nothing listened on {address} in 10 s");
    }

    async fn wait_ready(&self) {
        let client = crate::support::client();
        for _ in 0..200 {
            let response = client.get(format!("{}/readyz", self.url)).send().await;
            if response.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("closer at {} did not become ready in 10 s", self.url);
    }

    /// SIGKILL: no shutdown code runs.
    pub async fn kill_hard(mut self) {
        self.child.start_kill().expect("kill");
        let _ = self.child.wait().await;
    }

    /// SIGTERM, then the exit status.
    pub async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running") as i32;
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .expect("exits within 30 s of SIGTERM")
            .expect("exit status")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_process_working_in_a_directory_is_listed_and_others_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let sleep = super::unique_sleep();
        let mut sleeping = std::process::Command::new("sleep");
        sleeping.arg(&sleep).current_dir(dir.path());
        let mut child = closer::agent::fork_lock::spawning(|| sleeping.spawn()).unwrap();
        // The kernel lets spawn return before the new program's command
        // line is in place (the vfork parent wakes as the old memory goes):
        // look again for a moment.
        let pid = format!("pid {} ", child.id());
        let shown = |listed: &[String]| {
            listed
                .iter()
                .any(|p| p.starts_with(&pid) && p.contains(&sleep))
        };
        let mut listed = super::processes_in(dir.path());
        for _ in 0..100 {
            if shown(&listed) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
            listed = super::processes_in(dir.path());
        }
        let not_listed = super::processes_in(elsewhere.path());
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(shown(&listed), "{listed:?}");
        assert!(not_listed.is_empty(), "{not_listed:?}");
    }
}
