//! A custom completion handler is read from the run's base commit, never
//! from the worktree the agent writes: an agent that rewrites the handler
//! to always answer "complete" does not complete the run. The controls: the
//! agent's rewritten handler does answer "complete" when run (reading it
//! from the worktree would have completed the run), and a base commit whose
//! own handler answers "complete" completes the run the same way.
//!
//! The handler judges the commit, as the goals do: it runs in the checks'
//! clean checkout, not in the worktree where the agent may leave build
//! output beside its commit.

use std::process::{Command, Stdio};

use crate::support::OutputApart as _;
use crate::support::fake_llm::Reply;
use crate::support::git::git;
use crate::support::story::{CONFIG, RUN_TESTS, Story, TEST_EXISTING};

fn answer(complete: bool) -> String {
    format!(
        "#!/bin/sh\ncat >/dev/null\necho '{{\"complete\": {complete}, \"description\": \"handler said {complete}\"}}'\n"
    )
}

/// The stories' project, with `decide.sh` (executable) answering
/// `base_answers` as the handler.
async fn story(name: &str, base_answers: bool) -> Story {
    story_deciding(name, &answer(base_answers)).await
}

/// The stories' project, with `handler` as `decide.sh` (executable), and
/// `built.flag` ignored.
async fn story_deciding(name: &str, handler: &str) -> Story {
    let config =
        format!("{CONFIG}completion: {{ type: custom, handler: decide.sh, max_iterations: 2 }}\n");
    let files = [
        ("run_tests.sh", RUN_TESTS),
        ("calc.sh", "add() { echo $(( $1 + $2 )); }\n"),
        ("tests/existing.sh", TEST_EXISTING),
        ("decide.sh", handler),
        (".gitignore", "built.flag\n"),
    ];
    let s = Story::start_with_files(name, Some(&config), &files).await;
    let seed = s.origin.dir.path().join("seed");
    git(&seed, &["update-index", "--chmod=+x", "decide.sh"]);
    git(
        &seed,
        &["commit", "--quiet", "-m", "the handler is executable"],
    );
    git(
        &seed,
        &["push", "--quiet", s.origin.bare.to_str().unwrap(), "main"],
    );
    for _ in 0..4 {
        s.llm.push([Reply::closer(true, 0.95, &[])]);
    }
    s
}

/// The story's run, which must have failed at the iteration limit.
async fn ran_out(s: &Story, n: closer::model::IssueNumber) -> closer::model::Run {
    let run = s.run(n).await.expect("a run");
    assert_eq!(
        run.state,
        closer::model::RunState::Failed,
        "{}",
        s.journal().await
    );
    assert_eq!(run.iteration, 2, "the iteration limit, not a completion");
    run
}

/// The agent's step: rewrites the handler to say "complete" (closer
/// commits it) and keeps a copy of it next to the script.
fn rewrite_the_handler() -> String {
    format!(
        "cat > decide.sh <<'T'\n{}T\nchmod +x decide.sh\ncp decide.sh \"$(dirname \"$0\")/planted.sh\"\n\
         echo '{{\"summary\": \"Done, trust me.\"}}'\n",
        answer(true)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_that_rewrites_the_custom_handler_does_not_complete_the_run() {
    let mut s = story("handler-planted", false).await;
    s.agent_step(1, &rewrite_the_handler());
    s.agent_step(2, &rewrite_the_handler());
    let n = s
        .open_issue("add should add", "", &["closer", "type:feature"])
        .await;
    s.idle().await;

    ran_out(&s, n).await;
    assert_eq!(
        s.origin.branch_head("closer/issue-1"),
        None,
        "nothing pushed"
    );
    assert_eq!(s.github.issue(&s.repo, n).state, "open");

    // The control: the handler the agent planted does say "complete".
    let planted = Command::new(s.path("planted.sh"))
        .stdin(Stdio::null())
        .output_apart()
        .expect("the planted handler runs");
    let said = String::from_utf8_lossy(&planted.stdout);
    assert!(said.contains("\"complete\": true"), "{said}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_control_a_base_commit_handler_that_answers_complete_completes_the_run() {
    let mut s = story("handler-base", true).await;
    s.agent_step(
        1,
        "echo '# touched' >> calc.sh\necho '{\"summary\": \"Changed calc.\"}'\n",
    );
    let n = s
        .open_issue("add should add", "", &["closer", "type:feature"])
        .await;
    s.idle().await;
    let run = s.run(n).await.expect("a run");
    assert_eq!(
        run.state,
        closer::model::RunState::Done,
        "{}",
        s.journal().await
    );
    assert_eq!(run.iteration, 1);
    assert!(s.origin.branch_head("closer/issue-1").is_some());
    s.stop().await;
}

/// A handler that says "complete" when a build left `built.flag`.
const DECIDES_BY_THE_BUILD: &str = "#!/bin/sh\ncat >/dev/null\n\
    if [ -f built.flag ]; then echo '{\"complete\": true, \"description\": \"built\"}'\n\
    else echo '{\"complete\": false, \"description\": \"not built\"}'; fi\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_custom_handler_judges_the_commit_not_what_the_agent_left_beside_it() {
    let mut s = story_deciding("handler-checkout", DECIDES_BY_THE_BUILD).await;
    // The agent changes the code and leaves an ignored file, which closer
    // does not commit, beside it.
    let leaves_a_flag =
        "echo '# touched' >> calc.sh\ntouch built.flag\necho '{\"summary\": \"Built.\"}'\n";
    s.agent_step(1, leaves_a_flag);
    s.agent_step(2, leaves_a_flag);
    let n = s
        .open_issue("add should add", "", &["closer", "type:feature"])
        .await;
    s.idle().await;

    let run = ran_out(&s, n).await;
    assert_eq!(s.github.issue(&s.repo, n).state, "open");
    // The handler ran, in the checkout, and found no build there.
    let iterations = closer::store::runs::iterations(s.store.pool(), &run.id)
        .await
        .unwrap();
    for iteration in &iterations {
        let judgment = iteration.judgment.as_deref().unwrap_or_default();
        assert!(judgment.contains("not built"), "{judgment}");
    }

    // The control: in the agent's worktree, the same handler says "complete".
    let data = closer::engine::run::RunData::from_json(&run.data).unwrap();
    let worktree = data.worktree.expect("the run's worktree").path;
    assert!(worktree.join("built.flag").exists());
    let handler = s.path("handler.sh");
    crate::support::write_executable(&handler, DECIDES_BY_THE_BUILD);
    let said = Command::new(&handler)
        .current_dir(&worktree)
        .stdin(Stdio::null())
        .output_apart()
        .expect("the handler runs");
    let said = String::from_utf8_lossy(&said.stdout);
    assert!(said.contains("\"complete\": true"), "{said}");
    s.stop().await;
}
