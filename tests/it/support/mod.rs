//! Shared test helpers: databases, the intake tester, fixtures.

#![allow(dead_code)]

pub mod agent_tools;
pub mod alone;
pub mod app;
pub mod db;
pub mod fake_github;
pub mod fake_llm;
pub mod fake_models;
pub mod gate;
pub mod git;
pub mod operated;
pub mod process;
pub mod story;
pub mod story_pull;

/// The bytes of a webhook fixture (`tests/fixtures/github-webhooks/<name>`).
pub fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/tests/fixtures/github-webhooks/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read fixture {path}: {e}"))
}

/// A fixture with an `installation` object added, as GitHub sends to Apps.
pub fn fixture_for_installation(name: &str, installation: i64) -> Vec<u8> {
    let mut value: serde_json::Value =
        serde_json::from_slice(&fixture(name)).expect("fixtures are JSON");
    value["installation"] = serde_json::json!({ "id": installation, "node_id": "MDIz" });
    serde_json::to_vec(&value).expect("serialisable")
}

/// HMAC-SHA256 signature header value for `body`.
pub fn sign(secret: &str, body: &[u8]) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).expect("any key");
    mac.update(body);
    format!("sha256={}", hex::encode(mac.finalize().into_bytes()))
}

/// A unique id for deliveries and database names.
pub fn unique(prefix: &str) -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}-{}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed),
        fastrand::u32(..)
    )
}

/// Posts `body` as a signed delivery of `event` to closer at `url`, as
/// GitHub does, and expects it accepted.
pub async fn deliver_signed(url: &str, secret: &str, event: &str, body: Vec<u8>) {
    let status = client()
        .post(format!("{url}/webhooks"))
        .header("content-type", "application/json")
        .header("x-github-event", event)
        .header("x-github-delivery", unique("delivery"))
        .header("x-hub-signature-256", sign(secret, &body))
        .body(body)
        .send()
        .await
        .expect("delivered")
        .status();
    assert!(status.is_success(), "delivery answered {status}");
}

/// An HTTP client for talking to the servers under test.
pub fn client() -> reqwest::Client {
    closer::install_crypto_provider();
    reqwest::Client::new()
}

/// The sandbox tests run processes in, picked as `closer serve` picks it
/// (bwrap here and in CI; `CLOSER_TEST_SANDBOX=landlock|bwrap|none` forces
/// one), with the test's own directory `shared` visible read-write (a
/// scripted agent reads its steps and writes the prompts it got there) and
/// `data_dir` hidden, as `closer serve` hides its data directory.
pub fn confinement(
    shared: &std::path::Path,
    data_dir: &std::path::Path,
) -> closer::agent::confine::Confinement {
    use closer::agent::confine::{Confinement, Mode, SandboxConfig};
    let mode = match std::env::var("CLOSER_TEST_SANDBOX").as_deref() {
        Ok("bwrap") => Mode::Bwrap,
        Ok("landlock") => Mode::Landlock,
        Ok("none") => Mode::None,
        _ => Mode::Auto,
    };
    let config = SandboxConfig {
        mode,
        read_write: vec![shared.to_path_buf()],
        hide: vec![data_dir.to_path_buf()],
        ..SandboxConfig::default()
    };
    let confinement = Confinement::detect(&config, &std::env::var("PATH").unwrap_or_default())
        .expect("a sandbox for the tests (.ci/run installs bubblewrap)");
    if let Some(reason) = confinement.unavailable() {
        panic!(
            "no sandbox for the tests: {reason}\n\
             install bubblewrap (.ci/run does), or set CLOSER_TEST_SANDBOX=none"
        );
    }
    confinement
}

/// Waits up to a minute for the agent to create `file`.
pub async fn wait_for_file(file: &std::path::Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !file.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} never appeared",
            file.display()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Writes an executable file at `path`, written by a process of its own.
///
/// A file this process held open for writing cannot be executed while any
/// child forked meanwhile (by another test's thread) still holds that
/// descriptor between its `fork` and `exec`: `execve` fails with "Text file
/// busy". `install` opens, writes and closes the file in its own process,
/// which no other thread of ours can fork.
pub fn write_executable(path: &std::path::Path, contents: &str) {
    let source = tempfile::NamedTempFile::new().expect("a temporary file");
    std::fs::write(source.path(), contents).expect("write the source");
    copy_executable(source.path(), path);
}

/// Copies the program at `from` to `path`, executable, the way
/// [`write_executable`] writes one: by a process of its own.
pub fn copy_executable(from: &std::path::Path, path: &std::path::Path) {
    let mut install = std::process::Command::new("install");
    install.args(["-m", "0755"]).arg(from).arg(path);
    // Apart from closer's own copies of files it runs next (`fork_lock`).
    let out = closer::agent::fork_lock::output(&mut install).expect("run install");
    assert!(
        out.status.success(),
        "install {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `Command::output`, forking apart from closer's writes of files it runs
/// next (`closer::agent::fork_lock`): a test's fork cannot leave the
/// handler closer just copied busy.
pub trait OutputApart {
    fn output_apart(&mut self) -> std::io::Result<std::process::Output>;

    /// `status()`, the child started under the lock.
    fn status_apart(&mut self) -> std::io::Result<std::process::ExitStatus>;
}

impl OutputApart for std::process::Command {
    fn output_apart(&mut self) -> std::io::Result<std::process::Output> {
        closer::agent::fork_lock::output(self)
    }

    fn status_apart(&mut self) -> std::io::Result<std::process::ExitStatus> {
        closer::agent::fork_lock::spawning(|| self.spawn())?.wait()
    }
}

/// Starting a tokio `Command` apart from the writes of files closer runs
/// next (`closer::agent::fork_lock`): the async counterpart of
/// [`OutputApart`], for the tests' own processes (closer itself, `cat`,
/// the agent CLIs), so that none of them holds a script's descriptor open
/// while that script is run.
pub trait SpawnApart {
    fn spawn_apart(&mut self) -> std::io::Result<tokio::process::Child>;

    /// `output()`: stdin from `/dev/null`, stdout and stderr collected.
    fn output_apart(
        &mut self,
    ) -> impl std::future::Future<Output = std::io::Result<std::process::Output>> + Send;
}

impl SpawnApart for tokio::process::Command {
    fn spawn_apart(&mut self) -> std::io::Result<tokio::process::Child> {
        closer::agent::fork_lock::spawning(|| self.spawn())
    }

    fn output_apart(
        &mut self,
    ) -> impl std::future::Future<Output = std::io::Result<std::process::Output>> + Send {
        use std::process::Stdio;
        self.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let child = self.spawn_apart();
        async move { child?.wait_with_output().await }
    }
}

/// Sets `path`'s permission bits (a directory made unwritable, say).
pub fn set_mode(path: &std::path::Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}
