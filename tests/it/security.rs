//! Secrets stay with closer: an agent runs as the same user, so closer marks
//! itself non-dumpable and another process of that user cannot read its
//! environment (where the webhook secret and keys may live).

use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;
use std::time::Duration;

use crate::support::app::SECRET;
use crate::support::process::free_port;
use crate::support::{OutputApart, SpawnApart};

const NOBODY: &str = "65534";

fn as_nobody(program: &str) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("setpriv");
    command.args([
        "--reuid",
        NOBODY,
        "--regid",
        NOBODY,
        "--clear-groups",
        program,
    ]);
    command
}

/// Reads `/proc/<pid>/environ` as `nobody`; `None` when refused.
async fn read_environ_as_nobody(pid: u32) -> Option<String> {
    let output = as_nobody("cat")
        .arg(format!("/proc/{pid}/environ"))
        .output_apart()
        .await
        .expect("setpriv runs");
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Waits up to 30 s for `closer` to answer `/healthz` on `port`; panics with
/// its standard error if it exits first (a port another test took, say).
async fn wait_healthy(closer: &mut tokio::process::Child, port: u16) {
    let client = crate::support::client();
    for _ in 0..600 {
        if let Some(status) = closer.try_wait().unwrap() {
            let mut stderr = String::new();
            if let Some(mut pipe) = closer.stderr.take() {
                use tokio::io::AsyncReadExt;
                let _ = pipe.read_to_string(&mut stderr).await;
            }
            panic!("closer did not start as nobody ({status}): {stderr}");
        }
        let response = client
            .get(format!("http://127.0.0.1:{port}/healthz"))
            .send()
            .await;
        if response.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("closer did not answer /healthz as nobody within 30 s");
}

fn can_switch_users() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let setpriv = std::process::Command::new("setpriv")
        .arg("--version")
        .output_apart()
        .is_ok_and(|o| o.status.success());
    root && setpriv
}

#[tokio::test]
async fn an_agent_running_as_the_same_user_cannot_read_closers_environment() {
    if !can_switch_users() {
        eprintln!("SKIPPED: needs root and setpriv to run closer and a probe as another user");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let bin = dir.path().join("closer");
    // Copied by a process of its own: a descriptor this process held open
    // for writing, inherited by another test's fork, would make the `exec`
    // fail with "Text file busy".
    crate::support::copy_executable(env!("CARGO_BIN_EXE_closer").as_ref(), &bin);

    // The control: an ordinary process of that user is readable, so the
    // probe below can fail.
    // It says "ready" once it runs as nobody (setpriv has switched), so the
    // read below cannot race the switch on a loaded machine; it then waits
    // on its stdin with the shell's own `read`, exec'ing nothing (a read
    // that met an exec got nothing).
    let mut control = as_nobody("sh")
        .args(["-c", "echo ready; read wait"])
        .env("CONTROL_SECRET", "visible")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn_apart()
        .unwrap();
    {
        use tokio::io::AsyncBufReadExt;
        let stdout = control.stdout.take().expect("piped stdout");
        let mut line = String::new();
        tokio::io::BufReader::new(stdout)
            .read_line(&mut line)
            .await
            .unwrap();
        assert_eq!(line.trim(), "ready");
    }
    let environ = read_environ_as_nobody(control.id().unwrap()).await;
    assert!(environ.is_some_and(|e| e.contains("CONTROL_SECRET=visible")));
    control.kill().await.unwrap();

    let port = free_port();
    let mut closer = as_nobody(bin.to_str().unwrap())
        .args(["serve", "--dry-run"])
        .env_clear()
        .env("GITHUB_WEBHOOK_SECRET", SECRET)
        .env(
            "DATABASE_URL",
            format!("sqlite://{}/c.db", dir.path().display()),
        )
        .env("CLOSER_BIND", format!("127.0.0.1:{port}"))
        .env("CLOSER_DATA_DIR", dir.path().join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn_apart()
        .unwrap();
    wait_healthy(&mut closer, port).await;
    let environ = read_environ_as_nobody(closer.id().unwrap()).await;
    // A closer that had exited meanwhile would leave an empty environment
    // readable and fail the assertions below for the wrong reason.
    assert!(
        closer.try_wait().unwrap().is_none(),
        "closer exited while its environment was read"
    );
    assert!(
        environ.as_deref().is_none_or(|e| !e.contains(SECRET)),
        "the webhook secret was readable: {environ:?}"
    );
    assert!(
        environ.is_none(),
        "closer's environment should be unreadable"
    );
    closer.kill().await.unwrap();
}
