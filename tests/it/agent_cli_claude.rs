//! Claude Code itself (the pinned npm release) working issues through
//! closer, against a scripted Anthropic Messages server: the documented
//! configuration fixes a bug end to end, a second iteration resumes the
//! session, a refused key fails the run at once by name, a denied
//! permission is named, and a daemon the agent leaves behind with `setsid`
//! dies at the deadline.

use std::collections::BTreeMap;

use closer::config::agents::{AdapterKind, AgentConfig};
use closer::model::RunState;
use serde_json::json;

use crate::support::agent_tools::{
    FIXED_CALC_PY, ONE_ITERATION, PY_CONFIG, agent, python_story, run_homes, tool,
};
use crate::support::fake_llm::Reply;
use crate::support::fake_models::{CACHE_READ, CACHE_WRITE, FakeModel, INPUT, OUTPUT, Turn, Wire};
use crate::support::git::git;

/// Claude Code pointed at `model`, as docs/agents.md tells an operator.
fn claude(
    model: &FakeModel,
    config_files: BTreeMap<String, std::path::PathBuf>,
) -> Option<AgentConfig> {
    let env = [
        ("ANTHROPIC_BASE_URL", model.base_url()),
        ("ANTHROPIC_API_KEY", "sk-ant-test".to_owned()),
    ];
    Some(agent(
        AdapterKind::ClaudeCode,
        tool("claude")?,
        &env,
        config_files,
    ))
}

fn write_fix() -> Turn {
    Turn::tool(
        "Write",
        json!({"file_path": "calc.py", "content": FIXED_CALC_PY}),
    )
}

