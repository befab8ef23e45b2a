//! An issue transferred to another repository while closer works it. The
//! run's repository, branch and pull request stay where they were, so the
//! run ends, stopped, saying where the issue went (a run in the new
//! repository starts as any run does). Before, the old repository's run
//! went on writing to the issue through GitHub's redirects and could close
//! it from a pull request in a repository it no longer belongs to.

use closer::github::types::{IssueNumber, RepoName};
use closer::model::{Outcome, RunState};
use serde_json::{Value, json};

use crate::stories::awaiting_an_answer;
use crate::support::fake_github::state::FakeUser;
use crate::support::story::{INSTALLATION, MAINTAINER, Story, user_json};

/// Transfers the story's issue `n` to `octo/elsewhere`, as GitHub does;
/// returns that repository, the issue's new number, and the
/// `issues.transferred` payload GitHub sends the old repository.
fn transfer(s: &Story, n: IssueNumber) -> (RepoName, IssueNumber, Value) {
    let before = s.issue_json(n);
    let other = s.github.add_repo(INSTALLATION, "octo/elsewhere");
    let moved = s.github.transfer_issue(&s.repo, n, &other);
    let payload = json!({
        "action": "transferred",
        "issue": before,
        "changes": {
            "new_issue": s.github.issue_json(&other, moved),
            "new_repository": {"full_name": other.to_string(), "id": 4242},
        },
        "sender": user_json(&FakeUser::user(MAINTAINER)),
    });
    (other, moved, payload)
}

/// A maintainer moves the issue while its run waits for an answer: the run
/// stops, its outcome names the new address, and its agent is not run
/// again. (Its status comment moved with the issue, into a repository the
/// run's tokens do not reach: see decision 175.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_issue_transferred_mid_run_stops_the_run_saying_where_it_went() {
    let (mut s, n) = awaiting_an_answer("transferred").await;
    let (_, moved, payload) = transfer(&s, n);
    s.deliver("issues", payload).await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Stopped, "{}", s.journal().await);
    let why = format!("the issue was moved to octo/elsewhere#{}", moved.0);
    assert_eq!(run.outcome, Some(Outcome::Stopped(why)));
    assert_eq!(run.iteration, 1, "the agent was not run again");
    s.stop().await;
}

/// A `transferred` delivery for an issue GitHub still has at its address
/// (replayed, or forged with a valid signature) stops nothing; the same
/// transfer missed as a webhook is found by reconciliation (the redirect
/// leads into a repository the run's token does not reach: 404).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transfer_is_checked_with_github_and_found_by_reconciliation_when_missed() {
    let (mut s, n) = awaiting_an_answer("transferred-check").await;
    let forged = json!({
        "action": "transferred",
        "issue": s.issue_json(n),
        "changes": {
            "new_issue": {"number": 99},
            "new_repository": {"full_name": "octo/elsewhere", "id": 4242},
        },
        "sender": user_json(&FakeUser::user(MAINTAINER)),
    });
    s.deliver("issues", forged).await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::AwaitingResponse);
    assert!(
        s.last_delivery_outcome()
            .await
            .contains("still has it here"),
        "{}",
        s.journal().await
    );

    let (_, _, _missed) = transfer(&s, n);
    let engine = s.engine.clone().unwrap();
    let done = engine.reconcile().await.unwrap();
    let run = s.run(n).await.unwrap();
    assert_eq!(done.stopped, vec![run.id.clone()], "{done:?}");
    assert_eq!(run.state, RunState::Stopped);
    s.stop().await;
}
