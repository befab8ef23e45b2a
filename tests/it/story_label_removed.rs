//! The trigger label taken off an issue whose run it started (decision
//! 152): a maintainer's removal stops the run there and then; a triage
//! user's is undone, with one refusal, and the run goes on; a removal
//! replayed under a new delivery id changes nothing. Nothing here runs
//! reconciliation, which used to be the only thing that noticed.

use closer::github::types::IssueNumber;
use closer::model::{Outcome, RunState};
use serde_json::json;

use crate::stories::awaiting_an_answer;
use crate::support::fake_github::state::FakeUser;
use crate::support::story::{MAINTAINER, Story, user_json};

/// The bot's comments addressed to `login`.
fn addressed_to(s: &Story, n: IssueNumber, login: &str) -> usize {
    let at = format!("@{login}");
    s.bot_comments(n)
        .iter()
        .filter(|c| c.body.contains(&at))
        .count()
}

/// A maintainer takes the trigger label off while the run waits for an
/// answer: the run stops at once, the issue shows it, and an answer
/// afterwards starts no iteration.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn taking_the_trigger_label_off_stops_the_run_at_once() {
    let (mut s, n) = awaiting_an_answer("unlabel-stop").await;

    s.unlabel_as(n, MAINTAINER, "closer").await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Stopped, "{}", s.journal().await);
    assert_eq!(
        run.outcome,
        Some(Outcome::Stopped("the trigger label was removed".to_owned()))
    );
    let status = s.status_comment(n);
    assert!(status.body.contains("stopped"), "{}", status.body);
    assert!(!s.labels(n).iter().any(|l| l == "awaiting-response"));
    assert!(!s.labels(n).iter().any(|l| l == "closer"), "not put back");

    s.answer(n).await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Stopped);
    assert!(s.prompt(2).is_empty(), "the agent did not run again");
    s.stop().await;
}

/// A triage user takes the trigger label off: it is put back with one
/// short refusal and the run goes on. The removal replayed under a new
/// delivery id finds the label on GitHub and does nothing; the same user
/// taking it off again gets the label back but no second refusal. The
/// maintainer answers and the run completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_trigger_label_taken_off_by_a_triage_user_is_put_back_and_the_run_goes_on() {
    let (mut s, n) = awaiting_an_answer("unlabel-triage").await;
    s.github.set_permission(&s.repo, "trinity", "triage");

    s.unlabel_as(n, "trinity", "closer").await;
    let removal = s.sent() - 1;
    s.idle().await;
    assert!(
        s.labels(n).iter().any(|l| l == "closer"),
        "{:?}",
        s.labels(n)
    );
    assert_eq!(s.run(n).await.unwrap().state, RunState::AwaitingResponse);
    let refusals = s
        .bot_comments(n)
        .into_iter()
        .filter(|c| c.body.contains("@trinity"))
        .collect::<Vec<_>>();
    assert_eq!(refusals.len(), 1, "{refusals:#?}");
    assert!(
        refusals[0].body.contains("put back") && refusals[0].body.contains("`write`"),
        "{}",
        refusals[0].body
    );

    s.replay(removal).await;
    s.idle().await;
    let outcome = s.last_delivery_outcome().await;
    assert!(outcome.contains("back on GitHub now"), "{outcome}");
    assert_eq!(addressed_to(&s, n, "trinity"), 1);

    s.unlabel_as(n, "trinity", "closer").await;
    s.idle().await;
    assert!(s.labels(n).iter().any(|l| l == "closer"));
    assert_eq!(addressed_to(&s, n, "trinity"), 1, "one refusal per user");

    s.answer(n).await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}");
    s.stop().await;
}

/// Another label taken off, or the trigger label taken off an issue whose
/// run a command started, leaves the run alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn other_labels_and_command_started_runs_are_left_alone() {
    let (mut s, n) = awaiting_an_answer("unlabel-other").await;
    s.unlabel_as(n, MAINTAINER, "type:bug").await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::AwaitingResponse);
    let outcome = s.last_delivery_outcome().await;
    assert!(outcome.contains("not the trigger label"), "{outcome}");

    let m = s.open_issue("add subtracts too", "", &["type:bug"]).await;
    s.comment_as(m, FakeUser::user(MAINTAINER), "/closer run")
        .await;
    s.idle().await;
    assert_eq!(s.run(m).await.unwrap().state, RunState::AwaitingResponse);
    s.label_as(m, MAINTAINER, "closer").await;
    s.unlabel_as(m, MAINTAINER, "closer").await;
    s.idle().await;
    assert_eq!(s.run(m).await.unwrap().state, RunState::AwaitingResponse);
    let outcome = s.last_delivery_outcome().await;
    assert!(outcome.contains("not started by the label"), "{outcome}");
    s.stop().await;
}

/// A maintainer takes the label off and puts it back before closer reads
/// the removal (or the removal is replayed later): GitHub shows the label,
/// so the run goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_removal_read_after_the_label_is_back_stops_nothing() {
    let (mut s, n) = awaiting_an_answer("unlabel-late").await;
    s.github.unlabel_issue(&s.repo, n, "closer");
    let removal = json!({
        "action": "unlabeled",
        "issue": s.issue_json(n),
        "label": {"name": "closer"},
        "sender": user_json(&FakeUser::user(MAINTAINER)),
    });
    s.github.label_issue(&s.repo, n, "closer");
    s.deliver("issues", removal).await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::AwaitingResponse);
    let outcome = s.last_delivery_outcome().await;
    assert!(outcome.contains("back on GitHub now"), "{outcome}");
    s.stop().await;
}

/// A triage user's label is refused and taken off; then a maintainer's
/// label starts the run, and the triage user's delivery comes again (a
/// redelivery, or one whose first try was deferred). The label the run was
/// started by stays, and the run goes on. Before, the late refusal took it
/// off, and reconciliation then stopped the run as unlabelled.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_refusal_never_takes_off_the_label_a_maintainers_run_was_started_by() {
    let mut s = Story::start("label-late-refusal", Some(crate::support::story::CONFIG)).await;
    s.github.set_permission(&s.repo, "trinity", "triage");
    let n = s.open_issue("add subtracts", "", &["type:bug"]).await;
    s.idle().await;
    s.label_as(n, "trinity", "closer").await;
    let refused = s.sent() - 1;
    s.idle().await;
    assert!(!s.labels(n).contains(&"closer".to_owned()), "refused");

    s.agent_step(
        1,
        r#"echo '{"summary": "A question first.", "questions": ["Negatives too?"]}'"#,
    );
    s.label_as(n, MAINTAINER, "closer").await;
    s.idle().await;
    s.expect_run(n, RunState::AwaitingResponse, 1).await;

    s.replay(refused).await;
    s.idle().await;
    assert!(
        s.labels(n).contains(&"closer".to_owned()),
        "{:?}",
        s.labels(n)
    );
    let engine = s.engine.clone().unwrap();
    let reconciled = engine.reconcile().await.unwrap();
    assert!(reconciled.stopped.is_empty(), "{reconciled:?}");
    s.expect_run(n, RunState::AwaitingResponse, 1).await;
    s.stop().await;
}
