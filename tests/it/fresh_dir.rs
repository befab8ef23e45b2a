//! The quick start as an operator runs it: the real binary, started in a
//! fresh, empty directory with only the variables the README and
//! docs/configuration.md name, and every path left at its default — the
//! SQLite file `closer.db` and the data directory `closer-data`, both
//! relative. A labelled issue must go all the way to a verified close.
//!
//! Every other test passes absolute paths; this one crosses the seam where
//! a relative `data_dir` made `git worktree add` (run inside the mirror)
//! put the worktree under the mirror, so that every run failed at its first
//! step. A second story configures Claude Code exactly as docs/agents.md
//! tells an operator to (the real tool on `PATH`, against a scripted model
//! server) and expects the same verified close.

use std::process::Stdio;
use std::time::{Duration, Instant};

use closer::model::IssueNumber;
use secrecy::ExposeSecret;
use serde_json::json;
use tokio::process::Command;

use closer::model::RepoName;

use crate::support::SpawnApart;
use crate::support::agent_tools::{CALC_PY, FIXED_CALC_PY, PY_CONFIG, TEST_CALC_PY};
use crate::support::client;
use crate::support::fake_github::FakeGitHub;
use crate::support::fake_github::state::FakeUser;
use crate::support::fake_llm::{FakeLlm, Reply};
use crate::support::fake_models::{FakeModel, Turn, Wire};
use crate::support::git::Origin;
use crate::support::process::free_port;
use crate::support::story::{CALC, CONFIG, RUN_TESTS, TEST_EXISTING};

const SECRET: &str = "fresh-dir secret";
const INSTALLATION: i64 = 91;
const REPO: &str = "octo/fresh";

/// The agent: the fix, with the test that reproduces the bug.
fn agent_script() -> String {
    "#!/bin/sh\ncat > tests/add.sh <<'T'\nr=$(. ./calc.sh; add 2 3)\n[ \"$r\" = 5 ]\nT\n\
         cat > calc.sh <<'T'\nadd() { echo $(( $1 + $2 )); }\nT\n\
         echo '{\"summary\": \"Fixed add, with a regression test.\"}'\n"
        .to_owned()
}

/// The binary, started in `fresh` with `closer.toml` (already written
/// there) and only the README's variables plus `extra`; its log in `log`.
fn start_closer(
    fresh: &std::path::Path,
    log: &std::path::Path,
    github: &FakeGitHub,
    llm: &FakeLlm,
    extra: &[(&str, String)],
) -> (tokio::process::Child, String) {
    let bind = format!("127.0.0.1:{}", free_port());
    // The log goes to a file (a pipe nobody reads could fill and stall it).
    let log = std::fs::File::create(log).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_closer"))
        .current_dir(fresh)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("RUST_LOG", "info")
        .env("GITHUB_WEBHOOK_SECRET", SECRET)
        .env("GITHUB_APP_ID", github.app_id().to_string())
        .env(
            "GITHUB_PRIVATE_KEY",
            github.private_key_pem().expose_secret(),
        )
        .env("GITHUB_API_URL", github.url())
        .env("CLOSER_BIND", &bind)
        .env("CLOSER_LLM_PROVIDER", "openai")
        .env("CLOSER_LLM_BASE_URL", llm.openai_url())
        .env("CLOSER_LLM_API_KEY", "sk-test")
        .env("CLOSER_LLM_MODEL", "test-model")
        .envs(extra.iter().map(|(k, v)| (*k, v.as_str())))
        .args(["--config", "closer.toml", "serve"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log))
        .kill_on_drop(true)
        .spawn_apart()
        .expect("closer starts");
    (child, format!("http://{bind}"))
}

