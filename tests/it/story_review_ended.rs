//! The pull request side when it is not the run's own moment: another pull
//! request from closer's branch is merged while the run waits for its own,
//! and a maintainer reviews the pull request of a run that has failed.

use closer::model::RunState;

use crate::story_review::{done, verified_story};
use crate::support::fake_github::state::FakeUser;
use crate::support::story::{CONFIG, MAINTAINER};

/// With `close_on: merged`, a maintainer opens a backport of closer's
/// branch into `release` and merges it: closer's own pull request is still
/// open, so the run goes on waiting and the issue stays open; merging
/// closer's own then completes it. Before, any merged pull request from the
/// branch completed the run and closed the issue.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn merging_another_pull_request_from_the_branch_completes_nothing() {
    let config = format!("{CONFIG}close_on: merged\n");
    let (mut s, n, pull) = verified_story("other-pull-merged", &config).await;
    let maintainer = FakeUser::user(MAINTAINER);
    let backport =
        s.github
            .open_pull_as(&s.repo, maintainer, "closer/issue-1", "release", "Backport");
    s.merge_as(backport, MAINTAINER).await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Verifying, "{}", s.journal().await);
    assert_eq!(s.github.issue(&s.repo, n).state, "open");
    assert!(!s.labels(n).contains(&"phase:complete".to_owned()));

    // The control: closer's own pull request merged completes the run.
    s.merge_as(pull, MAINTAINER).await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Done);
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    s.stop().await;
}

/// A review round fails (it cannot be verified within its limit) and the
/// pull request stays open. The maintainer reviews it again: closer says
/// once, on the pull request, that the run has failed and how to start it
/// again, and nothing else happens. Before, the review was silently
/// ignored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_review_on_a_failed_runs_pull_request_gets_one_hint() {
    let config = format!("{CONFIG}completion:\n  max_iterations: 1\n");
    let (mut s, n, pull) = verified_story("review-on-failed", &config).await;
    s.llm.push([done()]);
    s.agent_step(
        2,
        "echo 'exit 1' > tests/add.sh\necho '{\"message\": \"break it\", \"summary\": \"Done.\"}'\n",
    );
    s.request_change(pull, "calc.sh", 1, "Change it.").await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);
    assert!(
        s.bot_comments(pull).is_empty(),
        "nothing on the pull request yet"
    );

    for ask in ["Please try once more.", "Still there?"] {
        s.review_as(pull, MAINTAINER, "CHANGES_REQUESTED", ask, &[])
            .await;
        s.idle().await;
    }

    let said = s.bot_comments(pull);
    assert_eq!(said.len(), 1, "one hint: {said:#?}");
    assert!(
        said[0]
            .body
            .contains(&format!("`/closer retry` on issue #{}", n.0)),
        "{}",
        said[0].body
    );
    let run = s.run(n).await.unwrap();
    assert_eq!((run.state, run.iteration), (RunState::Failed, 2));
    s.stop().await;
}
