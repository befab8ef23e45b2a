//! The pull request side when it is not the run's own moment: another pull
//! request from closer's branch is merged while the run waits for its own,
//! a maintainer reviews the pull request of a run that has failed, retries
//! that run with its pull request still open, or merges it, even while the
//! round's last iteration works; a done run's issue opened again before a
//! round; a request deleted while the run is failed; and a merge GitHub's
//! first reads have not caught up with.

use closer::github::types::IssueNumber;
use closer::model::{Outcome, RunState};
use closer::worker::Settled;

use crate::story_review::{done, small_change, thread_replies, verified_story};
use crate::story_review_threads::answer_thread;
use crate::support::fake_github::Fault;
use crate::support::fake_github::state::FakeUser;
use crate::support::fake_llm::Reply;
use crate::support::gate::Gate;
use crate::support::story::{CONFIG, MAINTAINER, Story, Timing};

/// With `close_on: merged`, the maintainer merges closer's pull request
/// and GitHub closes the issue by its `Closes #1`; but GitHub's first two
/// reads of the pull request still say open, as a replica that has not
/// caught up with the merge answers. The close is looked at again, and the
/// run is done, not stopped as if a person had closed the issue. Before,
/// the first stale read stopped the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_merge_that_github_reads_behind_at_first_still_ends_the_run_as_done() {
    let config = format!("{CONFIG}close_on: merged\n");
    let (mut s, n, pull) = verified_story("merge-read-behind", &config).await;
    let open = s.github.pull_json(&s.repo, pull);
    assert_eq!(open["state"], "open");
    let path = format!("/repos/{}/pulls/{}", s.repo, pull.0);
    s.github
        .inject(Fault::Stale(open).times(2).method("GET").only_path(&path));
    let mut settled = s.watch_settled();
    s.merge_as(pull, MAINTAINER).await;
    s.idle().await;

    // The close was read behind the merge, and looked at again.
    let mut postponed = 0;
    while let Ok(job) = settled.try_recv() {
        postponed += usize::from(job.outcome == Settled::Postponed && job.kind == "delivery");
    }
    assert!(postponed >= 1, "the issues.closed delivery looked again");

    let reads = s.github.requests_to("GET", &path);
    let reads = reads.iter().filter(|r| r.path == path).count();
    assert!(
        reads >= 3,
        "two stale reads, then a true one: {reads} reads"
    );
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    let status = s.status_comment(n).body;
    assert!(!status.contains("stopped"), "{status}");
    assert!(s.labels(n).contains(&"phase:complete".to_owned()));
    s.stop().await;
}

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

/// A verified story (with `config` after the story's, and one iteration
/// per round) whose pull request got one thread, "Please document add.",
/// and whose review round failed: its iteration was judged not done.
async fn round_failed(name: &str, config: &str) -> (Story, IssueNumber, IssueNumber) {
    let config = format!("{CONFIG}{config}completion:\n  max_iterations: 1\n");
    let (mut s, n, pull) = verified_story(name, &config).await;
    s.llm.push([Reply::closer(false, 0.9, &["document add"])]);
    s.agent_step(2, &small_change(2));
    s.request_change(pull, "calc.sh", 1, "Please document add.")
        .await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);
    (s, n, pull)
}

/// A review round ends failed with the maintainer's thread unanswered (its
/// one iteration was judged not done), and the pull request stays open.
/// The maintainer retries the run: its prompt carries the thread, closer
/// answers it with the push, and the phases move on as in a first life,
/// to `phase:review` while the run waits for the merge (`close_on:
/// merged`). Before, a retry worked on the issue alone: no prompt carried
/// the thread and nothing answered it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_with_its_pull_request_open_answers_the_review_thread() {
    let (mut s, n, pull) = round_failed("retry-with-thread", "close_on: merged\n").await;
    assert!(thread_replies(&s, pull).is_empty(), "nothing answered yet");

    s.agent_step(3, &answer_thread(3, true, "Documented add."));
    s.llm.push([done()]);
    let before = s.phases_added(n).len();
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;

    s.expect_run(n, RunState::Verifying, 3).await;
    let prompt = s.prompt(3);
    assert!(prompt.contains("Please document add."), "{prompt}");
    let replies = thread_replies(&s, pull);
    assert_eq!(replies.len(), 1, "{replies:#?}");
    assert!(
        replies[0].body.contains("Documented add."),
        "{}",
        replies[0].body
    );
    let phases = s.phases_added(n)[before..].to_vec();
    assert_eq!(
        phases.last().map(String::as_str),
        Some("phase:review"),
        "{phases:?}"
    );
    assert!(!s.path("prompt-4.txt").exists(), "no round after it");
    s.stop().await;
}