fn run_tests() -> Turn {
    Turn::tool(
        "Bash",
        json!({"command": "python3 -m unittest -q", "description": "Run the tests"}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claude_code_fixes_the_bug_and_closer_commits_verifies_and_closes() {
    let model = FakeModel::start(
        Wire::Anthropic,
        vec![
            write_fix(),
            run_tests(),
            Turn::text("Fixed add(): it subtracted."),
        ],
    )
    .await;
    let Some(agent) = claude(&model, BTreeMap::new()) else {
        return;
    };
    let mut s = python_story("claude-fix", agent, PY_CONFIG).await;
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add() is wrong", "add subtracts", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    let head = s.origin.branch_head("closer/issue-1").expect("pushed");
    let shown = git(&s.origin.bare, &["show", "-s", "--format=%an|%s", &head]);
    assert_eq!(shown.trim(), "closer|Fixed add(): it subtracted.");
    // Every kind of token the tool reported counts: three model calls.
    let per_call = INPUT + CACHE_WRITE + CACHE_READ + OUTPUT;
    assert!(run.tokens_used >= 3 * per_call, "{}", run.tokens_used);
    assert!(
        run.tokens_used < 3 * per_call + 2_000,
        "{}",
        run.tokens_used
    );
    let status = s.status_comment(n).body;
    assert!(status.contains("closer: done"), "{status}");
    let shown = run
        .tokens_used
        .to_string()
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join(",");
    assert!(
        status.contains(&format!("Usage so far: {shown} tokens")),
        "{status}"
    );
    // The tool prices its calls itself; that cost counts too.
    assert!(run.cost_usd > 0.0, "{}", run.cost_usd);
    // The tool's state stayed in the run's own HOME.
    let homes: Vec<_> = std::fs::read_dir(run_homes(&s))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(homes.len(), 1);
    assert!(homes[0].path().join(".claude").is_dir());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_iteration_resumes_the_claude_code_session() {
    let model = FakeModel::start(
        Wire::Anthropic,
        vec![
            write_fix(),
            Turn::text("Fixed add()."),
            Turn::text("Checked negatives too."),
        ],
    )
    .await;
    let Some(agent) = claude(&model, BTreeMap::new()) else {
        return;
    };
    let mut s = python_story("claude-resume", agent, PY_CONFIG).await;
    s.llm.push([
        Reply::closer(false, 0.9, &["check negative numbers"]),
        Reply::closer(true, 0.95, &[]),
    ]);
    let n = s
        .open_issue("add() is wrong", "add subtracts", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert_eq!(run.iteration, 2);
    let main = model.main_requests();
    let second = main.last().expect("the second iteration asked the model");
    let messages = second["messages"].as_array().expect("messages");
    let earlier = serde_json::to_string(&messages[0]).unwrap();
    assert!(
        messages.len() > 1 && earlier.contains("add subtracts"),
        "the second iteration did not continue the first one's conversation: {} messages",
        messages.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_key_fails_the_run_at_once_and_says_so() {
    let model = FakeModel::start(Wire::Anthropic, vec![]).await;
    model.then_always(Turn::unauthorized());
    let Some(agent) = claude(&model, BTreeMap::new()) else {
        return;
    };
    let mut s = python_story("claude-401", agent, PY_CONFIG).await;
    let n = s
        .open_issue("add() is wrong", "add subtracts", &["closer", "type:bug"])
        .await;
    let started = std::time::Instant::now();
    s.idle().await;

    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Failed, "{}", s.journal().await);
    assert_eq!(run.iteration, 1);
    // The tool retries a refused key for minutes; closer stops it at once.
    assert!(started.elapsed().as_secs() < 60, "{:?}", started.elapsed());
    let status = s.status_comment(n).body;
    assert!(
        status.contains(
            "the agent could not authenticate with its model provider: the model API answered 401"
        ),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_permission_the_operator_denies_is_named_in_the_status() {
    let model = FakeModel::start(
        Wire::Anthropic,
        vec![
            Turn::tool(
                "Bash",
                json!({"command": "curl -s http://127.0.0.1:9/", "description": "fetch"}),
            ),
            Turn::text("I could not fetch the page."),
        ],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let settings = dir.path().join("claude-settings.json");
    std::fs::write(&settings, r#"{"permissions": {"deny": ["Bash(curl:*)"]}}"#).unwrap();
    let files = BTreeMap::from([(".claude/settings.json".to_owned(), settings)]);
    let Some(agent) = claude(&model, files) else {
        return;
    };
    let mut s = python_story("claude-denied", agent, ONE_ITERATION).await;
    s.llm.push([Reply::closer(false, 0.9, &["fix add"])]);
    let n = s
        .open_issue("add() is wrong", "add subtracts", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let status = s.status_comment(n).body;
    assert!(
        status.contains(
            "**Agent:** the agent was denied permission to run `curl -s http://127.0.0.1:9/`"
        ),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_daemon_the_agent_leaves_with_setsid_dies_at_the_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("daemon.pid");
    let daemon = format!(
        "setsid sh -c 'echo $$ > {p}; exec sleep 300' > /dev/null 2>&1 & sleep 1; sleep 300",
        p = pidfile.display()
    );
    let model = FakeModel::start(
        Wire::Anthropic,
        vec![Turn::tool(
            "Bash",
            json!({"command": daemon, "description": "serve", "timeout": 600000}),
        )],
    )
    .await;
    let Some(mut agent) = claude(&model, BTreeMap::new()) else {
        return;
    };
    agent.timeout_secs = 10;
    let mut s = python_story("claude-setsid", agent, ONE_ITERATION).await;
    s.llm.push([Reply::closer(false, 0.9, &["fix add"])]);
    let n = s
        .open_issue("add() is wrong", "add subtracts", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let pid: i32 = std::fs::read_to_string(&pidfile)
        .expect("the daemon started")
        .trim()
        .parse()
        .unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let alive = !stat.is_empty()
        && !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z');
    if alive {
        // SAFETY: cleaning up the daemon this test caused.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    assert!(
        !alive,
        "the agent's setsid daemon outlived the iteration's deadline"
    );
    let status = s.status_comment(n).body;
    assert!(
        status.contains("the agent timed out after 10 s"),
        "{status}"
    );
}
