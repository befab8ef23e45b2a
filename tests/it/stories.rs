//! End-to-end stories (issue 5): an issue goes in through signed webhooks,
//! the real engine drives the scripted agent against a local git origin, the
//! fake LLM judges, and each story asserts the comments, labels, issue state
//! and pull request the maintainer would see.

use closer::github::types::IssueNumber;
use serde_json::json;

use crate::support::fake_github::state::FakeUser;
use crate::support::fake_llm::Reply;
use crate::support::story::{CONFIG, MAINTAINER, REPO, Story, commit};

/// Iteration 1 of the bug story: a regression test that fails.
fn add_failing_test() -> String {
    format!(
        r#"cat > tests/add.sh <<'T'
r=$(. ./calc.sh; add 2 3)
[ "$r" = 5 ]
T
{}echo '{{"summary": "Added a regression test for add."}}'
"#,
        commit("test: add")
    )
}

/// Iteration 2 of the bug story: the fix.
fn fix_add() -> String {
    format!(
        r#"cat > calc.sh <<'T'
add() {{ echo $(( $1 + $2 )); }}
T
{}echo '{{"summary": "Fixed add to add."}}'
"#,
        commit("fix: add")
    )
}

fn classify(task: &str) -> Reply {
    Reply::Answer(json!({"task_type": task, "reason": "scripted"}))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_1_a_bug_is_fixed_in_two_iterations_verified_and_closed() {
    let mut s = Story::start("story1", Some(CONFIG)).await;
    s.llm.push([
        classify("bug"),
        Reply::closer(false, 0.6, &["Fix add so the new test passes"]),
        Reply::closer(true, 0.95, &[]),
    ]);
    s.agent_step(1, &add_failing_test());
    s.agent_step(2, &fix_add());
    let n = s
        .open_issue("add subtracts", "`add 2 3` prints -1.", &["closer"])
        .await;
    s.idle().await;

    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, "done", "{run:#?}");
    assert_eq!(run.iteration, 2);
    assert_eq!(run.task_type.as_deref(), Some("bug"));
    let issue = s.github.issue(&s.repo, n);
    assert_eq!(issue.state, "closed");
    assert_eq!(issue.state_reason.as_deref(), Some("completed"));

    // One status comment, edited in place; nothing else posted.
    let comments = s.comments(n);
    assert_eq!(comments.len(), 1, "{comments:#?}");
    let status = s.status_comment(n);
    assert!(status.body.contains("closer: done"), "{}", status.body);
    let edits = s.github.requests_to(
        "PATCH",
        &format!("/repos/{REPO}/issues/comments/{}", status.id),
    );
    assert!(edits.len() >= 3, "edited in place after each step");

    // Phases in order, exactly one phase label at the end.
    assert_eq!(
        s.phases_added(n),
        [
            "phase:preparation",
            "phase:processing",
            "phase:review",
            "phase:complete"
        ]
    );
    let labels = s.labels(n);
    let phases: Vec<&String> = labels.iter().filter(|l| l.starts_with("phase:")).collect();
    assert_eq!(phases, ["phase:complete"]);
    assert!(!labels.iter().any(|l| l == "closer:failed"));

    // The pull request closes the issue; the branch was pushed.
    let pulls = s.github.pulls(&s.repo);
    assert_eq!(pulls.len(), 1);
    assert_eq!(pulls[0].head, "closer/issue-1");
    assert!(
        pulls[0]
            .body
            .as_deref()
            .unwrap_or("")
            .contains(&format!("Closes #{}", n.0))
    );
    assert!(s.origin.branch_head("closer/issue-1").is_some());
    // The second prompt carried what was pending.
    assert!(s.prompt(2).contains("Fix add so the new test passes"), "{}", s.prompt(2));
    assert_eq!(s.llm.unused(), 0);
    s.stop().await;
}
