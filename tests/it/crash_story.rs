//! kill -9 during every step of a run (issue 13): the shipped binary, on
//! the test's database, against the fake GitHub and the fake LLM, is
//! killed at a moment inside each step — the trigger, `start`, `iterate`
//! (while the agent works, and while the LLM judges), the question,
//! `resume`, `finish` (the pull request, the close) — and started again.
//! Each kill lands after GitHub carried a write out and before closer saw
//! the answer, the worst moment for a duplicate. The run completes with one
//! status comment, one question, one pull request, the issue closed, and
//! the agent never working twice on an iteration it finished.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::stories::fix_add;
use crate::support::db::TestDb;
use crate::support::fake_github::{FakeGitHub, Fault};
use crate::support::fake_llm::{FakeLlm, Reply};
use crate::support::operated::{Closer, calc_repository, signals_dir};

const INSTALLATION: i64 = 93;
const REPO: &str = "octo/crash";
const ISSUE: &str = "/repos/octo/crash/issues/1";

/// The write that will be carried out and never answered.
type Write<'a> = (&'a str, &'a str, &'a str);

fn hang_after_applying(github: &FakeGitHub, (method, path, text): Write) {
    github.inject(
        Fault::HangAfterApplying(Duration::from_secs(120))
            .times(1)
            .method(method)
            .path(path)
            .body(text),
    );
}

/// Once `write` arrives, closer is killed and started again.
async fn kill_during(closer: &mut Closer, github: &FakeGitHub, (method, path, text): Write<'_>) {
    let what = format!("{method} {path} carrying {text:?}");
    let arrived = || {
        github
            .requests_to(method, path)
            .iter()
            .any(|r| r.body.contains(text))
    };
    closer.wait_for(&what, arrived).await;
    restart(closer).await;
}

async fn restart(closer: &mut Closer) {
    closer.kill_9().await;
    closer.start();
    closer.ready().await;
}

/// Iteration 1: the first attempt says it started and hangs (closer is
/// killed under it); the next asks a question. Iteration 2 fixes the bug,
/// counting its runs.
fn agent_script(dir: &Path) -> String {
    let (first, go, worked) = (dir.join("first"), dir.join("go"), dir.join("worked-2"));
    format!(
        "#!/bin/sh\ncase \"$CLOSER_ITERATION\" in\n\
         1) if [ ! -f '{first}' ]; then touch '{first}'; \
            while [ ! -f '{go}' ]; do sleep 0.05; done; exit 1; fi\n\
            echo '{{\"summary\": \"A decision first.\", \"questions\": [\"May add take negative numbers?\"]}}' ;;\n\
         *) echo run >> '{worked}'\n{} ;;\nesac\n",
        fix_add(),
        first = first.display(),
        go = go.display(),
        worked = worked.display(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_every_step_of_a_run_and_it_completes_once() {
    let (github, repo, origin) = calc_repository(INSTALLATION, REPO).await;
    let llm = FakeLlm::start().await;
    // The first judgment of iteration 2 is cut short by the kill.
    llm.push([
        Reply::Slow(
            Duration::from_secs(120),
            Box::new(Reply::closer(true, 0.95, &[])),
        ),
        Reply::closer(true, 0.95, &[]),
    ]);
    let db = TestDb::new("crash").await;
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.sh");
    let signals = signals_dir(dir.path());
    std::fs::write(&agent, agent_script(&signals)).unwrap();
    std::fs::write(
        dir.path().join("closer.toml"),
        format!(
            "workers = 2\ndata_dir = \"{}\"\nprogress_interval_secs = 0\n[queue]\nlease_secs = 5\n\
             [agents.default]\nadapter = \"command\"\ncommand = [\"sh\", \"{}\"]\ntimeout_secs = 60\n\
             [sandbox]\nread_write = [\"{}\"]\n",
            dir.path().join("data").display(),
            agent.display(),
            // The agent's script and its signals live here; closer still
            // hides its data directory and config inside it.
            dir.path().display()
        ),
    )
    .unwrap();
    let mut closer = Closer::new(dir.path(), &db, &github, &llm, &origin, INSTALLATION);
    closer.start();
    closer.ready().await;

    let n = github.open_issue(&repo, "maria", "add subtracts", "`add 2 3` prints -1.");
    for label in ["closer", "type:bug"] {
        github.label_issue(&repo, n, label);
    }
    let comments = format!("{ISSUE}/comments");
    let labels = format!("{ISSUE}/labels");
    let awaiting = format!("{labels}/awaiting-response");
    let status = ("POST", comments.as_str(), "closer:run=");
    let phase = ("POST", labels.as_str(), "phase:preparation");
    let question = ("POST", comments.as_str(), "needs your input");
    let unlabel = ("DELETE", awaiting.as_str(), "");
    let pull = ("POST", "/repos/octo/crash/pulls", "closer/issue-1");
    let close = ("PATCH", ISSUE, "\"closed\"");
    for write in [status, phase, question, unlabel, pull, close] {
        hang_after_applying(&github, write);
    }

    // The trigger: the status comment is made, its answer lost.
    closer
        .deliver(&github, &repo, n, "issues", json!({"action": "opened"}))
        .await;
    kill_during(&mut closer, &github, status).await;
    // `start`: the phase label.
    kill_during(&mut closer, &github, phase).await;
    // `iterate`: the agent at work.
    let first = signals.join("first");
    closer
        .wait_for("the agent at work", || first.exists())
        .await;
    restart(&mut closer).await;
    std::fs::write(signals.join("go"), "").unwrap();
    // The question.
    kill_during(&mut closer, &github, question).await;
    closer
        .wait_for("awaiting the answer", || {
            github
                .labels(&repo, n)
                .contains(&"awaiting-response".to_owned())
        })
        .await;
    // `resume`: the maintainer answers; the label comes off.
    closer
        .answer(&github, &repo, n, "Yes, negative numbers too.")
        .await;
    kill_during(&mut closer, &github, unlabel).await;
    // `iterate` 2: the judgment.
    closer
        .wait_for("the judgment", || !llm.requests().is_empty())
        .await;
    restart(&mut closer).await;
    // `finish`: the pull request, then the close.
    kill_during(&mut closer, &github, pull).await;
    kill_during(&mut closer, &github, close).await;

    closer.closed_once(&github, &repo, n, &db).await;
    let worked = std::fs::read_to_string(signals.join("worked-2")).unwrap();
    assert_eq!(worked.lines().count(), 1, "iteration 2's agent worked once");
    assert!(closer.starts >= 9, "killed in every step");
    closer.kill_9().await;
}
