//! Asking more of a run at rest, where what is asked does not start a
//! plain review round: its budget is spent, its label came off, the
//! comment on its pull request is a command, its pull request was merged.

use closer::model::RunState;

use crate::story_review::{done, small_change, verified_story};
use crate::support::gate::Gate;
use crate::support::story::{CONFIG, MAINTAINER};

/// A verified run that spent its token budget gets a review: the run stays
/// done, the issue closed, and the pull request gets one comment saying
/// why and how to go on. Before, the round started, and its first
/// iteration failed the run on its budget and opened the issue again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_review_of_a_run_whose_budget_is_spent_gets_a_hint_not_a_failure() {
    // The completion check alone reports 120 tokens.
    let config = format!("{CONFIG}budget: {{ max_tokens: 100 }}\n");
    let (mut s, n, pull) = verified_story("review-budget", &config).await;
    s.agent_step(2, &small_change(2));
    s.llm.push([done()]);
    s.request_change(pull, "calc.sh", 1, "A note, please.")
        .await;
    s.review_as(pull, MAINTAINER, "CHANGES_REQUESTED", "Still waiting.", &[])
        .await;
    s.idle().await;

    s.expect_run(n, RunState::Done, 1).await;
    assert!(!s.path("prompt-2.txt").exists(), "no round");
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    assert!(!s.labels(n).contains(&"closer:failed".to_owned()));
    let hints: Vec<_> = s
        .bot_comments(pull)
        .into_iter()
        .filter(|c| c.body.contains("spent its token budget (120 of 100)"))
        .collect();
    assert_eq!(hints.len(), 1, "one hint for two reviews");
    s.stop().await;
}

/// The trigger label comes off after the run is done (which stops
/// nothing), and a review later sends the run back to work: reconciliation
/// lets the round finish. Before, it stopped the round as "the trigger
/// label was removed".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_review_round_after_the_label_came_off_is_not_stopped() {
    let (mut s, n, pull) = verified_story("review-unlabeled", CONFIG).await;
    s.unlabel_as(n, MAINTAINER, "closer").await;
    s.idle().await;
    s.expect_run(n, RunState::Done, 1).await;

    let gate = Gate::new(&s);
    s.agent_step(2, &format!("{}\n{}", gate.hold(), small_change(2)));
    s.llm.push([done()]);
    s.review_as(
        pull,
        MAINTAINER,
        "CHANGES_REQUESTED",
        "",
        &[("calc.sh", 1, "A note.")],
    )
    .await;
    gate.started().await;
    let engine = s.engine.clone().unwrap();
    let reconciled = engine.reconcile().await.unwrap();
    assert!(reconciled.stopped.is_empty(), "{reconciled:?}");
    gate.open();
    s.idle().await;
    s.expect_run(n, RunState::Done, 2).await;
    s.stop().await;
}

/// `@closer-test stop` on the pull request of a run at rest is a command,
/// and the issue's: no round starts. Before, the mention made it a request,
/// and trying to stop the bot sent it back to work.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_command_mentioning_the_app_on_the_pull_request_starts_no_round() {
    let (mut s, n, pull) = verified_story("review-mention-stop", CONFIG).await;
    s.agent_step(2, &small_change(2));
    s.llm.push([done()]);
    s.comment_on_pull_as(pull, MAINTAINER, "@closer-test stop")
        .await;
    s.idle().await;
    s.expect_run(n, RunState::Done, 1).await;
    assert!(!s.path("prompt-2.txt").exists(), "no round");
    s.stop().await;
}

/// A request on the issue after the run's pull request was merged starts
/// the run again, the request in its prompt, as `/closer run` would. Before,
/// it was taken for a review round of a pull request that was no longer
/// open: 👀, and nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_after_the_merge_starts_the_run_again() {
    let (mut s, n, pull) = verified_story("request-merged", CONFIG).await;
    let merged = s.origin.branch_head("closer/issue-1").unwrap();
    s.merge_as(pull, MAINTAINER).await;
    // The merge, on the default branch (GitHub leaves the head branch).
    s.origin.force_branch("main", &merged);
    s.idle().await;
    s.agent_step(2, &small_change(2));
    s.llm.push([done()]);
    s.comment_as(
        n,
        crate::support::fake_github::state::FakeUser::user(MAINTAINER),
        "@closer-test please also document add",
    )
    .await;
    s.idle().await;

    s.expect_run(n, RunState::Done, 2).await;
    assert!(
        s.prompt(2).contains("please also document add"),
        "{}",
        s.prompt(2)
    );
    s.stop().await;
}