/// The App installed on a repository holding `files` and `config`, a
/// maintainer, and the LLM's one answer: done.
async fn installed(
    files: &[(&str, &str)],
    config: &str,
) -> (FakeGitHub, RepoName, Origin, FakeLlm) {
    let github = FakeGitHub::start().await;
    github.add_installation(INSTALLATION, "octo");
    let repo = github.add_repo(INSTALLATION, REPO);
    let origin = Origin::with_files(files);
    github.set_clone_url(&repo, &origin.url);
    github.set_file(&repo, "main", ".github/closer.yml", config);
    github.set_permission(&repo, "maria", "write");
    let llm = FakeLlm::start().await;
    llm.push([Reply::closer(true, 0.95, &[])]);
    (github, repo, origin, llm)
}

/// Opens and labels a bug, delivers it, and waits for the verified close.
async fn bug_is_closed(
    url: &str,
    github: &FakeGitHub,
    repo: &RepoName,
    origin: &Origin,
    log: &std::path::Path,
) -> IssueNumber {
    let number = github.open_issue(repo, "maria", "add subtracts", "`add 2 3` prints -1.");
    for label in ["closer", "type:bug"] {
        github.label_issue(repo, number, label);
    }
    deliver_opened(url, github, repo, number, &origin.url).await;
    if !wait_closed(github, repo, number, Duration::from_secs(90)).await {
        let log = std::fs::read_to_string(log).unwrap_or_default();
        panic!("the issue was not closed within 90 s; closer said:\n{log}");
    }
    let issue = github.issue(repo, number);
    assert_eq!(issue.state_reason.as_deref(), Some("completed"));
    assert!(
        issue.labels.contains(&"phase:complete".to_owned()),
        "{:?}",
        issue.labels
    );
    let pulls = github.pulls(repo);
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0].head, format!("closer/issue-{}", number.0));
    let status: Vec<_> = github
        .comments(repo, number)
        .into_iter()
        .filter(|c| c.body.starts_with("<!-- closer:run="))
        .collect();
    assert_eq!(status.len(), 1, "one status comment");
    assert!(
        status[0].body.contains("closer: done"),
        "{}",
        status[0].body
    );
    number
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_started_in_an_empty_directory_with_the_defaults_closes_an_issue() {
    let files = [
        ("run_tests.sh", RUN_TESTS),
        ("calc.sh", CALC),
        ("tests/existing.sh", TEST_EXISTING),
    ];
    let (github, repo, origin, llm) = installed(&files, CONFIG).await;
    let fresh = tempfile::tempdir().expect("a fresh directory");
    let tools = tempfile::tempdir().expect("the agent's directory");
    // An executable of its own: the sandbox shows the agent the directory
    // its program is installed in, and nothing else of the operator's.
    let agent = tools.path().join("bin/agent.sh");
    std::fs::create_dir_all(agent.parent().unwrap()).unwrap();
    crate::support::write_executable(&agent, &agent_script());
    std::fs::write(
        fresh.path().join("closer.toml"),
        format!(
            "[agents.default]\nadapter = \"command\"\ncommand = [\"{}\"]\ntimeout_secs = 60\n",
            agent.display()
        ),
    )
    .unwrap();
    let log = tools.path().join("closer.log");
    let (mut child, url) = start_closer(fresh.path(), &log, &github, &llm, &[]);
    wait_ready(&url).await;
    bug_is_closed(&url, &github, &repo, &origin, &log).await;

    // The defaults, relative to the start directory, and nothing under the
    // mirror (where the relative data directory used to put the worktree).
    let data = fresh.path().join("closer-data");
    assert!(fresh.path().join("closer.db").is_file());
    // closer's alone: a file a sandbox left there is no other user's.
    let mode = std::os::unix::fs::PermissionsExt::mode(&data.metadata().unwrap().permissions());
    assert_eq!(mode & 0o777, 0o700, "the data directory's mode");
    // The database holds private issues and prompts: its owner's alone,
    // and SQLite gives its journal files the same mode.
    for file in ["closer.db", "closer.db-wal", "closer.db-shm"] {
        let meta = fresh.path().join(file).metadata().unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions());
        assert_eq!(mode & 0o777, 0o600, "{file}'s mode");
    }
    let mirrors = data.join("sandbox").join("mirrors");
    assert!(mirrors.is_dir(), "{}", mirrors.display());
    for mirror in std::fs::read_dir(&mirrors).unwrap().flatten() {
        assert!(
            !mirror.path().join("closer-data").exists(),
            "a worktree under the mirror {}",
            mirror.path().display()
        );
    }
    let _ = child.start_kill();
}

