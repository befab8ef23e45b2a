//! A repository renamed while closer works on one of its issues: GitHub
//! sends what happens next under the new name, and the run is found by it.
//! From the `repository` event, or, when that was missed, by
//! reconciliation, which sees GitHub answer the issue under the new name.

use closer::model::{RepoName, RunState};

use crate::stories::awaiting_an_answer;

/// The repository is renamed and its `repository.renamed` arrives; the
/// author's answer, delivered under the new name, resumes the run, which
/// completes there. Before, the answer found no run under the new name
/// and was triaged away: the run waited for ever. Renamed back, the run
/// follows again; the first rename's delivery replayed then changes
/// nothing, since GitHub no longer leads the old name to the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_follows_its_repository_renamed() {
    let (mut s, n) = awaiting_an_answer("renamed").await;
    let first_rename = s.sent();
    s.rename_repo("octo/calculator", true).await;
    s.idle().await;
    let run = s.run(n).await.expect("the run, by its new name");
    assert_eq!(run.repository, RepoName::new("octo", "calculator"));

    s.answer(n).await;
    s.expect_run(n, RunState::Done, 2).await;
    assert!(
        s.prompt(2).contains("Yes, negatives too."),
        "{}",
        s.prompt(2)
    );
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");

    s.rename_repo("octo/calc", true).await;
    s.idle().await;
    let calc = RepoName::new("octo", "calc");
    assert_eq!(s.run(n).await.expect("renamed back").repository, calc);
    s.replay(first_rename).await;
    s.idle().await;
    assert_eq!(s.run(n).await.expect("still there").repository, calc);
    s.stop().await;
}

/// The same with the event missed (an App registered before it subscribed
/// to `repository`): reconciliation finds GitHub answering the issue under
/// another name, confirms the repository's new name, and the run takes it.
/// A transfer to another owner is followed the same way (here the
/// installation covers both owners' repositories).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reconciliation_finds_a_rename_whose_event_was_missed() {
    let (mut s, n) = awaiting_an_answer("renamed-missed").await;
    s.rename_repo("acme/calc", false).await;
    let engine = s.engine.clone().unwrap();
    let done = engine.reconcile().await.unwrap();
    assert!(done.stopped.is_empty(), "{done:?}");
    let run = s.run(n).await.expect("the run, by its new name");
    assert_eq!(run.repository, RepoName::new("acme", "calc"));

    s.answer(n).await;
    s.expect_run(n, RunState::Done, 2).await;
    s.stop().await;
}
