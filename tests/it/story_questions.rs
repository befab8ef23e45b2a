//! The agent's question and the replies at the edges of the run: a
//! question asked with no iteration left to use an answer, an answer while
//! the next iteration gets ready, the author's second thought while the
//! iteration it resumed works, a comment written before the question was
//! on the issue, a retry while the run waits, and replies
//! deleted before a prompt carried them (on the issue, in either order of
//! their deliveries, and on the run's pull request).

use std::time::Duration;

use closer::github::types::IssueNumber;
use closer::model::RunState;

use crate::stories::{
    ASKS_A_QUESTION, awaiting_an_answer, first_iteration_held, fix_add, question_comments,
};
use crate::story_review::{done, small_change, verified_story};
use crate::support::fake_github::Fault;
use crate::support::fake_github::state::{FakeComment, FakeUser};
use crate::support::fake_llm::Reply;
use crate::support::gate::Gate;
use crate::support::story::{CONFIG, MAINTAINER, Story};
use crate::support::wait_for_file;

/// The agent asks in the run's last iteration. Nobody is asked on the
/// issue (an answer could only resume the run into its limit): the run
/// fails at its limit, and the diagnosis quotes the question. Before, the
/// question was posted and labelled, and the answer resumed the run only
/// to fail it at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_question_with_no_iteration_left_is_quoted_in_the_diagnosis_not_asked() {
    let config = format!("{CONFIG}completion:\n  max_iterations: 1\n");
    let mut s = Story::start("question-at-limit", Some(&config)).await;
    s.agent_step(1, ASKS_A_QUESTION);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;

    s.expect_run(n, RunState::Failed, 1).await;
    assert!(question_comments(&s, n).is_empty(), "{:#?}", s.comments(n));
    assert!(!s.labels(n).iter().any(|l| l == "awaiting-response"));
    let diagnosis = s
        .bot_comments(n)
        .into_iter()
        .find(|c| c.body.contains("could not finish"))
        .expect("a diagnosis");
    assert!(
        diagnosis.body.contains("no iteration left for an answer")
            && diagnosis
                .body
                .contains("Should add also accept negative numbers?"),
        "{}",
        diagnosis.body
    );
    s.stop().await;
}

/// The agent asks in iteration 1; iteration 2, held at the returned gate,
/// fixes `add` and is judged done.
fn asks_then_fixes_held(s: &Story) -> Gate {
    s.agent_step(1, ASKS_A_QUESTION);
    let gate = Gate::new(s);
    s.agent_step(2, &format!("{}\n{}", gate.hold(), fix_add()));
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    gate
}

/// The author answers, and the next iteration takes a while to show
/// anything: the status no longer says it waits for the answer. Before,
/// it did until the agent's first progress, or the iteration's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_moves_the_status_on_at_once() {
    let mut s = Story::start("answer-status", Some(CONFIG)).await;
    let gate = asks_then_fixes_held(&s);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;
    s.expect_run(n, RunState::AwaitingResponse, 1).await;
    assert!(s.status_comment(n).body.contains("to answer the question"));

    s.comment_as(n, FakeUser::user(MAINTAINER), "Yes, negatives too.")
        .await;
    gate.started().await;
    let status = s.status_comment(n).body;
    assert!(!status.contains("to answer the question"), "{status}");
    gate.open();
    s.idle().await;
    s.expect_run(n, RunState::Done, 2).await;
    // Verified: the author's window to add to their answer is shut, and
    // none is left open for a review round to find.
    let run = s.run(n).await.unwrap();
    let data: serde_json::Value = serde_json::from_str(&run.data).unwrap();
    assert!(data["answered_for"].is_null(), "{data}");
    s.stop().await;
}

