//! The command line as a maintainer or operator uses it.

use crate::support::SpawnApart;
use crate::support::db::TestDb;
use crate::support::process::{closer_command, free_port};

async fn run(args: &[&str], database_url: &str) -> (Option<i32>, String) {
    let output = closer_command(database_url, &[])
        .args(args)
        .output_apart()
        .await
        .expect("closer runs");
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.code(), text)
}

#[tokio::test]
async fn check_config_accepts_a_valid_file_with_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("closer.yml");
    std::fs::write(
        &file,
        "dod:\n  - { type: tests_pass, command: \"cargo test\" }\n",
    )
    .unwrap();
    let (code, out) = run(
        &["check-config", file.to_str().unwrap()],
        "sqlite://unused.db",
    )
    .await;
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains(": ok: agent default, completion issue"),
        "{out}"
    );
}

#[tokio::test]
async fn check_config_names_the_line_of_the_problem_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("closer.yml");
    std::fs::write(&file, "completion:\n  type: issue\n  max_iterations: 0\n").unwrap();
    let (code, out) = run(
        &["check-config", file.to_str().unwrap()],
        "sqlite://unused.db",
    )
    .await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("closer.yml:3:19: must be from 1 to 1000, got 0"),
        "{out}"
    );
}

#[tokio::test]
async fn check_config_checks_the_agent_against_the_operators_list() {
    let dir = tempfile::tempdir().unwrap();
    let server = dir.path().join("closer.toml");
    std::fs::write(&server, "[agents.claude]\nadapter = \"claude-code\"\n").unwrap();
    let file = dir.path().join("closer.yml");
    std::fs::write(&file, "agent: codex\n").unwrap();
    let args = [
        "--config",
        server.to_str().unwrap(),
        "check-config",
        file.to_str().unwrap(),
    ];
    let (code, out) = run(&args, "sqlite://unused.db").await;
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("unknown agent `codex`, expected one of: claude"),
        "{out}"
    );
}

/// A maintainer checks the file with the operator's `closer.toml` away
/// from the server: the App key file it names is not there, and their
/// shell's `DATABASE_URL` is another program's. Only the agents' names are
/// read. Before, the server's whole configuration was loaded first, and
/// either made check-config fail without checking the file.
#[tokio::test]
async fn check_config_needs_only_the_agents_of_the_operators_file() {
    let dir = tempfile::tempdir().unwrap();
    let server = dir.path().join("closer.toml");
    std::fs::write(
        &server,
        "[github]\nprivate_key_path = \"/nowhere/closer.pem\"\n\n\
         [agents.claude]\nadapter = \"claude-code\"\n",
    )
    .unwrap();
    let file = dir.path().join("closer.yml");
    std::fs::write(&file, "agent: claude\n").unwrap();
    let config = server.to_str().unwrap();
    let args = ["--config", config, "check-config", file.to_str().unwrap()];
    let (code, out) = run(&args, "mysql://somebody@elsewhere/db").await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("ok: agent claude"), "{out}");
    // The control: the same settings do not load as the server's.
    let (code, out) = run(
        &["--config", config, "migrate"],
        "mysql://somebody@elsewhere/db",
    )
    .await;
    assert_eq!(code, Some(1), "{out}");
}

#[tokio::test]
async fn migrate_applies_the_schema_once() {
    let db = TestDb::new("cli_migrate").await;
    let (code, out) = run(&["migrate"], &db.url).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("applied now"), "{out}");
    let (code, out) = run(&["migrate"], &db.url).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("(0 applied now)"), "{out}");
}

#[tokio::test]
async fn a_bad_server_config_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = dir.path().join("closer.toml");
    std::fs::write(&server, "bindd = \"x\"\n").unwrap();
    let (code, out) = run(
        &["--config", server.to_str().unwrap(), "migrate"],
        "sqlite://unused.db",
    )
    .await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("invalid configuration file"), "{out}");
    assert!(out.contains("bindd"), "{out}");
}

#[tokio::test]
async fn replay_prints_the_writes_a_trigger_would_make_and_sends_none() {
    use crate::support::fake_github::FakeGitHub;
    use secrecy::ExposeSecret;
    let github = FakeGitHub::start().await;
    github.add_installation(7, "acme");
    let repo = github.add_repo(7, "acme/widgets");
    github.set_permission(&repo, "maria", "write");
    let number = github.open_issue(&repo, "maria", "Fix the parser", "It breaks on tabs.");
    let user = serde_json::json!({"login": "maria", "id": 5, "type": "User"});
    let payload = serde_json::json!({
        "action": "labeled",
        "label": {"name": "closer"},
        "issue": {"number": number.0, "title": "Fix the parser", "body": "It breaks on tabs.",
                  "user": user, "labels": [{"name": "closer"}], "state": "open"},
        "repository": {"full_name": "acme/widgets", "default_branch": "main", "private": false},
        "installation": {"id": 7},
        "sender": user,
    });
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("labeled.json");
    std::fs::write(&file, payload.to_string()).unwrap();
    let app_id = github.app_id().to_string();
    let key = github.private_key_pem().expose_secret().to_owned();
    let output = closer_command(
        "sqlite://unused.db",
        &[
            ("GITHUB_API_URL", &github.url()),
            ("GITHUB_APP_ID", &app_id),
            ("GITHUB_PRIVATE_KEY", &key),
        ],
    )
    .args(["replay", file.to_str().unwrap(), "--event", "issues"])
    .output_apart()
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let comments = format!("would POST /repos/acme/widgets/issues/{number}/comments");
    assert!(stdout.contains(&comments), "{stdout}");
    assert!(
        stdout.contains("<!-- closer:run="),
        "the status comment is printed: {stdout}"
    );
    assert!(
        github
            .requests_to("POST", "/repos/acme/widgets/issues")
            .is_empty()
    );
    assert!(
        github.comments(&repo, number).is_empty(),
        "nothing was posted"
    );
}

#[tokio::test]
async fn replay_refuses_a_file_that_is_not_json() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.json");
    std::fs::write(&file, "{not json").unwrap();
    let (code, out) = run(
        &["replay", file.to_str().unwrap(), "--event", "issues"],
        "sqlite://unused.db",
    )
    .await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("is not JSON"), "{out}");
}

/// `CLOSER_DRY_RUN` as operators write it: `1` turns dry-run on (serve
/// starts without App credentials), `0` leaves it off (serve stops, asking
/// for them).
#[tokio::test]
async fn dry_run_from_the_environment_takes_1_and_0() {
    let start = |value: &str, dir: &std::path::Path| {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_closer"))
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("GITHUB_WEBHOOK_SECRET", "s")
            .env("CLOSER_ROLE", "intake")
            .env("CLOSER_DRY_RUN", value)
            .env("CLOSER_BIND", format!("127.0.0.1:{}", free_port()))
            .arg("serve")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn_apart()
            .expect("closer starts")
    };
    let dir = tempfile::tempdir().unwrap();
    let mut on = start("1", dir.path());
    // Dry-run on: still serving after the database is open and the
    // credentials were (not) checked.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !dir.path().join("closer.db").exists() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(on.try_wait().unwrap(), None, "CLOSER_DRY_RUN=1 serves");
    on.kill().await.unwrap();

    let off = start("0", dir.path()).wait_with_output().await.unwrap();
    let err = String::from_utf8_lossy(&off.stderr);
    assert_eq!(off.status.code(), Some(1), "{err}");
    assert!(
        err.contains("GITHUB_APP_ID and GITHUB_PRIVATE_KEY"),
        "{err}"
    );
}