/// A review round fails (judged not done within its limit), and the
/// maintainer merges the pull request as it is. The merge closed the issue
/// (`Closes #n`): the run is done, the issue stays closed and shows no
/// failure. Before, the merge of a failed run's pull request was ignored:
/// the closed issue kept `closer:failed` and a status saying to retry.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn merging_a_failed_runs_pull_request_ends_the_run_done() {
    let (mut s, n, pull) = round_failed("merge-failed", "").await;
    assert!(s.labels(n).contains(&"closer:failed".to_owned()));

    s.merge_as(pull, MAINTAINER).await;
    s.idle().await;

    ended_done_by_the_merge(&s, n).await;
    s.stop().await;
}

/// The maintainer merges the pull request while the review round's last
/// iteration works, and that iteration is judged not done. The merge ends
/// the run, done, with nothing said of a failure. Before, the iteration
/// failed the run after the merge: the issue the merge closed was opened
/// again, marked failed, with a diagnosis.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_merge_during_a_rounds_last_iteration_is_not_undone_by_its_failure() {
    let config = format!("{CONFIG}completion:\n  max_iterations: 1\n");
    let (mut s, n, pull) = verified_story("merge-mid-round", &config).await;
    let gate = Gate::new(&s);
    s.agent_step(2, &format!("{}\n{}", gate.hold(), small_change(2)));
    s.llm.push([Reply::closer(false, 0.9, &["document add"])]);
    s.review_as(
        pull,
        MAINTAINER,
        "CHANGES_REQUESTED",
        "",
        &[("calc.sh", 1, "Please document add.")],
    )
    .await;
    gate.started().await;
    let said = s.bot_comments(n).len();
    s.merge_as(pull, MAINTAINER).await;
    s.deliveries_handled().await;
    gate.open();
    s.idle().await;

    ended_done_by_the_merge(&s, n).await;
    let after = s.bot_comments(n);
    assert_eq!(after.len(), said, "no diagnosis: {after:#?}");
    s.stop().await;
}

/// The run is done, its issue closed without `closer:failed`, and the
/// status says nothing of a failure.
async fn ended_done_by_the_merge(
    s: &crate::support::story::Story,
    n: closer::github::types::IssueNumber,
) {
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    let labels = s.labels(n);
    assert!(!labels.contains(&"closer:failed".to_owned()), "{labels:?}");
    let status = s.status_comment(n).body;
    assert!(!status.contains("/closer retry"), "{status}");
}

/// With `close_on: merged`, the maintainer closes the issue (not planned)
/// while the run waits for the merge of its pull request: the run is
/// stopped, as for any issue a person closes, and says so. Before, the
/// run went on waiting for a merge on a closed issue, `phase:review` and
/// all. The control: closed by the merge of the run's own pull request,
/// the run ends done (`merging_another_pull_request_…` above).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_issue_closed_while_its_run_waits_for_the_merge_stops_the_run() {
    let config = format!("{CONFIG}close_on: merged\n");
    let (mut s, n, _pull) = verified_story("closed-waiting", &config).await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Verifying);

    s.close_as(n, MAINTAINER).await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Stopped, "{}", s.journal().await);
    assert_eq!(
        run.outcome,
        Some(Outcome::Stopped("the issue was closed".into()))
    );
    let status = s.status_comment(n).body;
    assert!(status.contains("closer: stopped"), "{status}");
    s.stop().await;
}

/// With `close_on: verified`, the run is done and its issue closed; a
/// maintainer opens the issue again and asks for a change on the pull
/// request: the verified round closes the issue again, as the config says
/// and the done status claims. Before, closer remembered closing it once
/// and left it open, while the status said it was closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_done_runs_issue_opened_again_is_closed_again_by_the_next_verified_round() {
    let (mut s, n, pull) = verified_story("reopened-then-round", CONFIG).await;
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    s.reopen_as(n, MAINTAINER).await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Done);

    s.agent_step(2, &small_change(2));
    s.llm.push([done()]);
    // GitHub refuses the first close: the retried step closes it.
    s.github.inject(
        Fault::Status(502)
            .times(1)
            .method("PATCH")
            .path(&format!("/repos/{}/issues/{}", s.repo, n.0))
            .body("\"closed\""),
    );
    s.request_change(pull, "calc.sh", 1, "Name the function plus.")
        .await;

    let run = s.run(n).await.unwrap();
    assert_eq!((run.state, run.iteration), (RunState::Done, 2), "{run:#?}");
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    let closes = s
        .github
        .requests_to("PATCH", &format!("/repos/{}/issues/{}", s.repo, n.0))
        .iter()
        .filter(|r| r.body.contains("\"closed\""))
        .count();
    assert_eq!(closes, 3, "the first close, the refused one, its retry");
    s.stop().await;
}