/// A maintainer writes twice while the agent works, and a moderation bot
/// deletes the second comment before the next iteration: the next prompt
/// carries the first and not the second. Before, a deleted reply still
/// reached the agent (and a bot's deletion was ignored).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_deleted_before_the_next_prompt_is_not_in_it() {
    let mut s = Story::start("reply-deleted", Some(CONFIG)).await;
    let (n, gate) = first_iteration_held(&mut s, "Make the test pass").await;
    let maintainer = FakeUser::user(MAINTAINER);
    s.comment_as(n, maintainer.clone(), "Keep the change small.")
        .await;
    let gone = s.comment_as(n, maintainer.clone(), "Use the v2 API.").await;
    // A moderation bot takes it off: its reply goes all the same.
    s.delete_comment_as(n, gone, maintainer, FakeUser::bot("mod-bot"))
        .await;
    s.deliveries_handled().await;
    gate.open();
    s.idle().await;

    s.expect_run(n, RunState::Done, 2).await;
    let prompt = s.prompt(2);
    assert!(prompt.contains("Keep the change small."), "{prompt}");
    assert!(!prompt.contains("Use the v2 API."), "{prompt}");
    s.stop().await;
}

/// Opens the issue, whose run asks its question in iteration 1; the
/// author (`MAINTAINER`, who may only read) answers, and the iteration the
/// answer resumed is at work, held by `gate`.
async fn answered_by_the_author(s: &mut Story, gate: &Gate) -> (IssueNumber, FakeUser) {
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;
    s.expect_run(n, RunState::AwaitingResponse, 1).await;
    s.github.set_permission(&s.repo, MAINTAINER, "read");
    let author = FakeUser::user(MAINTAINER);
    s.comment_as(n, author.clone(), "Yes, negatives too.").await;
    gate.started().await;
    (n, author)
}

/// The author, who may not steer closer, answers, and adds a second
/// thought while the iteration their answer resumed works: the next
/// prompt carries it. A comment of theirs once that next iteration works
/// is not stored: the author answers, they do not steer. Before, the
/// second thought was dropped (the run no longer awaited an answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_authors_second_thought_reaches_the_next_prompt_and_no_later_word_does() {
    let mut s = Story::start("answer-second-thought", Some(CONFIG)).await;
    s.agent_step(1, ASKS_A_QUESTION);
    let gate = Gate::new(&s);
    s.agent_step(
        2,
        &format!("{}\necho '{{\"summary\": \"Looked.\"}}'", gate.hold()),
    );
    let (started, go) = (s.path("third.started"), s.path("third.go"));
    let hold = format!(
        "touch '{}'; while [ ! -f '{}' ]; do sleep 0.05; done",
        started.display(),
        go.display()
    );
    s.agent_step(3, &format!("{hold}\n{}", fix_add()));
    s.llm
        .push([Reply::closer(false, 0.3, &["add still subtracts"])]);
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let (n, author) = answered_by_the_author(&mut s, &gate).await;
    s.comment_as(n, author.clone(), "Also: keep the name add.")
        .await;
    s.deliveries_handled().await;
    gate.open();
    wait_for_file(&started).await;
    s.comment_as(n, author, "And delete the README.").await;
    s.deliveries_handled().await;
    std::fs::write(&go, "").unwrap();
    s.idle().await;

    s.expect_run(n, RunState::Done, 3).await;
    assert!(s.prompt(2).contains("negatives too"), "{}", s.prompt(2));
    let third = s.prompt(3);
    assert!(third.contains("keep the name add"), "{third}");
    let stored = s.replies(n).await;
    assert!(
        stored.iter().all(|m| !m.body.contains("README")),
        "{stored:#?}"
    );
    s.stop().await;
}

/// The author adds a second thought while the iteration their answer
/// resumed works, and that iteration is verified: the run is done there.
/// The author's window closes with the judgment, so their words start no
/// review round at rest (decision 228). Before, the unused words queued a
/// round: another iteration with them in its prompt, pushed to the
/// verified pull request.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_authors_second_thought_after_a_verified_iteration_starts_no_round() {
    let mut s = Story::start("second-thought-verified", Some(CONFIG)).await;
    s.agent_step(1, ASKS_A_QUESTION);
    let gate = Gate::new(&s);
    s.agent_step(2, &format!("{}\n{}", gate.hold(), fix_add()));
    s.agent_step(3, "rm -f README.md\necho '{\"summary\": \"Deleted.\"}'");
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let (n, author) = answered_by_the_author(&mut s, &gate).await;
    s.comment_as(n, author, "Also: delete the README.").await;
    s.deliveries_handled().await;
    gate.open();
    s.idle().await;

    s.expect_run(n, RunState::Done, 2).await;
    assert!(
        s.prompt(3).is_empty(),
        "no third iteration: {}",
        s.prompt(3)
    );
    s.stop().await;
}

