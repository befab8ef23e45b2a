//! The status comment as people treat it: a maintainer (or a moderation
//! bot) deletes it mid-run, and closer posts it again at its next write.
//! Before, every later write edited the deleted comment, GitHub answered
//! 404, and the verified run never closed its issue.

use closer::model::RunState;

use crate::stories::first_iteration_held;
use crate::support::fake_github::state::FakeUser;
use crate::support::story::{CONFIG, MAINTAINER, Story};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_status_comment_deleted_mid_run_is_posted_again_and_the_issue_closed() {
    let mut s = Story::start("status-deleted", Some(CONFIG)).await;
    let (n, gate) = first_iteration_held(&mut s, "Make the test pass").await;
    let deleted = s.status_comment(n);
    s.delete_comment_as(
        n,
        deleted.id,
        deleted.author.clone(),
        FakeUser::user(MAINTAINER),
    )
    .await;
    s.deliveries_handled().await;
    gate.open();
    s.idle().await;

    s.expect_run(n, RunState::Done, 2).await;
    let issue = s.github.issue(&s.repo, n);
    assert_eq!(issue.state, "closed", "{}", s.journal().await);
    let status = s.status_comment(n);
    assert_ne!(status.id, deleted.id, "a new status comment");
    assert!(status.body.contains("closer: done"), "{}", status.body);
    assert_eq!(s.run(n).await.unwrap().status_comment_id, Some(status.id));
    s.stop().await;
}