/// docs/agents.md's Claude Code entry, word for word: the tool on `PATH`,
/// the key passed by name, the endpoint as a fixed variable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_with_claude_code_configured_as_docs_agents_md_says_closes_an_issue() {
    let _slot = crate::support::agent_tools::cli_slot().await;
    let Some(claude) = crate::support::agent_tools::tool("claude") else {
        return;
    };
    let files = [("calc.py", CALC_PY), ("test_calc.py", TEST_CALC_PY)];
    let (github, repo, origin, llm) = installed(&files, PY_CONFIG).await;
    let model = FakeModel::start(
        Wire::Anthropic,
        vec![
            Turn::tool(
                "Write",
                json!({"file_path": "calc.py", "content": FIXED_CALC_PY}),
            ),
            Turn::text("Fixed add()."),
        ],
    )
    .await;
    let fresh = tempfile::tempdir().expect("a fresh directory");
    std::fs::write(
        fresh.path().join("closer.toml"),
        format!(
            "[agents.default]\nadapter = \"claude-code\"\npass_env = [\"ANTHROPIC_API_KEY\"]\n\
             env = {{ ANTHROPIC_BASE_URL = \"{}\" }}\n",
            model.base_url()
        ),
    )
    .unwrap();
    let bin = claude
        .parent()
        .expect("the tools' bin directory")
        .display()
        .to_string();
    let path = format!("{bin}:{}", std::env::var("PATH").unwrap_or_default());
    let extra = [
        ("PATH", path),
        ("ANTHROPIC_API_KEY", "sk-ant-test".to_owned()),
    ];
    let logs = tempfile::tempdir().unwrap();
    let log = logs.path().join("closer.log");
    let (mut child, url) = start_closer(fresh.path(), &log, &github, &llm, &extra);
    wait_ready(&url).await;
    bug_is_closed(&url, &github, &repo, &origin, &log).await;
    assert!(
        model.served() >= 2,
        "Claude Code asked the model {} times",
        model.served()
    );
    let _ = child.start_kill();
}

async fn wait_ready(url: &str) {
    let http = client();
    for _ in 0..200 {
        let ready = http.get(format!("{url}/readyz")).send().await;
        if ready.is_ok_and(|r| r.status().is_success()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("closer at {url} did not become ready in 10 s");
}

/// Posts a signed `issues.opened`, as GitHub would.
async fn deliver_opened(
    url: &str,
    github: &FakeGitHub,
    repo: &closer::model::RepoName,
    number: IssueNumber,
    clone_url: &str,
) {
    let issue = github.issue(repo, number);
    let maria = FakeUser::user("maria");
    let user = json!({"login": maria.login, "id": maria.id(), "type": "User"});
    let payload = json!({
        "action": "opened",
        "issue": {
            "number": issue.number, "title": issue.title, "body": issue.body, "user": user,
            "labels": issue.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
            "state": issue.state,
        },
        "sender": user,
        "installation": {"id": INSTALLATION},
        "repository": {"full_name": REPO, "clone_url": clone_url, "default_branch": "main", "private": false},
    });
    let body = serde_json::to_vec(&payload).unwrap();
    crate::support::deliver_signed(url, SECRET, "issues", body).await;
}

async fn wait_closed(
    github: &FakeGitHub,
    repo: &closer::model::RepoName,
    number: IssueNumber,
    limit: Duration,
) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if github.issue(repo, number).state == "closed" {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}