/// A maintainer comments `/closer retry` while the run waits for the
/// author's answer: the run is not restarted (its question stands), and
/// the maintainer is told why and what to do instead; the answer then
/// resumes the run as before. Before, the command got a 👀 and nothing
/// else.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_while_the_run_awaits_an_answer_says_what_to_do_instead() {
    let (mut s, n) = awaiting_an_answer("retry-awaiting").await;
    let maintainer = FakeUser::user(MAINTAINER);
    s.comment_as(n, maintainer.clone(), "/closer retry").await;
    s.idle().await;

    s.expect_run(n, RunState::AwaitingResponse, 1).await;
    let answers = nothing_to_retry_answers(&s, n);
    assert_eq!(answers.len(), 1, "{:#?}", s.comments(n));
    assert!(
        answers[0].body.contains("answers the agent's question"),
        "{}",
        answers[0].body
    );
    assert_eq!(question_comments(&s, n).len(), 1, "{:#?}", s.comments(n));

    s.comment_as(n, maintainer, "Yes, negatives too.").await;
    s.idle().await;
    s.expect_run(n, RunState::Done, 2).await;
    s.stop().await;
}

/// A maintainer comments and deletes the comment at once, and the
/// deletion's delivery is handled before the comment's (GitHub does not
/// promise their order; a failed delivery comes again later): the next
/// prompt does not carry it. Before, the late `created` stored a reply
/// that was no longer on the issue.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_whose_deletion_came_first_is_not_in_the_prompt() {
    let mut s = Story::start("reply-deleted-first", Some(CONFIG)).await;
    let (n, gate) = first_iteration_held(&mut s, "Make the test pass").await;
    let maintainer = FakeUser::user(MAINTAINER);
    s.comment_as(n, maintainer.clone(), "Keep the change small.")
        .await;
    let text = "Use the v2 API.";
    let gone = s.github.comment_as(&s.repo, n, maintainer.clone(), text);
    s.delete_comment_as(n, gone, maintainer.clone(), maintainer.clone())
        .await;
    s.deliveries_handled().await;
    // The comment's own `created`, delivered late.
    s.replay_comment(n, gone, maintainer, text).await;
    s.deliveries_handled().await;
    gate.open();
    s.idle().await;

    s.expect_run(n, RunState::Done, 2).await;
    let prompt = s.prompt(2);
    assert!(prompt.contains("Keep the change small."), "{prompt}");
    assert!(!prompt.contains(text), "{prompt}");
    s.stop().await;
}

/// On closer's pull request, a maintainer asks for a change and, while
/// that round works, writes a second request and deletes it: nothing of
/// it waits for a prompt, and no round follows for it. Before, `deleted`
/// on a pull request was ignored: the deleted request waited for the next
/// prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pull_request_comment_deleted_before_a_prompt_carried_it_is_dropped() {
    let (mut s, n, pull) = verified_story("pull-comment-deleted", CONFIG).await;
    let gate = Gate::new(&s);
    s.agent_step(2, &format!("{}\n{}", gate.hold(), small_change(2)));
    s.llm.push([done()]);
    s.comment_on_pull_as(pull, MAINTAINER, "@closer-test please also update the docs")
        .await;
    gate.started().await;
    let text = "@closer-test and rename add to plus";
    let gone = s.comment_on_pull_as(pull, MAINTAINER, text).await;
    s.deliveries_handled().await;
    s.delete_pull_comment_as(pull, gone, MAINTAINER).await;
    s.deliveries_handled().await;
    gate.open();
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!((run.state, run.iteration), (RunState::Done, 2), "{run:#?}");
    let stored = s.replies(n).await;
    assert!(stored.iter().any(|m| m.body.contains("update the docs")));
    assert!(
        stored.iter().all(|m| !m.body.contains("rename add")),
        "{stored:#?}"
    );
    s.stop().await;
}