/// A review round fails, leaving the pull request open; the maintainer
/// writes a request there, then deletes it, and retries the run: the
/// retry's prompt does not carry the deleted request. Before, a deletion
/// on a thread with no open run was not even taken in (triage), and the
/// retry carried it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_request_deleted_while_the_run_is_failed_is_not_in_the_retry() {
    let (mut s, n, pull) = round_failed("deleted-while-failed", "").await;
    let text = "@closer-test and rename add to plus";
    let gone = s.comment_on_pull_as(pull, MAINTAINER, text).await;
    s.idle().await;
    s.delete_pull_comment_as(pull, gone, MAINTAINER).await;
    s.idle().await;

    s.agent_step(3, &small_change(3));
    s.llm.push([done()]);
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;
    s.expect_run(n, RunState::Done, 3).await;
    let prompt = s.prompt(3);
    assert!(!prompt.contains("rename add"), "{prompt}");
    s.stop().await;
}

/// The done run is as it was: done, its issue closed, no `closer:failed`,
/// and nothing said past the `before` comments of closer's.
async fn still_done(s: &Story, n: IssueNumber, before: usize) {
    assert_eq!(
        s.run(n).await.unwrap().state,
        RunState::Done,
        "{}",
        s.journal().await
    );
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    assert!(!s.labels(n).contains(&"closer:failed".to_owned()));
    assert_eq!(s.bot_comments(n).len(), before, "nothing said");
}

/// A maintainer closes closer's pull request and opens it again at once, as
/// people do to run its checks again: the run stays done and the issue
/// closed. The close is looked at after the re-check delay (30 s, on the
/// story's clock), when the pull request reads open again. Before, the
/// close's step ran at once and failed the run for good (`closer:failed`,
/// the issue opened again). The control in the story: a close left closed
/// fails the run once the delay has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pull_request_closed_and_opened_again_at_once_leaves_the_run_done() {
    let start = closer::clock::system().now_ms();
    let (clock, _) = crate::support::db::manual_clock(start);
    let mut s =
        Story::start_on_clock("closed-reopened", Some(CONFIG), clock, Timing::serve()).await;
    s.llm.push([done()]);
    s.agent_step(1, &crate::stories::fix_add());
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.pass_time(start + 60_000).await;
    assert_eq!(
        s.run(n).await.unwrap().state,
        RunState::Done,
        "{}",
        s.journal().await
    );
    let pull = s.the_pull();
    let before = s.bot_comments(n).len();

    s.close_pull_as(pull, MAINTAINER).await;
    s.pass_time(start + 65_000).await;
    s.github.reopen_pull(&s.repo, pull);
    s.pass_time(start + 120_000).await;
    still_done(&s, n, before).await;

    // Closed for good this time: once the delay has passed, the run fails.
    s.close_pull_as(pull, MAINTAINER).await;
    s.pass_time(start + 180_000).await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);
    assert!(s.labels(n).contains(&"closer:failed".to_owned()));
    s.stop().await;
}

/// A `closed` delivery (`merged: false`) whose step finds the pull request
/// merged (closed, opened again and merged before the step; or a captured
/// close replayed): a merge is no rejection, and the done run stays done.
/// Before, the step saw "not open", failed the run and opened the issue
/// again, though its work was merged.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_close_whose_pull_request_was_merged_since_fails_nothing() {
    let (mut s, n, pull) = verified_story("closed-then-merged", CONFIG).await;
    let before = s.bot_comments(n).len();
    s.github.merge_pull(&s.repo, pull);
    // Its `closed` delivery says unmerged, as a close's does.
    s.close_pull_as(pull, MAINTAINER).await;
    s.idle().await;

    still_done(&s, n, before).await;
    s.stop().await;
}
