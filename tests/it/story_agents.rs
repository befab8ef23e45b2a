//! How closer works with agents as they are: an agent that never commits
//! (closer commits for it, without build output), and an agent whose
//! failure is reported by name.

use closer::model::RunState;

use crate::support::fake_llm::Reply;
use crate::support::git::git;
use crate::support::story::Story;

const CALC_PY: &str = "def add(a, b):\n    return a - b\n";
const TEST_CALC_PY: &str = "import unittest\n\nfrom calc import add\n\n\nclass CalcTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";
/// The goal also leaves a report file behind, as coverage tools do.
const CONFIG: &str = "dod:\n  - { type: tests_pass, command: \"python3 -m unittest -v && echo ok > goal-report.txt\" }\n";

/// The files of a commit in the origin.
fn tree(s: &Story, commit: &str) -> Vec<String> {
    git(&s.origin.bare, &["ls-tree", "-r", "--name-only", commit])
        .lines()
        .map(str::to_owned)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_that_never_commits_has_its_work_committed_without_build_output() {
    // No .gitignore: nothing in the repository keeps __pycache__ out.
    let files = [("calc.py", CALC_PY), ("test_calc.py", TEST_CALC_PY)];
    let mut s = Story::start_with_files("agents-commit", Some(CONFIG), &files).await;
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    s.agent_step(
        1,
        "printf 'def add(a, b):\\n    return a + b\\n' > calc.py\n\
         python3 -c 'import calc' && ls __pycache__ >/dev/null\n\
         printf 'Fixed add: it added the negation.\\n\\nDetails follow.\\n'\n",
    );
    let n = s
        .open_issue("add() is wrong", "add subtracts", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    let head = s
        .origin
        .branch_head("closer/issue-1")
        .expect("the branch was pushed");
    let files = tree(&s, &head);
    assert!(files.contains(&"calc.py".to_owned()), "{files:?}");
    assert!(
        !files
            .iter()
            .any(|f| f.contains("__pycache__") || f == "goal-report.txt"),
        "build and goal output landed on the branch: {files:?}"
    );
    let shown = git(&s.origin.bare, &["show", "-s", "--format=%an|%s", &head]);
    assert_eq!(shown.trim(), "closer|Fixed add: it added the negation.");
    let calc = git(&s.origin.bare, &["show", &format!("{head}:calc.py")]);
    assert!(calc.contains("a + b"), "{calc}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_that_cannot_authenticate_fails_the_run_at_once_saying_why() {
    let mut s = Story::start("agents-auth", Some(crate::support::story::CONFIG)).await;
    for n in 1..=3 {
        s.agent_step(
            n,
            "echo 'Error: Invalid API key · Please run /login' >&2\nexit 1\n",
        );
    }
    let n = s
        .open_issue("add subtracts", "fix add", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Failed, "{}", s.journal().await);
    assert_eq!(run.iteration, 1, "no iteration was burnt after the first");
    let why = "the agent could not authenticate with its model provider: \
               Error: Invalid API key · Please run /login";
    let diagnosis = s
        .bot_comments(n)
        .into_iter()
        .find(|c| c.body.contains("could not finish"))
        .expect("a diagnosis");
    assert!(diagnosis.body.contains(why), "{}", diagnosis.body);
    assert!(
        s.status_comment(n).body.contains(why),
        "{}",
        s.status_comment(n).body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_that_exits_non_zero_is_reported_with_its_last_words() {
    let config = format!(
        "{}completion:\n  max_iterations: 2\n",
        crate::support::story::CONFIG
    );
    let mut s = Story::start("agents-exit", Some(&config)).await;
    s.llm.push([
        Reply::closer(false, 0.9, &["fix add"]),
        Reply::closer(false, 0.9, &["fix add"]),
    ]);
    s.agent_step(
        1,
        "echo 'starting'\necho 'fatal: the parser crashed on calc.sh' >&2\nexit 2\n",
    );
    s.agent_step(2, "exit 0\n");
    let n = s
        .open_issue("add subtracts", "fix add", &["closer", "type:bug"])
        .await;
    s.idle().await;

    assert_eq!(s.run(n).await.expect("a run").iteration, 2);
    let prompt = s.prompt(2);
    assert!(
        prompt.contains("the agent exited with status 2: fatal: the parser crashed on calc.sh"),
        "{prompt}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_tool_that_is_not_installed_fails_the_run_at_once_saying_so() {
    let mut s = Story::start("agents-missing", Some(crate::support::story::CONFIG)).await;
    s.kill_workers();
    s.agent = Some(crate::support::agent_tools::agent(
        closer::config::agents::AdapterKind::ClaudeCode,
        "/nonexistent/bin/claude".into(),
        &[],
        Default::default(),
    ));
    s.spawn_workers();
    let n = s
        .open_issue("add subtracts", "fix add", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Failed, "{}", s.journal().await);
    assert_eq!(run.iteration, 1, "no iteration was burnt after the first");
    let status = s.status_comment(n).body;
    assert!(
        status.contains("the agent's tool `/nonexistent/bin/claude` could not be started"),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dry_run_pushes_nothing_and_records_the_push_it_did_not_make() {
    let files = [("calc.py", CALC_PY), ("test_calc.py", TEST_CALC_PY)];
    let mut s = Story::start_with_files("agents-dry-run", Some(CONFIG), &files).await;
    s.kill_workers();
    let recorder = std::sync::Arc::new(closer::github::MemoryRecorder::new());
    s.dry_run = Some(recorder.clone());
    s.spawn_workers();
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    s.agent_step(
        1,
        "printf 'def add(a, b):\\n    return a + b\\n' > calc.py\necho 'Fixed add.'\n",
    );
    s.open_issue("add() is wrong", "add subtracts", &["closer", "type:bug"])
        .await;
    s.idle().await;

    assert_eq!(
        s.origin.branch_head("closer/issue-1"),
        None,
        "a dry run pushed"
    );
    let pushes: Vec<_> = recorder
        .writes()
        .into_iter()
        .filter(|w| w.method == "GIT-PUSH")
        .collect();
    assert_eq!(pushes.len(), 1, "{:#?}", recorder.writes());
    assert_eq!(
        pushes[0].path,
        "/repos/octo/calc/git/refs/heads/closer/issue-1"
    );
    assert!(s.github.writes().is_empty(), "{:#?}", s.github.writes());
}

/// Where no sandbox stops it (here unconfined, as `[sandbox] mode =
/// "none"` runs agents; Landlock below ABI 6 is the same), the agent
/// leaves a daemon and kills the reaper that would have killed it
/// (the leader of the session closer starts each agent in).
/// The run fails at once, saying so, instead of verifying a worktree the
/// daemon may still change; no iteration follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_that_kills_its_reaper_fails_the_run_at_once_saying_why() {
    let mut s = Story::start("agents-escape", Some(crate::support::story::CONFIG)).await;
    s.kill_workers();
    s.confinement = Some(closer::agent::confine::Confinement::unconfined());
    s.spawn_workers();
    let marker = format!("603.{}", std::process::id());
    for n in 1..=3 {
        s.agent_step(
            n,
            &format!(
                "setsid sleep {marker} >/dev/null 2>&1 < /dev/null &\n\
                 kill -9 \"$(awk '{{print $6}}' /proc/$$/stat)\"\n\
                 sleep 1\necho 'fixed add'\n"
            ),
        );
    }
    let n = s
        .open_issue("add subtracts", "fix add", &["closer", "type:bug"])
        .await;
    s.idle().await;
    let daemon = crate::support::process::process_with_argument(&marker);
    if let Some(pid) = daemon {
        // SAFETY: kill(2) on the daemon the agent left.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }

    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Failed, "{}", s.journal().await);
    assert_eq!(run.iteration, 1, "no iteration was burnt after the first");
    let why = "the agent killed the process closer watches it with";
    let status = s.status_comment(n).body;
    assert!(status.contains(why), "{status}");
    assert!(
        daemon.is_some(),
        "the daemon outlived the agent, unconfined"
    );
}