/// GitHub is slow to make the question's comment (2 s), and the author
/// comments twice meanwhile, before the question is on the issue (the
/// second comment's delivery comes after the question is posted): neither
/// answers anything, and the run waits for the answer; the answer's prompt
/// carries all three. Before, the early comment resumed the run as the answer,
/// and the question then stood unanswered on the issue.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_comment_written_before_the_question_was_posted_answers_nothing() {
    let mut s = Story::start("reply-before-question", Some(CONFIG)).await;
    let comments = format!("/repos/{}/issues/1/comments", s.repo);
    let question = "needs your input";
    s.github.inject(
        Fault::Delay(Duration::from_secs(2))
            .times(1)
            .method("POST")
            .path(&comments)
            .body(question),
    );
    s.agent_step(1, ASKS_A_QUESTION);
    s.agent_step(2, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.github.received("POST", &comments, question).await;
    assert!(question_comments(&s, n).is_empty(), "not made yet");
    let maintainer = FakeUser::user(MAINTAINER);
    s.comment_as(n, maintainer.clone(), "It also prints -1 for add 0 1.")
        .await;
    // Another, whose delivery comes only after the question is posted.
    let late = "And -2 for add 1 1.";
    let late_id = s.github.comment_as(&s.repo, n, maintainer.clone(), late);
    s.deliveries_handled().await;
    s.idle().await;
    s.replay_comment(n, late_id, maintainer.clone(), late).await;
    s.idle().await;

    s.expect_run(n, RunState::AwaitingResponse, 1).await;
    assert_eq!(question_comments(&s, n).len(), 1, "{:#?}", s.comments(n));
    s.comment_as(n, maintainer, "Yes, negatives too.").await;
    s.idle().await;
    s.expect_run(n, RunState::Done, 2).await;
    let prompt = s.prompt(2);
    assert!(
        prompt.contains("negatives too") && prompt.contains("add 0 1") && prompt.contains(late),
        "{prompt}"
    );
    s.stop().await;
}

/// `/closer retry` while the run's first iteration works: nothing
/// restarts, the maintainer is told so, and the run goes on to done.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_while_the_run_works_says_there_is_nothing_to_retry() {
    let mut s = Story::start("retry-running", Some(CONFIG)).await;
    let (n, gate) = first_iteration_held(&mut s, "Make the test pass").await;
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.deliveries_handled().await;
    let answers = nothing_to_retry_answers(&s, n);
    assert_eq!(answers.len(), 1, "{:#?}", s.comments(n));
    assert!(
        answers[0].body.contains("**running**"),
        "{}",
        answers[0].body
    );
    gate.open();
    s.idle().await;
    s.expect_run(n, RunState::Done, 2).await;
    s.stop().await;
}

/// The bot's answers saying there is nothing to retry.
fn nothing_to_retry_answers(s: &Story, n: IssueNumber) -> Vec<FakeComment> {
    s.bot_comments(n)
        .into_iter()
        .filter(|c| c.body.contains("nothing to retry"))
        .collect()
}

/// A stranger's issue: the agent asks, and a maintainer answers in the
/// author's place. While the resumed iteration works, the author (who may
/// not steer) comments: it is not stored. Only the author's own answer
/// opens a window to add to it; a maintainer's answer is not theirs to
/// amend.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_maintainers_answer_opens_no_window_for_the_author() {
    let mut s = Story::start("maintainer-answers", Some(CONFIG)).await;
    let gate = asks_then_fixes_held(&s);
    let n = s
        .github
        .open_issue(&s.repo, "stranger", "add subtracts", "");
    s.github.label_issue(&s.repo, n, "type:bug");
    s.label_as(n, MAINTAINER, "closer").await;
    s.idle().await;
    s.expect_run(n, RunState::AwaitingResponse, 1).await;

    s.comment_as(n, FakeUser::user(MAINTAINER), "Yes, negatives too.")
        .await;
    gate.started().await;
    s.comment_as(n, FakeUser::user("stranger"), "No, only positives!")
        .await;
    s.deliveries_handled().await;
    gate.open();
    s.idle().await;

    s.expect_run(n, RunState::Done, 2).await;
    let stored = s.replies(n).await;
    assert!(
        stored.iter().all(|m| !m.body.contains("only positives")),
        "{stored:#?}"
    );
    s.stop().await;
}
