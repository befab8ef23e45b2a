//! `closer doctor` as an operator runs it: the real binary, the setup's
//! variables, one line per check, exit 0 only when everything holds.

use std::process::Stdio;

use secrecy::ExposeSecret;
use serde_json::json;
use tokio::process::Command;

use crate::support::SpawnApart;
use crate::support::fake_github::FakeGitHub;
use crate::support::fake_llm::{FakeLlm, Reply};

/// `closer --config closer.toml <args>` in `dir` with only `env`.
async fn closer(dir: &std::path::Path, env: &[(&str, String)], args: &[&str]) -> (i32, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_closer"))
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .args(["--config", "closer.toml"])
        .args(args)
        .stdin(Stdio::null())
        .output_apart()
        .await
        .expect("closer runs");
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.code().unwrap_or(-1), text)
}

#[tokio::test]
async fn doctor_passes_on_a_working_setup_and_says_what_it_saw() {
    let github = FakeGitHub::start().await;
    let llm = FakeLlm::start().await;
    llm.push([Reply::Answer(json!({"ok": true}))]);
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.sh");
    crate::support::write_executable(&agent, "#!/bin/sh\necho '{}'\n");
    std::fs::write(
        dir.path().join("closer.toml"),
        format!(
            "[agents.default]\nadapter = \"command\"\ncommand = [\"{}\"]\n",
            agent.display()
        ),
    )
    .unwrap();
    let env = [
        ("GITHUB_WEBHOOK_SECRET", "s".to_owned()),
        ("GITHUB_APP_ID", github.app_id().to_string()),
        (
            "GITHUB_PRIVATE_KEY",
            github.private_key_pem().expose_secret().to_owned(),
        ),
        ("GITHUB_API_URL", github.url()),
        ("CLOSER_LLM_PROVIDER", "openai".to_owned()),
        ("CLOSER_LLM_BASE_URL", llm.openai_url()),
        ("CLOSER_LLM_API_KEY", "sk-test".to_owned()),
        ("CLOSER_LLM_MODEL", "test-model".to_owned()),
    ];
    let (code, out) = closer(dir.path(), &env, &["migrate"]).await;
    assert_eq!(code, 0, "{out}");

    let (code, out) = closer(dir.path(), &env, &["doctor"]).await;
    assert_eq!(code, 0, "{out}");
    for line in [
        "ok   configuration: parsed",
        "ok   data directory: ",
        "ok   database: reachable, at migration",
        "ok   webhook secret: set",
        "ok   GitHub App: JWT accepted",
        "ok   LLM: test-model answered a structured query",
        "ok   sandbox: agents, goals and handlers run confined by ",
        "ok   agent `default`: ",
        "ok   git: git version 2.",
        "all 9 checks passed",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    assert_eq!(
        out.contains("closer runs as root, so "),
        root,
        "the sandbox line names root-only paths hidden exactly when closer is root:\n{out}"
    );

    // `migrate` made the database its owner's alone; one others can read
    // (made before closer did so) is named.
    let db = dir.path().join("closer.db");
    let mode = |p: &std::path::Path| {
        std::os::unix::fs::PermissionsExt::mode(&p.metadata().unwrap().permissions()) & 0o777
    };
    assert_eq!(mode(&db), 0o600);
    crate::support::set_mode(&db, 0o644);
    let (code, out) = closer(dir.path(), &env, &["doctor"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("FAIL database: closer.db can be read by other users"),
        "{out}"
    );
}

/// An empty secret (a compose file's `${GITHUB_WEBHOOK_SECRET}` with the
/// variable unset) is refused: anybody can sign with an empty key.
#[tokio::test]
async fn an_empty_webhook_secret_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("closer.toml"), "").unwrap();
    let env = [("GITHUB_WEBHOOK_SECRET", String::new())];
    let (code, out) = closer(dir.path(), &env, &["serve"]).await;
    assert_ne!(code, 0, "{out}");
    assert!(
        out.contains("GITHUB_WEBHOOK_SECRET (or [github] webhook_secret) is set but empty"),
        "{out}"
    );
    assert!(
        !dir.path().join("closer.db").exists(),
        "nothing was started"
    );
}

#[tokio::test]
async fn doctor_names_every_problem_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("closer.toml"),
        "[agents.claude]\nadapter = \"claude-code\"\ncommand = [\"/nonexistent/claude\"]\n",
    )
    .unwrap();
    let env = [
        ("CLOSER_LLM_PROVIDER", "openai".to_owned()),
        // Nothing listens on port 9.
        ("CLOSER_LLM_BASE_URL", "http://127.0.0.1:9/v1".to_owned()),
        ("CLOSER_LLM_API_KEY", "sk-test".to_owned()),
        ("CLOSER_LLM_MODEL", "test-model".to_owned()),
    ];
    let (code, out) = closer(dir.path(), &env, &["doctor"]).await;
    assert_eq!(code, 1, "{out}");
    for line in [
        "FAIL database: ",
        "closer migrate",
        "FAIL webhook secret: GITHUB_WEBHOOK_SECRET",
        "FAIL GitHub App: GITHUB_APP_ID and the private key",
        "FAIL LLM: test-model at http://127.0.0.1:9/v1 did not answer",
        "FAIL agent `claude`: `/nonexistent/claude` cannot be started",
        "5 of 9 checks failed",
    ] {
        assert!(out.contains(line), "missing {line:?} in:\n{out}");
    }

    // A configuration that does not load is a finding, not a crash.
    std::fs::write(
        dir.path().join("closer.toml"),
        "[agents.x]\nadapter = \"nope\"\n",
    )
    .unwrap();
    let (code, out) = closer(dir.path(), &[], &["doctor"]).await;
    assert_eq!(code, 1, "{out}");
    assert!(out.starts_with("FAIL configuration: "), "{out}");
}

/// A second `closer serve` on a port already taken (the service runs, an
/// operator starts one by hand) stops before it opens the database: it
/// migrates nothing, claims no job and writes nothing to GitHub.
#[tokio::test]
async fn serve_on_a_taken_port_stops_before_it_touches_the_database() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("closer.toml"), "").unwrap();
    let env = [
        ("GITHUB_WEBHOOK_SECRET", "s".to_owned()),
        ("CLOSER_BIND", taken.local_addr().unwrap().to_string()),
    ];
    let (code, out) = closer(dir.path(), &env, &["serve", "--dry-run"]).await;
    assert_ne!(code, 0, "{out}");
    assert!(out.contains("cannot listen on"), "{out}");
    assert!(
        !dir.path().join("closer.db").exists(),
        "the database was opened:\n{out}"
    );
}
