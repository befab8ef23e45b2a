//! End-to-end stories (issue 5): an issue goes in through signed webhooks,
//! the real engine drives the scripted agent against a local git origin, the
//! fake LLM judges, and each story asserts the comments, labels, issue state
//! and pull request the maintainer would see.

use std::time::{Duration, Instant};

use closer::github::types::IssueNumber;
use closer::model::{IterationEnd, Run, RunState, TaskType};
use closer::store::runs;
use serde_json::json;

use crate::support::fake_github::Fault;
use crate::support::fake_github::state::{FakeComment, FakeUser};
use crate::support::fake_llm::Reply;
use crate::support::gate::Gate;
use crate::support::process::{alive, gone_within};
use crate::support::story::{CONFIG, MAINTAINER, REPO, Story, user_json};
use crate::support::wait_for_file;

/// Iteration 1 of the bug story: a regression test that fails.
pub(crate) fn add_failing_test() -> String {
    r#"cat > tests/add.sh <<'T'
r=$(. ./calc.sh; add 2 3)
[ "$r" = 5 ]
T
echo '{"summary": "Added a regression test for add."}'
"#
    .to_owned()
}

/// The fix, with its regression test (written again if iteration 1 did):
/// the test fails on the base commit's code and passes with the fix, which
/// is the reproduction a bug needs.
pub(crate) fn fix_add() -> String {
    r#"cat > tests/add.sh <<'T'
r=$(. ./calc.sh; add 2 3)
[ "$r" = 5 ]
T
cat > calc.sh <<'T'
add() { echo $(( $1 + $2 )); }
T
echo '{"summary": "Fixed add to add."}'
"#
    .to_owned()
}

/// An iteration in which the agent asks the author something.
pub(crate) const ASKS_A_QUESTION: &str = r#"echo '{"summary": "I need a decision first.", "questions": ["Should add also accept negative numbers?"]}'
"#;

/// Makes the next `times` comment POSTs to issue 1 carrying `text` meet
/// `fault`.
fn fault_comment_posts(s: &Story, fault: Fault, times: u32, text: &str) {
    s.github.inject(
        fault
            .times(times)
            .method("POST")
            .path(&format!("/repos/{REPO}/issues/1/comments"))
            .body(text),
    );
}

/// The bot's question comments on the issue.
pub(crate) fn question_comments(s: &Story, n: IssueNumber) -> Vec<FakeComment> {
    s.bot_comments(n)
        .into_iter()
        .filter(|c| c.body.contains("needs your input"))
        .collect()
}

/// Opens a bug issue worked in two iterations (a failing test, judged not
/// done with `pending` left, then the fix, judged done), and returns once
/// iteration 1 has started, held at the returned gate.
pub(crate) async fn first_iteration_held(s: &mut Story, pending: &str) -> (IssueNumber, Gate) {
    let gate = Gate::new(s);
    s.agent_step(1, &format!("{}\n{}", gate.hold(), add_failing_test()));
    s.agent_step(2, &fix_add());
    s.llm.push([
        Reply::closer(false, 0.6, &[pending]),
        Reply::closer(true, 0.95, &[]),
    ]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    gate.started().await;
    (n, gate)
}

/// How many comment POSTs to issue 1 carried `text` (tried, not created).
fn comment_posts_carrying(s: &Story, text: &str) -> usize {
    s.github
        .requests_to("POST", &format!("/repos/{REPO}/issues/1/comments"))
        .into_iter()
        .filter(|r| r.body.contains(text))
        .count()
}

pub(crate) fn classify(task: &str) -> Reply {
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
    assert_eq!(run.state, RunState::Done, "{run:#?}");
    assert_eq!(run.iteration, 2);
    assert_eq!(run.task_type, Some(TaskType::Bug));
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
    // At most one edit per step: start, iteration 1, iteration 2, finish.
    assert!(
        (3..=4).contains(&edits.len()),
        "one edit per step, got {}",
        edits.len()
    );

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
    assert!(
        s.prompt(2).contains("Fix add so the new test passes"),
        "{}",
        s.prompt(2)
    );
    assert_eq!(s.llm.unused(), 0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_13_an_invalid_config_gets_one_comment_naming_the_line_and_no_run() {
    let mut s = Story::start(
        "story13",
        Some("agent: default\ncompletion:\n  max_iteration: 3\n"),
    )
    .await;
    let n = s.open_issue("do something", "", &["closer"]).await;
    s.idle().await;
    // The label added again: still one comment.
    s.github.label_issue(&s.repo, n, "closer");
    let issue = s.github.issue(&s.repo, n);
    let payload = json!({
        "action": "labeled",
        "label": {"name": "closer"},
        "issue": {"number": n.0, "title": issue.title, "body": null,
                  "user": {"login": MAINTAINER, "id": 1, "type": "User"},
                  "labels": [{"name": "closer"}], "state": "open"},
        "sender": {"login": MAINTAINER, "id": 1, "type": "User"},
    });
    s.deliver("issues", payload).await;
    s.idle().await;

    assert_eq!(s.run_count().await, 0, "no run");
    let comments = s.comments(n);
    assert_eq!(comments.len(), 1, "{comments:#?}");
    let body = &comments[0].body;
    assert!(comments[0].author.is_bot);
    assert!(body.contains(".github/closer.yml:3"), "{body}");
    assert!(body.contains("max_iteration"), "{body}");
    assert!(s.labels(n).iter().all(|l| !l.starts_with("phase:")));
    assert_eq!(s.llm.requests().len(), 0);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_6_commands_in_code_quotes_or_by_the_app_itself_are_ignored() {
    let mut s = Story::start("story6", Some("completion:\n  max_iterations: 1\n")).await;
    let n = s.open_issue("no label yet", "", &["type:docs"]).await;
    let maintainer = || FakeUser::user(MAINTAINER);
    s.comment_as(n, maintainer(), "Try this:\n\n```\n/closer run\n```\n")
        .await;
    s.comment_as(n, maintainer(), "> /closer run\n\nsomeone said that")
        .await;
    s.comment_as(n, maintainer(), "use `/closer run` to start")
        .await;
    // The App's own comment, as GitHub reports it.
    let bot = FakeUser::bot(&s.github.bot_login());
    let id = s.github.comment_as(&s.repo, n, bot.clone(), "/closer run");
    let payload = json!({
        "action": "created",
        "issue": {"number": n.0, "title": "no label yet", "body": null,
                  "user": {"login": MAINTAINER, "id": 1, "type": "User"},
                  "labels": [{"name": "type:docs"}], "state": "open"},
        "comment": {"id": id, "body": "/closer run",
                    "user": {"login": bot.login, "id": 9, "type": "Bot"},
                    "performed_via_github_app": {"id": s.github.app_id()}},
        "sender": {"login": bot.login, "id": 9, "type": "Bot"},
    });
    s.deliver("issue_comment", payload).await;
    s.idle().await;
    assert_eq!(s.run_count().await, 0, "nothing started");
    assert!(s.github.reactions(&s.repo).is_empty());
    assert_eq!(s.bot_comments(n).len(), 1, "only the App's own comment");

    // The same command as plain prose does start a run (the ignoring above
    // is not vacuous).
    s.comment_as(n, maintainer(), "/closer run").await;
    s.idle().await;
    assert_eq!(s.run_count().await, 1);
    let reactions = s.github.reactions(&s.repo);
    assert_eq!(reactions.len(), 1);
    assert_eq!(reactions[0].content, "eyes");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_2_the_agent_asks_the_author_answers_and_the_run_completes() {
    let mut s = Story::start("story2", Some(CONFIG)).await;
    // GitHub creates the question comment but answers 502: the step is
    // retried, finds its comment by the hidden marker and does not ask twice.
    fault_comment_posts(&s, Fault::AfterApplying(502), 1, "closer:once=");
    s.agent_step(1, ASKS_A_QUESTION);
    s.agent_step(2, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue(
            "add subtracts",
            "`add 2 3` prints -1.",
            &["closer", "type:bug"],
        )
        .await;
    s.idle().await;

    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::AwaitingResponse);
    assert!(s.labels(n).iter().any(|l| l == "awaiting-response"));
    let question = question_comments(&s, n);
    assert_eq!(question.len(), 1);
    assert!(question[0].body.contains("@maria"), "{}", question[0].body);
    assert!(question[0].body.contains("negative numbers"));

    // Someone without access comments: nothing changes.
    let before = s.comments(n).len();
    s.comment_as(n, FakeUser::user("mallory"), "yes do it")
        .await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::AwaitingResponse);
    assert!(s.labels(n).iter().any(|l| l == "awaiting-response"));
    assert_eq!(s.comments(n).len(), before + 1, "no answer to mallory");

    // The author answers: the run resumes with the reply and completes.
    s.answer(n).await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}");
    assert!(!s.labels(n).iter().any(|l| l == "awaiting-response"));
    assert!(
        s.prompt(2).contains("Yes, negatives too."),
        "{}",
        s.prompt(2)
    );
    assert!(!s.prompt(2).contains("yes do it"));
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    s.status_comment(n);
    s.stop().await;
}

/// A maintainer comments while iteration 1 works; the agent then asks the
/// author. The comment, written before the question, is no answer to it:
/// reconciliation leaves the run waiting, and the author's answer resumes
/// it, the next prompt carrying both. Before, reconciliation took the
/// unused comment for the answer and resumed the run without one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_comment_written_before_the_question_does_not_answer_it() {
    let mut s = Story::start("before-question", Some(CONFIG)).await;
    let gate = Gate::new(&s);
    s.agent_step(1, &format!("{}\n{ASKS_A_QUESTION}", gate.hold()));
    s.agent_step(2, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    gate.started().await;
    s.comment_as(n, FakeUser::user(MAINTAINER), "Keep the change small.")
        .await;
    s.deliveries_handled().await;
    gate.open();
    s.idle().await;
    s.expect_run(n, RunState::AwaitingResponse, 1).await;

    let engine = s.engine.clone().unwrap();
    let reconciled = engine.reconcile().await.unwrap();
    assert!(reconciled.requeued.is_empty(), "{reconciled:?}");
    s.idle().await;
    s.expect_run(n, RunState::AwaitingResponse, 1).await;

    s.answer(n).await;
    s.expect_run(n, RunState::Done, 2).await;
    let prompt = s.prompt(2);
    assert!(
        prompt.contains("Keep the change small.") && prompt.contains("Yes, negatives too."),
        "{prompt}"
    );
    s.stop().await;
}

/// The agent's test fails, it asks the author, and after the answer the
/// test fails once more before the fix. The question is no attempt at the
/// task: the failure's second sighting in a row of work (iteration 3)
/// brings minimal-fix mode, and the fix completes the run. Before, the
/// question iteration, which changed nothing, counted as a repeat: stage 2
/// at the question, and the answer's iteration stopped the run as going
/// round in circles.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_question_between_two_failing_iterations_is_no_circle() {
    let mut s = Story::start("question-no-circle", Some(CONFIG)).await;
    let not_done = || Reply::closer(false, 0.5, &["Make the test pass"]);
    s.agent_step(1, &add_failing_test());
    s.agent_step(2, ASKS_A_QUESTION);
    s.agent_step(
        3,
        "echo '# negatives too' >> calc.sh\necho '{\"summary\": \"Noted negatives.\"}'\n",
    );
    s.agent_step(4, &fix_add());
    s.llm
        .push([not_done(), not_done(), Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;
    s.expect_run(n, RunState::AwaitingResponse, 2).await;

    s.answer(n).await;
    s.expect_run(n, RunState::Done, 4).await;
    assert!(
        s.prompt(4).contains("400 changed lines"),
        "minimal-fix mode from iteration 3 on:\n{}",
        s.prompt(4)
    );
    s.stop().await;
}

/// A story whose agent asks a question in iteration 1 and fixes `add` in
/// iteration 2; the run is left awaiting the answer.
pub(crate) async fn awaiting_an_answer(name: &str) -> (Story, IssueNumber) {
    let mut s = Story::start(name, Some(CONFIG)).await;
    s.agent_step(1, ASKS_A_QUESTION);
    s.agent_step(2, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::AwaitingResponse);
    (s, n)
}

/// The issue's author, who may not steer closer, answers its question
/// addressed to the App: as a request ("@closer-test …") and with a word
/// the App does not know but could take for a command. Both are answers:
/// the run resumes with them and nobody is refused. Before, both needed
/// the permission to steer: the author was refused and the run waited for
/// ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_authors_answer_addressed_to_the_app_is_an_answer() {
    for (name, answer) in [
        ("answer-mention", "@closer-test yes, negatives too."),
        ("answer-word", "@closer-test stp worrying, negatives too."),
    ] {
        let (mut s, n) = awaiting_an_answer(name).await;
        s.github.set_permission(&s.repo, MAINTAINER, "read");
        s.comment_as(n, FakeUser::user(MAINTAINER), answer).await;
        s.idle().await;
        s.expect_run(n, RunState::Done, 2).await;
        assert!(s.prompt(2).contains("negatives too"), "{}", s.prompt(2));
        let refused = s
            .bot_comments(n)
            .into_iter()
            .filter(|c| c.body.contains("sorry"))
            .count();
        assert_eq!(refused, 0, "{answer}");
        s.stop().await;
    }
}

/// `/closer stop` then `/closer retry` while the run's step judges its
/// agent's work (the completion check is slow): the old step's decision
/// (incomplete, at its iteration limit: failed) is refused, since the run
/// was restarted, and the retry works the issue to completion. Before, the
/// old step wrote over the restart and failed the run, and the retry's
/// `start` found it busy and did nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stop_and_a_retry_while_a_step_judges_leave_the_retry_in_charge() {
    let config = format!("{CONFIG}completion:\n  max_iterations: 1\n");
    let mut s = Story::start("stop-retry-judging", Some(&config)).await;
    s.agent_step(1, &fix_add());
    s.agent_step(
        2,
        "echo '# documented' >> calc.sh\necho '{\"summary\": \"Documented add.\"}'\n",
    );
    s.llm.push([Reply::Slow(
        Duration::from_secs(4),
        Box::new(Reply::closer(false, 0.3, &["add still subtracts"])),
    )]);
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    let deadline = Instant::now() + Duration::from_secs(60);
    while s.llm.requests().is_empty() {
        assert!(Instant::now() < deadline, "no completion check");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer stop")
        .await;
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}\n{}", s.journal().await);
    assert_eq!(run.generation, 1);
    let status = s.status_comment(n);
    assert!(status.body.contains("closer: done"), "{}", status.body);
    s.stop().await;
}

/// `/closer stop` on a run awaiting its answer meets GitHub refusing to
/// take `awaiting-response` off until the client gives up: the stop's
/// delivery, tried again, finishes what the stop shows (the label off, the
/// stopped status). Before, the retry found the run already stopped and
/// did nothing, and the issue kept the label and a waiting status.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stop_meeting_github_down_is_shown_when_its_delivery_is_tried_again() {
    let (mut s, n) = awaiting_an_answer("stop-502").await;
    let label = awaiting_label_refused(&s, n);
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer stop")
        .await;
    s.idle().await;
    stop_shown_after_retries(&s, n, &label).await;
    s.stop().await;
}

/// GitHub answers 502 to the first 5 DELETEs of `awaiting-response` on
/// issue `n` (the client's in-call retries give up); returns that path.
fn awaiting_label_refused(s: &Story, n: IssueNumber) -> String {
    let label = format!("/repos/{REPO}/issues/{}/labels/awaiting-response", n.0);
    s.github
        .inject(Fault::Status(502).times(5).method("DELETE").path(&label));
    label
}

/// The run is stopped and, after the refused DELETEs of `label` were
/// tried again, the issue shows it: the label off, the stopped status.
async fn stop_shown_after_retries(s: &Story, n: IssueNumber, label: &str) {
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Stopped, "{run:#?}");
    assert!(s.github.requests_to("DELETE", label).len() > 5, "retried");
    assert!(!s.labels(n).iter().any(|l| l == "awaiting-response"));
    let status = s.status_comment(n);
    assert!(status.body.contains("stopped"), "{}", status.body);
}

/// The issue is closed by a person while its run waits for an answer, and
/// GitHub refuses the stop's writes for a while: the stop's own step,
/// queued with it, shows the stop once GitHub takes them. Before, the
/// retried `issues.closed` found no open run at triage and was dropped, and
/// the closed issue kept `awaiting-response` under a waiting status.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_close_meeting_github_down_is_shown_by_the_stops_own_step() {
    let (mut s, n) = awaiting_an_answer("close-502").await;
    let label = awaiting_label_refused(&s, n);
    s.close_as(n, MAINTAINER).await;
    s.idle().await;
    stop_shown_after_retries(&s, n, &label).await;
    s.stop().await;
}

/// The answer goes into the next iteration's prompt; that iteration is
/// stopped while its agent works, and the run retried: the answer is in
/// the retried run's prompt again (nobody acted on it). Before, the
/// stopped iteration had used it up.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_a_stopped_iteration_carried_is_carried_again_after_a_retry() {
    let (mut s, n) = awaiting_an_answer("answer-stopped").await;
    let started = s.path("started");
    s.agent_step(2, &format!("touch '{}'\nsleep 120\n", started.display()));
    s.agent_step(3, &fix_add());
    s.comment_as(n, FakeUser::user(MAINTAINER), "Yes, negatives too.")
        .await;
    wait_for_file(&started).await;
    assert!(s.prompt(2).contains("Yes, negatives too."));
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer stop")
        .await;
    s.idle().await;
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    let prompt = s.prompt(3);
    assert!(prompt.contains("Yes, negatives too."), "{prompt}");
    s.stop().await;
}

/// The answer comes, and GitHub refuses to take `awaiting-response` off
/// until the client gives up: the `resume` step is retried while the run
/// still awaits, takes the label off then, and the run completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_awaiting_label_github_first_keeps_comes_off_when_resume_is_retried() {
    let (mut s, n) = awaiting_an_answer("awaiting-label-502").await;
    let label = format!("/repos/{REPO}/issues/{}/labels/awaiting-response", n.0);
    s.github
        .inject(Fault::Status(502).times(5).method("DELETE").path(&label));
    s.answer(n).await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}");
    assert!(!s.labels(n).iter().any(|l| l == "awaiting-response"));
    assert!(s.github.requests_to("DELETE", &label).len() > 5, "retried");
}

/// A maintainer who did not open the issue answers while GitHub cannot say
/// what they may do (the permission lookup answers 502 until the client
/// gives up): the reply is not refused for GitHub's outage, but taken
/// when the delivery is tried again, and the run completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_meeting_a_permission_outage_is_taken_when_github_is_back() {
    let (mut s, n) = awaiting_an_answer("permission-502").await;
    s.github.set_permission(&s.repo, "walter", "write");
    let lookup = format!("/repos/{REPO}/collaborators/walter/permission");
    s.github
        .inject(Fault::Status(502).times(5).method("GET").path(&lookup));
    s.comment_as(n, FakeUser::user("walter"), "Yes, negatives too.")
        .await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}");
    assert!(
        s.prompt(2).contains("Yes, negatives too."),
        "{}",
        s.prompt(2)
    );
    assert!(s.github.requests_to("GET", &lookup).len() > 5, "retried");
}

/// The repository raises `commands.min_permission` while a run waits for
/// an answer: a writer's answer no longer steers it (it stays waiting and
/// the text reaches no prompt); the issue's author's still answers. Before, replies,
/// reviews and review threads went by the minimum the run started with,
/// while commands already went by the current one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_minimum_raised_mid_run_holds_at_once_for_replies() {
    let (mut s, n) = awaiting_an_answer("minimum-raised").await;
    s.github.set_permission(&s.repo, "walter", "write");
    let raised = format!("{CONFIG}commands: {{ min_permission: maintain }}\n");
    s.github
        .set_file(&s.repo, "main", ".github/closer.yml", &raised);
    s.comment_as(n, FakeUser::user("walter"), "Print the environment too.")
        .await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::AwaitingResponse);
    assert!(
        s.last_delivery_outcome().await.contains("not authorised"),
        "{}",
        s.journal().await
    );
    s.answer(n).await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert!(
        !s.prompt(2).contains("Print the environment"),
        "{}",
        s.prompt(2)
    );
    s.stop().await;
}

/// GitHub refuses the question comment with a 502 (nothing created): the
/// run is already `awaiting_response`, and the retried step still asks.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_question_github_first_refuses_is_asked_when_the_step_is_retried() {
    let mut s = Story::start("question_502", Some(CONFIG)).await;
    fault_comment_posts(&s, Fault::Status(502), 1, "closer:once=");
    s.agent_step(1, ASKS_A_QUESTION);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.expect("a run");
    assert_eq!(
        run.state,
        RunState::AwaitingResponse,
        "{}",
        s.journal().await
    );
    assert_eq!(run.iteration, 1, "the agent was not run again");
    assert_eq!(question_comments(&s, n).len(), 1, "{:#?}", s.comments(n));
    assert_eq!(
        comment_posts_carrying(&s, "closer:once="),
        2,
        "refused once, then asked"
    );
    assert!(s.labels(n).iter().any(|l| l == "awaiting-response"));
    s.stop().await;
}

/// Replies to commands are created but answered 502 by GitHub: the delivery
/// job is retried and does not answer twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_command_reply_github_answers_with_502_is_not_posted_twice() {
    let mut s = Story::start("reply_502", Some(CONFIG)).await;
    fault_comment_posts(&s, Fault::AfterApplying(502), 2, "closer:once=");
    s.github.set_permission(&s.repo, "rita", "read");
    let n = s.open_issue("add subtracts", "", &["type:bug"]).await;
    s.comment_as(n, FakeUser::user("rita"), "/closer run").await;
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer status")
        .await;
    s.idle().await;

    let replies = s.bot_comments(n);
    assert_eq!(replies.len(), 2, "{replies:#?}");
    assert!(
        replies.iter().any(|c| c.body.contains("@rita")),
        "{replies:#?}"
    );
    assert_eq!(
        comment_posts_carrying(&s, "closer:once="),
        2,
        "each reply sent once, found by its marker after"
    );
    assert!(s.run(n).await.is_none(), "a reader cannot start a run");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_3_a_confident_closer_does_not_override_a_failing_required_test() {
    let mut s = Story::start(
        "story3",
        Some(&format!("{CONFIG}completion:\n  max_iterations: 1\n")),
    )
    .await;
    s.agent_step(1, &add_failing_test());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Failed, "{run:#?}");
    let issue = s.github.issue(&s.repo, n);
    assert_eq!(issue.state, "open", "not closed");
    assert!(s.github.pulls(&s.repo).is_empty(), "no pull request");
    let status = s.status_comment(n);
    assert!(status.body.contains("Pending actions"), "{}", status.body);
    assert!(
        status.body.contains("tests_pass: sh run_tests.sh"),
        "{}",
        status.body
    );
    let labels = s.labels(n);
    assert!(labels.iter().any(|l| l == "closer:failed"));
    assert!(
        s.bot_comments(n)
            .iter()
            .any(|c| c.body.contains("could not finish"))
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_12_closing_the_issue_mid_run_stops_it_for_good() {
    let mut s = Story::start("story12", Some(CONFIG)).await;
    let started = s.path("started");
    let go = s.path("go");
    s.agent_step(
        1,
        &format!(
            "touch '{}'\nwhile [ ! -f '{}' ]; do sleep 0.05; done\n{}",
            started.display(),
            go.display(),
            add_failing_test()
        ),
    );
    s.agent_step(2, &fix_add());
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    // Mid-run: the agent is at work. (A close before closer handled the
    // opening starts no run at all: decision 232.)
    wait_for_file(&started).await;
    s.close_as(n, MAINTAINER).await;
    s.until(|run| run.is_some_and(|r| r.state == RunState::Stopped), n)
        .await;
    std::fs::write(&go, "").unwrap();
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(
        run.state,
        RunState::Stopped,
        "{run:#?}\n{}",
        s.journal().await
    );
    assert!(run.iteration <= 1);
    assert!(
        !s.path("prompt-2.txt").exists(),
        "the agent did not run again"
    );
    assert!(s.llm.requests().is_empty(), "nothing judged");
    assert!(s.github.pulls(&s.repo).is_empty());
    let status = s.status_comment(n);
    assert!(status.body.contains("stopped"), "{}", status.body);
    s.stop().await;
}

/// `/closer stop` from a maintainer while the agent works ends the agent and
/// what it started within seconds, not when its iteration would have ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stop_command_kills_the_working_agent_and_its_children() {
    let mut s = Story::start("stopcmd", Some(CONFIG)).await;
    let started = s.path("started");
    // The agent runs in its own PID namespace: its `$!` means nothing out
    // here, so its child is found by a command line nobody else has.
    let marker = crate::support::process::unique_sleep();
    // What it spent so far is on its stdout when it is stopped.
    s.agent_step(
        1,
        &format!(
            "echo '{{\"usage\": {{\"input_tokens\": 1200, \"output_tokens\": 34}}, \"total_cost_usd\": 0.25}}'\n\
             sleep {marker} &\ntouch '{}'\nwait\n",
            started.display()
        ),
    );
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    wait_for_file(&started).await;
    let child =
        crate::support::process::process_with_argument(&marker).expect("the agent's sleeper");
    assert!(alive(child), "the agent's child is at work");

    let stopped_at = Instant::now();
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer stop")
        .await;
    // The run job ends only once its agent is gone (without the watch, only
    // after the agent's 300 s: `idle` gives up after 60).
    s.idle().await;
    assert!(
        stopped_at.elapsed() < Duration::from_secs(30),
        "{:?}",
        stopped_at.elapsed()
    );
    assert!(
        gone_within(child, Duration::from_secs(3)).await,
        "the agent's child {child} survived the stop"
    );

    let run = s.run(n).await.unwrap();
    assert_eq!(
        run.state,
        RunState::Stopped,
        "{run:#?}\n{}",
        s.journal().await
    );
    let iterations = runs::iterations(s.store.pool(), &run.id).await.unwrap();
    assert_eq!(iterations.len(), 1);
    assert_eq!(iterations[0].decision, Some(IterationEnd::Stopped));
    assert!(s.llm.requests().is_empty(), "nothing judged");
    assert_eq!(run.tokens_used, 1234, "the stopped agent's tokens count");
    assert!((run.cost_usd - 0.25).abs() < 1e-9, "{}", run.cost_usd);
    assert!(s.github.pulls(&s.repo).is_empty());
    let status = s.status_comment(n);
    assert!(status.body.contains("stopped"), "{}", status.body);
    s.stop().await;
}

/// A run stopped while its agent worked is retried: its history (the
/// stopped iteration, never judged) reads back, the retry works the issue
/// again and completes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_stopped_while_its_agent_worked_is_retried_to_completion() {
    let mut s = Story::start("stop-retry", Some(CONFIG)).await;
    let started = s.path("started");
    s.agent_step(1, &format!("touch '{}'\nsleep 120\n", started.display()));
    s.agent_step(2, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    wait_for_file(&started).await;
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer stop")
        .await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Stopped);

    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    let status = s.status_comment(n);
    assert!(status.body.contains("closer: done"), "{}", status.body);
    s.stop().await;
}

/// A live-progress edit GitHub answers slowly lands after `/closer stop`
/// wrote the stopped status: the stop still has the last word on the
/// issue. Without the check after the edit, the status comment ends on
/// the progress line of a run that is over.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_progress_edit_landing_after_a_stop_leaves_the_stopped_status() {
    let mut s = Story::start("stop-progress", Some(CONFIG)).await;
    s.kill_workers();
    s.progress_every = Some(Duration::from_millis(300));
    s.spawn_workers();
    let started = s.path("started");
    s.agent_step(1, &format!("touch '{}'\nsleep 120\n", started.display()));
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    wait_for_file(&started).await;
    let progress_edits = |s: &Story| -> Vec<Instant> {
        s.github
            .requests_to("PATCH", "/repos/octo/calc/issues/comments/")
            .into_iter()
            .filter(|r| r.body.contains("**Now:**"))
            .map(|r| r.at)
            .collect()
    };
    s.github.inject(
        Fault::Delay(Duration::from_secs(8))
            .times(1)
            .method("PATCH")
            .body("**Now:**"),
    );
    // The first progress edit recorded from now on is the slow one (a
    // fault applies to the next matching request, recorded as it comes).
    let injected = Instant::now();
    let deadline = injected + Duration::from_secs(30);
    let slow_sent = loop {
        let sent = progress_edits(&s).into_iter().find(|at| *at >= injected);
        if let Some(at) = sent {
            break at;
        }
        assert!(Instant::now() < deadline, "no progress edit");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // The slow edit is on its way; the stop overtakes it.
    let lands = slow_sent + Duration::from_secs(8);
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer stop")
        .await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Stopped, "{}", s.journal().await);

    // The race was run: the stop's status went out before the slow edit
    // landed.
    let stop_sent = s
        .github
        .requests_to("PATCH", "/repos/octo/calc/issues/comments/")
        .into_iter()
        .find(|r| r.at > slow_sent && r.body.contains("stopped"))
        .map(|r| r.at)
        .expect("the stop's status");
    assert!(
        stop_sent < lands,
        "the stop came after the slow edit landed"
    );
    tokio::time::sleep_until((lands + Duration::from_millis(500)).into()).await;
    // The slow edit has landed; the stopped status is written again after
    // it (through the throttle, a second or so).
    let deadline = Instant::now() + Duration::from_secs(10);
    let restored = |body: &str| body.contains("stopped") && !body.contains("**Now:**");
    while !restored(&s.status_comment(n).body) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = s.status_comment(n);
    assert!(restored(&status.body), "{}", status.body);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_4_the_same_failure_repeating_goes_to_minimal_fix_then_fails() {
    let mut s = Story::start("story4", Some(CONFIG)).await;
    s.agent_step(1, &add_failing_test());
    for n in 2..=6 {
        s.agent_step(n, "echo '{\"summary\": \"Tried again.\"}'\n");
    }
    s.llm
        .push((0..6).map(|_| Reply::closer(false, 0.5, &["Make the test pass"])));
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Failed, "{run:#?}");
    assert_eq!(
        run.outcome.as_ref().map(ToString::to_string).as_deref(),
        Some("failed: convergence stage 3")
    );
    assert!(run.iteration < 10, "stopped by convergence, not the limit");
    let minimal: Vec<u32> = (1..=run.iteration as u32)
        .filter(|i| s.prompt(*i).contains("Minimal-fix mode"))
        .collect();
    assert!(!minimal.is_empty(), "a stage-2 prompt was sent");
    assert!(!s.prompt(1).contains("Minimal-fix mode"));
    assert!(s.labels(n).iter().any(|l| l == "closer:failed"));
    let diagnosis: Vec<_> = s
        .bot_comments(n)
        .into_iter()
        .filter(|c| c.body.contains("could not finish"))
        .collect();
    assert_eq!(diagnosis.len(), 1);
    assert!(
        diagnosis[0].body.contains("convergence"),
        "{}",
        diagnosis[0].body
    );
    assert_eq!(s.github.issue(&s.repo, n).state, "open");

    // A maintainer retries, and this time the agent gets it right: the
    // iteration is judged on its own evidence, not failed again for the
    // repeats that stopped the first attempt.
    s.llm.forget_unused();
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    s.agent_step(run.iteration as u32 + 1, &fix_add());
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;
    let retried = s.run(n).await.unwrap();
    assert_eq!(retried.state, RunState::Done, "{retried:#?}");
    assert_eq!(retried.iteration, run.iteration + 1);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_5_retry_by_a_maintainer_resumes_a_failed_run_a_reader_is_refused() {
    let mut s = Story::start(
        "story5",
        Some(&format!("{CONFIG}completion:\n  max_iterations: 1\n")),
    )
    .await;
    s.github.set_permission(&s.repo, "rita", "read");
    s.agent_step(1, &add_failing_test());
    s.agent_step(2, &fix_add());
    s.llm.push([
        Reply::closer(false, 0.5, &["Make the test pass"]),
        Reply::closer(true, 0.95, &[]),
    ]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);
    let status_before = s.status_comment(n);

    // A reader: one polite refusal, nothing else.
    let bot_before = s.bot_comments(n).len();
    s.comment_as(n, FakeUser::user("rita"), "/closer retry")
        .await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);
    let bot = s.bot_comments(n);
    assert_eq!(bot.len(), bot_before + 1);
    assert!(bot.last().unwrap().body.contains("@rita, sorry"));
    assert!(s.github.reactions(&s.repo).is_empty());

    // The maintainer: the run goes on with a new iteration, same status comment.
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}");
    assert_eq!(run.iteration, 2);
    assert_eq!(s.status_comment(n).id, status_before.id);
    assert!(!s.labels(n).iter().any(|l| l == "closer:failed"));
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_7_duplicate_and_repeated_deliveries_make_one_run() {
    let mut s = Story::start("story7", Some(CONFIG)).await;
    s.agent_step(1, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .github
        .open_issue(&s.repo, MAINTAINER, "add subtracts", "");
    s.github.label_issue(&s.repo, n, "closer");
    s.github.label_issue(&s.repo, n, "type:bug");
    let body = serde_json::to_vec(&json!({
        "action": "opened",
        "installation": {"id": crate::support::story::INSTALLATION},
        "repository": {"full_name": REPO, "clone_url": s.origin.url, "default_branch": "main"},
        "issue": {"number": n.0, "title": "add subtracts", "body": null,
                  "user": {"login": MAINTAINER, "id": 1, "type": "User"},
                  "labels": [{"name": "closer"}, {"name": "type:bug"}], "state": "open"},
        "sender": {"login": MAINTAINER, "id": 1, "type": "User"},
    }))
    .unwrap();
    s.deliver_raw("issues", "dup-1", &body).await;
    s.deliver_raw("issues", "dup-1", &body).await;
    s.idle().await;
    // GitHub's "redeliver" later, and the same event under a new id.
    s.deliver_raw("issues", "dup-1", &body).await;
    s.deliver_raw("issues", "dup-2", &body).await;
    s.idle().await;

    assert_eq!(s.run_count().await, 1);
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done);
    assert_eq!(run.iteration, 1);
    s.status_comment(n);
    assert_eq!(s.comments(n).len(), 1);
    assert_eq!(s.github.pulls(&s.repo).len(), 1);
    s.stop().await;
}

/// Story 10's question, asked on a repository with `config` and answered
/// by the agent; the story is idle after it.
pub(crate) async fn story_10_asked(name: &str, config: &str) -> (Story, IssueNumber) {
    let mut s = Story::start(name, Some(config)).await;
    let answer = "echo 'The tests folder holds one script: existing.sh.'\n";
    let n = ask_what_is_in_tests(&mut s, answer).await;
    (s, n)
}

/// Story 10's question asked on the story's repository, the agent's
/// `answer` script the first iteration's; the story is idle after it.
pub(crate) async fn ask_what_is_in_tests(s: &mut Story, answer: &str) -> IssueNumber {
    s.agent_step(1, answer);
    s.llm
        .push([classify("read_info"), Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue(
            "list the files in tests/",
            "What is in tests/?",
            &["closer"],
        )
        .await;
    s.idle().await;
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_10_a_read_info_issue_is_answered_and_closed_without_a_pull_request() {
    let (s, n) = story_10_asked("story10", CONFIG).await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}");
    assert_eq!(run.task_type, Some(TaskType::ReadInfo));
    let issue = s.github.issue(&s.repo, n);
    assert_eq!(issue.state, "closed");
    assert_eq!(issue.state_reason.as_deref(), Some("completed"));
    assert!(s.github.pulls(&s.repo).is_empty(), "no pull request");
    let answers: Vec<_> = s
        .bot_comments(n)
        .into_iter()
        .filter(|c| c.body.contains("existing.sh"))
        .filter(|c| !c.body.starts_with("<!--"))
        .collect();
    assert_eq!(answers.len(), 1, "the answer is posted once");
    assert_eq!(
        s.origin.branch_head("closer/issue-1"),
        None,
        "nothing pushed"
    );
    s.stop().await;
}

/// Story 10 under `close_on: merged`: the repository closes issues only on
/// a person's word, and an answer has no pull request to give it on, so
/// the run is done with the answer posted and the issue left open for a
/// person to close. Before, the answer closed the issue as completed,
/// whatever the repository asked (and the issue's text can steer the
/// classification towards an answer).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_10_under_close_on_merged_an_answer_leaves_the_issue_open() {
    let config = format!("{CONFIG}close_on: merged\n");
    let (s, n) = story_10_asked("story10-open", &config).await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert_eq!(s.github.issue(&s.repo, n).state, "open");
    let answer = s
        .bot_comments(n)
        .into_iter()
        .find(|c| c.body.contains("existing.sh") && !c.body.starts_with("<!--"))
        .expect("the answer");
    assert!(
        answer
            .body
            .contains("close this one if the answer settles it"),
        "{}",
        answer.body
    );
    assert!(s.labels(n).contains(&"phase:complete".to_owned()));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_11_close_on_merged_waits_for_the_merge() {
    let mut s = Story::start("story11", Some(&format!("{CONFIG}close_on: merged\n"))).await;
    s.agent_step(1, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;

    assert_eq!(s.github.issue(&s.repo, n).state, "open");
    assert!(s.labels(n).iter().any(|l| l == "phase:review"));
    let pulls = s.github.pulls(&s.repo);
    assert_eq!(pulls.len(), 1);
    assert_eq!(s.run(n).await.unwrap().state, RunState::Verifying);

    // A fork's pull request with a head branch of the same name is not
    // closer's: it does not complete the run.
    s.merged_from(IssueNumber(99), "closer/issue-1", "mallory/calc")
        .await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Verifying);
    assert_eq!(s.github.issue(&s.repo, n).state, "open");

    s.merge_as(IssueNumber(pulls[0].number), MAINTAINER).await;
    s.idle().await;
    let issue = s.github.issue(&s.repo, n);
    assert_eq!(issue.state, "closed");
    assert_eq!(issue.state_reason.as_deref(), Some("completed"));
    let labels = s.labels(n);
    assert!(labels.iter().any(|l| l == "phase:complete"));
    assert!(!labels.iter().any(|l| l == "phase:review"));
    assert_eq!(s.run(n).await.unwrap().state, RunState::Done);
    s.stop().await;
}

/// `close_on: merged`, and the webhooks are missed: reconciliation reads
/// the pull request of a run waiting for its merge, completes the run once
/// it is merged, and fails one whose pull request was closed unmerged; a
/// run whose issue a person closed meanwhile is stopped. Before, all three
/// waited forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reconciliation_ends_a_run_whose_pull_request_ended_behind_its_back() {
    let config = format!("{CONFIG}close_on: merged\n");
    let mut s = Story::start("reconcile-merge", Some(&config)).await;
    let mut issues = Vec::new();
    for title in ["add subtracts", "add again", "add once more"] {
        s.agent_step(1, &fix_add());
        s.llm.push([Reply::closer(true, 0.95, &[])]);
        issues.push(s.open_issue(title, "", &["closer", "type:bug"]).await);
        s.idle().await;
    }
    let [a, b, c] = issues[..] else {
        unreachable!()
    };
    let engine = s.engine.clone().unwrap();
    assert_eq!(engine.reconcile().await.unwrap(), Default::default());
    let (run_a, run_b) = (s.run(a).await.unwrap(), s.run(b).await.unwrap());
    assert_eq!(run_a.state, RunState::Verifying);
    assert_eq!(run_b.state, RunState::Verifying);
    assert_eq!(s.run(c).await.unwrap().state, RunState::Verifying);

    s.github.merge_pull(&s.repo, run_a.pull_request.unwrap());
    s.github.close_pull(&s.repo, run_b.pull_request.unwrap());
    s.github.set_issue_state(&s.repo, c, "closed");
    let done = engine.reconcile().await.unwrap();
    assert_eq!(done.requeued.len(), 2, "{done:?}");
    assert_eq!(done.stopped.len(), 1, "{done:?}");
    s.idle().await;
    assert_eq!(s.run(a).await.unwrap().state, RunState::Done);
    assert_eq!(s.github.issue(&s.repo, a).state, "closed");
    assert_eq!(s.run(b).await.unwrap().state, RunState::Failed);
    assert_eq!(s.run(c).await.unwrap().state, RunState::Stopped);
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_over_its_token_budget_stops_with_a_clear_comment() {
    let mut s = Story::start(
        "budget",
        Some(&format!("{CONFIG}budget: {{ max_tokens: 200 }}\n")),
    )
    .await;
    s.agent_step(1, &add_failing_test());
    s.agent_step(2, &fix_add());
    // Each fake LLM answer reports 120 tokens.
    s.llm.push([
        classify("bug"),
        Reply::closer(false, 0.5, &["Make the test pass"]),
    ]);
    let n = s.open_issue("add subtracts", "", &["closer"]).await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Failed, "{run:#?}");
    assert_eq!(run.tokens_used, 240);
    assert_eq!(run.iteration, 1);
    assert!(
        !s.path("prompt-2.txt").exists(),
        "no iteration past the budget"
    );
    let diagnosis: Vec<_> = s
        .bot_comments(n)
        .into_iter()
        .filter(|c| c.body.contains("token budget"))
        .collect();
    assert_eq!(diagnosis.len(), 1);
    assert!(s.labels(n).iter().any(|l| l == "closer:failed"));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_over_its_cost_budget_stops_with_a_clear_comment() {
    let mut s = Story::start(
        "cost",
        Some(&format!("{CONFIG}budget: {{ max_cost_usd: 0.5 }}\n")),
    )
    .await;
    // The agent reports what it spent, as claude-code does.
    s.agent_step(
        1,
        r#"echo note > notes.txt
echo '{"summary": "Tried.", "total_cost_usd": 0.75, "usage": {"input_tokens": 1000, "output_tokens": 500}}'
"#,
    );
    s.agent_step(2, &fix_add());
    s.llm.push([
        classify("bug"),
        Reply::closer(false, 0.5, &["Make the test pass"]),
    ]);
    let n = s.open_issue("add subtracts", "", &["closer"]).await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Failed, "{run:#?}");
    assert_eq!(run.iteration, 1);
    assert!((run.cost_usd - 0.75).abs() < 1e-9, "{}", run.cost_usd);
    // The LLM's 240 tokens and the agent's 1500.
    assert_eq!(run.tokens_used, 1740);
    assert!(
        !s.path("prompt-2.txt").exists(),
        "no iteration past the budget"
    );
    let diagnosis: Vec<_> = s
        .bot_comments(n)
        .into_iter()
        .filter(|c| c.body.contains("cost budget would be exceeded"))
        .collect();
    assert_eq!(diagnosis.len(), 1, "{diagnosis:#?}");
    assert!(diagnosis[0].body.contains("0.75"), "{}", diagnosis[0].body);
    assert!(s.labels(n).iter().any(|l| l == "closer:failed"));
    s.stop().await;
}

/// A story whose repository's config names the board `octo/7` (a Status
/// field with GitHub's "Board" options), its issue fixed in one iteration
/// and done.
async fn done_on_a_board(name: &str) -> (Story, IssueNumber) {
    use crate::support::fake_github::projects::ProjectOwner;
    let config = format!("{CONFIG}project: {{ owner: octo, number: 7 }}\n");
    let mut s = Story::start(name, Some(&config)).await;
    s.github.add_project(
        ProjectOwner::org("octo"),
        7,
        &[("Status", &["Todo", "In progress", "In review", "Done"])],
    );
    s.agent_step(1, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;
    (s, n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_14_the_project_board_status_follows_the_phases() {
    let (s, n) = done_on_a_board("story14").await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Done);
    let node = s.github.issue_node_id(&s.repo, n);
    assert_eq!(
        s.github.project_item_status("octo", 7, &node).as_deref(),
        Some("Done")
    );
    let updates = s
        .github
        .requests_to("POST", "/graphql")
        .into_iter()
        .filter(|r| r.body.contains("updateProjectV2ItemFieldValue"))
        .count();
    assert_eq!(updates, 4, "one update per phase");
    s.stop().await;
}

/// The run is done and its issue shows Done on the board; the maintainer
/// closes the pull request unmerged: the run fails, its `phase:*` label
/// comes off, and so does its status on the board (the item shows under
/// "No Status", not Done). Before, the board still said Done.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pull_request_closed_unmerged_empties_the_issues_status_on_the_board() {
    let (mut s, n) = done_on_a_board("board-pull-closed").await;
    let node = s.github.issue_node_id(&s.repo, n);
    let status = |s: &Story| s.github.project_item_status("octo", 7, &node);
    assert_eq!(status(&s).as_deref(), Some("Done"));

    let pull = s.the_pull();
    s.close_pull_as(pull, MAINTAINER).await;
    s.idle().await;

    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);
    assert!(!s.labels(n).iter().any(|l| l.starts_with("phase:")));
    assert_eq!(status(&s), None);
    s.stop().await;
}

/// The run is done and its issue shows Done on the board; a person takes
/// the issue's card off the board, then the maintainer closes the pull
/// request unmerged: the run fails, and the issue stays off the board.
/// Before, emptying the status put the card back under "No Status".
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_card_taken_off_the_board_is_not_put_back_when_the_run_fails() {
    let (mut s, n) = done_on_a_board("board-card-removed").await;
    let node = s.github.issue_node_id(&s.repo, n);
    s.github.remove_project_item("octo", 7, &node);

    let pull = s.the_pull();
    s.close_pull_as(pull, MAINTAINER).await;
    s.idle().await;

    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);
    let board = s.github.project("octo", 7);
    assert!(!board.items.contains_key(&node), "{board:#?}");
    // The look was made: the issue's items were read, not skipped.
    let reads = s.github.requests_to("POST", "/graphql");
    assert!(reads.iter().any(|r| r.body.contains("projectItems")));
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_board_without_the_status_field_is_reported_once_and_the_run_goes_on() {
    use crate::support::fake_github::projects::ProjectOwner;
    let mut s = Story::start(
        "board-missing",
        Some(&format!("{CONFIG}project: {{ owner: octo, number: 7 }}\n")),
    )
    .await;
    s.github
        .add_project(ProjectOwner::org("octo"), 7, &[("Stage", &["Todo"])]);
    s.agent_step(1, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;

    assert_eq!(s.run(n).await.unwrap().state, RunState::Done);
    let status = s.status_comment(n);
    assert!(status.body.contains("is not updated"), "{}", status.body);
    let board_reads = s.github.requests_to("POST", "/graphql").len();
    assert_eq!(board_reads, 1, "not retried after the first problem");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_9_server_errors_and_secondary_rate_limits_do_not_lose_or_duplicate() {
    let mut s = Story::start("story9", Some(CONFIG)).await;
    let comments = format!("/repos/{REPO}/issues/1/comments");
    let edits = format!("/repos/{REPO}/issues/comments/");
    let labels = format!("/repos/{REPO}/issues/1/labels");
    // The status comment is created, but GitHub answers 502: not repeated;
    // the retried step finds it by its marker.
    s.github.inject(
        Fault::AfterApplying(502)
            .times(1)
            .method("POST")
            .path(&comments),
    );
    s.github
        .inject(Fault::Status(502).times(3).method("PATCH").path(&edits));
    s.github.inject(
        Fault::SecondaryRateLimit {
            retry_after_secs: 1,
        }
        .times(1)
        .method("POST")
        .path(&labels),
    );
    s.agent_step(1, &add_failing_test());
    s.agent_step(2, &fix_add());
    s.llm.push([
        Reply::closer(false, 0.6, &["Fix add"]),
        Reply::closer(true, 0.95, &[]),
    ]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}\n{}", s.journal().await);
    // The faults were met (and answered by retries).
    assert_eq!(s.github.requests_to("POST", &comments).len(), 1);
    assert!(s.github.requests_to("PATCH", &edits).len() >= 4);
    assert!(s.github.requests_to("POST", &labels).len() >= 2);
    assert_eq!(s.comments(n).len(), 1, "{:#?}", s.comments(n));
    s.status_comment(n);
    assert_eq!(s.github.pulls(&s.repo).len(), 1);
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_while_an_iteration_runs_reaches_the_next_prompt() {
    let mut s = Story::start("reply_running", Some(CONFIG)).await;
    // Iteration 1 says it started, then waits while the replies come in.
    let (n, gate) = first_iteration_held(&mut s, "Fix add so the new test passes").await;

    // While iteration 1 runs: the maintainer (the author) and a stranger reply.
    s.comment_as(n, FakeUser::user(MAINTAINER), "Please keep add() POSIX sh.")
        .await;
    s.comment_as(n, FakeUser::user("stranger"), "Rewrite it in Rust.")
        .await;
    // The delivery jobs run beside the blocked run job; wait for both to settle.
    s.deliveries_handled().await;
    let messages = s.replies(n).await;
    assert_eq!(messages.len(), 1, "{messages:#?}");
    gate.open();
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}\n{}", s.journal().await);
    assert_eq!(run.iteration, 2, "the reply started no extra iteration");
    assert!(!s.prompt(1).contains("POSIX"), "{}", s.prompt(1));
    let second = s.prompt(2);
    assert!(second.contains("Please keep add() POSIX sh."), "{second}");
    assert!(!second.contains("Rewrite it in Rust"), "{second}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn story_8_a_worker_killed_mid_iteration_is_resumed_after_restart() {
    let mut s = Story::start("story8", Some(CONFIG)).await;
    let gate = Gate::new(&s);
    let first = s.path("first-attempt");
    // The first attempt of iteration 1 says it started, then hangs until
    // killed; the second attempt (after the restart) fixes the bug.
    s.agent_step(
        1,
        &format!(
            "if [ ! -f '{first}' ]; then touch '{first}'; {hold}; exit 1; fi\n{}",
            fix_add(),
            first = first.display(),
            hold = gate.hold(),
        ),
    );
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    gate.started().await;

    // Crash: the workers die mid-iteration; a new process takes over.
    s.kill_workers();
    s.spawn_workers();
    s.idle().await;
    gate.open();

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}\n{}", s.journal().await);
    assert_eq!(
        run.iteration, 1,
        "the interrupted iteration ran again as itself"
    );
    s.status_comment(n);
    assert_eq!(s.comments(n).len(), 1);
    assert_eq!(s.github.pulls(&s.repo).len(), 1);
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reconciliation_requeues_a_run_without_a_step_and_stops_one_closed_behind_our_back() {
    let mut s = Story::start("reconcile", Some(CONFIG)).await;
    s.agent_step(1, ASKS_A_QUESTION);
    s.agent_step(2, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let a = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    let b = s.open_issue("another", "", &["closer", "type:bug"]).await;
    s.idle().await;
    let run_a = s.run(a).await.unwrap();
    let run_b = s.run(b).await.unwrap();
    assert_eq!(run_a.state, RunState::AwaitingResponse);
    assert_eq!(run_b.state, RunState::AwaitingResponse);
    let engine = s.engine.clone().unwrap();
    assert_eq!(
        engine.reconcile().await.unwrap(),
        Default::default(),
        "nothing to do"
    );

    // Run a: resumed in the database but its step was lost (a crash between
    // the two writes). Issue b: closed on GitHub, the webhook missed.
    sqlx::query("UPDATE runs SET state = 'running' WHERE id = $1")
        .bind(run_a.id.as_str())
        .execute(s.store.pool())
        .await
        .unwrap();
    s.api()
        .await
        .close_issue(&s.repo, b, closer::github::StateReason::NotPlanned)
        .await
        .unwrap();
    let done = engine.reconcile().await.unwrap();
    assert_eq!(done.requeued, vec![run_a.id.clone()]);
    assert_eq!(done.stopped, vec![run_b.id.clone()]);
    s.idle().await;
    assert_eq!(s.run(a).await.unwrap().state, RunState::Done);
    assert_eq!(s.run(b).await.unwrap().state, RunState::Stopped);
    s.stop().await;
}

/// A step that fails for good every time (GitHub refuses the pull
/// request, whatever is tried): reconciliation queues it again until it
/// has failed three times in a row, then fails the run with a diagnosis
/// that says so, and queues nothing more. Before, it queued the step on
/// every pass, for ever, while the run said it was working.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_step_that_keeps_failing_fails_the_run_with_a_diagnosis() {
    let (mut s, n, run) = a_run_whose_finish_dies("dead-steps").await;
    let engine = s.engine.clone().unwrap();
    reconciled_until_failed(&mut s, &engine, &run).await;
    let diagnosis = s
        .bot_comments(n)
        .into_iter()
        .find(|c| c.body.contains("could not carry the run forward"))
        .expect("a diagnosis");
    assert!(
        diagnosis.body.contains("3 times in a row"),
        "{}",
        diagnosis.body
    );
    assert!(s.labels(n).contains(&"closer:failed".to_owned()));
    assert_eq!(engine.reconcile().await.unwrap(), Default::default());

    // A retry is the run's new life: its first step to die is its first
    // death, not the fourth. Here the retried run's start step dies (GitHub
    // refuses to take `closer:failed` off); before, reconciliation failed
    // the run again at once.
    let failed_label = format!("/repos/{REPO}/issues/{}/labels/closer", n.0);
    s.github.inject(
        Fault::Status(422)
            .times(1_000)
            .method("DELETE")
            .path(&failed_label),
    );
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;
    assert_eq!(
        s.run(n).await.unwrap().state,
        RunState::Queued,
        "{}",
        s.journal().await
    );
    // GitHub takes the label off and the pull request again: done.
    s.github.clear_faults();
    let done = engine.reconcile().await.unwrap();
    assert_eq!(done.requeued, std::slice::from_ref(&run.id), "{done:?}");
    s.agent_step(2, "echo '{\"summary\": \"The fix is on the branch.\"}'\n");
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    s.idle().await;
    let retried = s.run(n).await.unwrap();
    assert_eq!(retried.state, RunState::Done, "{}", s.journal().await);
    s.stop().await;
}

/// A verified run whose `finish` step dies every time: GitHub refuses its
/// pull request for good.
/// The process dies while reconciliation reports the run it just failed
/// (a rolling upgrade's SIGTERM ends the pass: here the pass is dropped
/// while GitHub takes its time over the `closer:failed` label). The step
/// queued with the failure reports it: the label and the diagnosis. Before,
/// nothing came for a failed run, and its issue said "working" for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failure_reconciliation_could_not_report_is_reported_by_its_step() {
    let (mut s, n, run) = a_run_whose_finish_dies("dead-steps-cut").await;
    let engine = s.engine.clone().unwrap();
    for _ in 1..closer::engine::run::MAX_DEAD_STEPS {
        engine.reconcile().await.unwrap();
        s.idle().await;
    }
    let labels = format!("/repos/{REPO}/issues/{}/labels", n.0);
    let slow = Fault::Hang(Duration::from_secs(30));
    s.github.inject(slow.times(1).method("POST").path(&labels));
    let cut = tokio::time::timeout(Duration::from_secs(2), engine.reconcile()).await;
    assert!(cut.is_err(), "the pass was still reporting");
    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);

    s.idle().await;
    assert!(s.labels(n).contains(&"closer:failed".to_owned()));
    let diagnosis = s
        .bot_comments(n)
        .into_iter()
        .find(|c| c.body.contains("could not carry the run forward"));
    assert!(diagnosis.is_some(), "{}", s.journal().await);
    assert_eq!(s.run(n).await.unwrap().id, run.id);
    s.stop().await;
}

/// GitHub refuses, for good, to show the issue to closer (a permission
/// taken from the App): reconciliation cannot ask whether the run should
/// stop, and still fails the run whose steps keep dying. Before, the
/// refusal ended each pass before the count, and the run said "working"
/// for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_whose_issue_github_refuses_to_show_is_still_failed_when_its_steps_die() {
    let (mut s, n, run) = a_run_whose_finish_dies("dead-steps-403").await;
    let issue = format!("/repos/{REPO}/issues/{}", n.0);
    let refused = Fault::Status(403)
        .times(1_000)
        .method("GET")
        .only_path(&issue);
    s.github.inject(refused);
    let engine = s.engine.clone().unwrap();
    reconciled_until_failed(&mut s, &engine, &run).await;
    s.stop().await;
}

/// Reconciliation passes over `run`, whose steps keep dying: each queues
/// the step again until the last, which fails the run.
async fn reconciled_until_failed(s: &mut Story, engine: &closer::engine::run::Engine, run: &Run) {
    for _ in 1..closer::engine::run::MAX_DEAD_STEPS {
        let done = engine.reconcile().await.unwrap();
        assert_eq!(done.requeued, std::slice::from_ref(&run.id), "{done:?}");
        s.idle().await;
    }
    let done = engine.reconcile().await.unwrap();
    assert_eq!(done.failed, std::slice::from_ref(&run.id), "{done:?}");
    s.idle().await;
    let state = s.run(run.issue_number).await.unwrap().state;
    assert_eq!(state, RunState::Failed);
}

pub(crate) async fn a_run_whose_finish_dies(name: &str) -> (Story, IssueNumber, Run) {
    let mut s = Story::start(name, Some(CONFIG)).await;
    s.deaths_expected = true;
    s.github.inject(
        Fault::Status(422)
            .times(1_000)
            .method("POST")
            .path(&format!("/repos/{REPO}/pulls")),
    );
    s.agent_step(1, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Verifying, "{}", s.journal().await);
    (s, n, run)
}

/// Somebody opened a pull request from the run's branch before closer did
/// (GitHub lets anyone who can read the repository open one between two of
/// its branches). closer does not take it over: its description and closing
/// keywords stay its author's to edit, so it could never carry closer's
/// verified text. The run fails at once, saying what to do; the pull
/// request is left as its author wrote it. Before, closer rewrote its title
/// and body and recorded it as the run's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_pull_request_somebody_else_opened_from_the_branch_is_not_taken_over() {
    let mut s = Story::start("foreign-pull", Some(CONFIG)).await;
    let theirs = s.github.open_pull_as(
        &s.repo,
        FakeUser::user("mallory"),
        "closer/issue-2",
        "main",
        "Mine",
    );
    s.agent_step(1, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    assert_eq!(n.0, 2, "the pull request took number 1");
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Failed, "{}", s.journal().await);
    assert_eq!(run.pull_request, None);
    let pulls = s.github.pulls(&s.repo);
    assert_eq!(pulls.len(), 1, "closer opened none: {pulls:#?}");
    assert_eq!(
        (pulls[0].number, pulls[0].title.as_str()),
        (theirs.0, "Mine")
    );
    assert_eq!(pulls[0].body, None);
    let diagnosis = s
        .bot_comments(n)
        .into_iter()
        .find(|c| c.body.contains("closer could not finish"))
        .expect("a diagnosis");
    assert!(
        diagnosis
            .body
            .contains("was opened by mallory, not by closer"),
        "{}",
        diagnosis.body
    );
    s.stop().await;
}

/// A run left `awaiting_response` without its question posted (its step's
/// job gave up) is picked up by reconciliation, which resumes the question.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reconciliation_resumes_a_question_that_was_never_posted() {
    let mut s = Story::start("reconcile_question", Some(CONFIG)).await;
    s.agent_step(1, ASKS_A_QUESTION);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::AwaitingResponse);
    let engine = s.engine.clone().unwrap();
    assert_eq!(engine.reconcile().await.unwrap(), Default::default());

    // As if the step had died after saving the state, before recording the
    // question (the comment itself may or may not have been created).
    let mut data: serde_json::Value = serde_json::from_str(&run.data).unwrap();
    data["question_posted"] = serde_json::Value::Null;
    sqlx::query("UPDATE runs SET data = $1 WHERE id = $2")
        .bind(data.to_string())
        .bind(run.id.as_str())
        .execute(s.store.pool())
        .await
        .unwrap();
    let done = engine.reconcile().await.unwrap();
    assert_eq!(done.requeued, vec![run.id.clone()]);
    s.idle().await;

    let after = s.run(n).await.unwrap();
    assert_eq!(after.state, RunState::AwaitingResponse);
    assert_eq!(after.iteration, 1, "the agent was not run again");
    let data: serde_json::Value = serde_json::from_str(&after.data).unwrap();
    assert_eq!(data["question_posted"], json!(1));
    assert_eq!(
        question_comments(&s, n).len(),
        1,
        "found by its marker, not asked twice"
    );
    assert_eq!(engine.reconcile().await.unwrap(), Default::default());
    s.stop().await;
}

/// The author answers while the step that asked is still writing (its status
/// edit hangs at GitHub): the reply resumes the run all the same, because
/// only the run's own steps change its state.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_while_the_question_is_still_being_written_resumes_the_run() {
    let mut s = Story::start("reply_race", Some(CONFIG)).await;
    let edits = format!("/repos/{REPO}/issues/comments/");
    s.github.inject(
        Fault::Hang(Duration::from_millis(1500))
            .times(1)
            .method("PATCH")
            .path(&edits)
            .body("awaiting response"),
    );
    s.agent_step(1, ASKS_A_QUESTION);
    s.agent_step(2, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.github
        .received("PATCH", &edits, "awaiting response")
        .await;
    s.answer(n).await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}\n{}", s.journal().await);
    assert_eq!(run.iteration, 2);
    assert!(s.prompt(2).contains("Yes, negatives too."));
    assert!(!s.labels(n).iter().any(|l| l == "awaiting-response"));
    s.stop().await;
}

/// The trigger label is a command too: put on by a user below
/// `commands.min_permission` (here a triage user) it starts nothing, gets
/// one short refusal and is taken off; a maintainer's label starts the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_trigger_label_from_a_triage_user_is_refused_and_removed() {
    let mut s = Story::start("label-triage", Some(CONFIG)).await;
    s.github.set_permission(&s.repo, "trinity", "triage");
    let n = s.open_issue("add subtracts", "", &["type:bug"]).await;
    s.idle().await;
    s.label_as(n, "trinity", "closer").await;
    s.idle().await;
    assert!(s.run(n).await.is_none(), "no run");
    assert!(
        !s.labels(n).contains(&"closer".to_owned()),
        "{:?}",
        s.labels(n)
    );
    let comments = s.bot_comments(n);
    assert_eq!(comments.len(), 1, "{comments:#?}");
    assert!(
        comments[0].body.contains("@trinity") && comments[0].body.contains("`write`"),
        "{}",
        comments[0].body
    );
    // Again: still refused, not a second comment.
    s.label_as(n, "trinity", "closer").await;
    s.idle().await;
    assert_eq!(s.bot_comments(n).len(), 1);
    assert!(s.run(n).await.is_none());

    // The control: the same label from a maintainer starts the run.
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    s.agent_step(1, &fix_add());
    s.label_as(n, MAINTAINER, "closer").await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Done);
}

/// A story whose runs get one iteration each, and whose agent fails the
/// test in the first two: a run that fails, and fails again when restarted.
async fn failing_twice(name: &str) -> Story {
    let s = Story::start(
        name,
        Some(&format!("{CONFIG}completion:\n  max_iterations: 1\n")),
    )
    .await;
    s.agent_step(1, &add_failing_test());
    s.agent_step(2, &add_failing_test());
    s.llm.push([
        Reply::closer(false, 0.5, &["Make the test pass"]),
        Reply::closer(false, 0.5, &["Make the test pass"]),
    ]);
    s
}

/// A command comment is acted on once, whatever delivery carries it: a
/// captured `/closer retry` replayed under a new delivery id after the run
/// failed again does not restart it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replayed_retry_command_does_not_restart_the_run() {
    let mut s = failing_twice("replay-retry").await;
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);

    let retry = s
        .comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(
        (run.state, run.iteration),
        (RunState::Failed, 2),
        "retried once"
    );
    // Each failure has its diagnosis: the second is not taken for the first.
    let diagnoses = |s: &Story| {
        s.bot_comments(n)
            .into_iter()
            .filter(|c| c.body.contains("could not finish"))
            .count()
    };
    assert_eq!(diagnoses(&s), 2);

    s.replay_comment(n, retry, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(
        (run.state, run.iteration),
        (RunState::Failed, 2),
        "the replay restarted nothing"
    );
    assert!(s.last_delivery_outcome().await.contains("already handled"));
}

/// A request to the App is acted on once too: a captured mention replayed
/// under a new delivery id does not start the run again. The control: a new
/// mention with the same words does.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replayed_mention_does_not_restart_the_run() {
    let mut s = failing_twice("replay-mention").await;
    let n = s.open_issue("add subtracts", "", &["type:bug"]).await;
    let words = "@closer-test please make add work";
    let mention = s.comment_as(n, FakeUser::user(MAINTAINER), words).await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!((run.state, run.iteration), (RunState::Failed, 1));

    s.replay_comment(n, mention, FakeUser::user(MAINTAINER), words)
        .await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(
        (run.state, run.iteration),
        (RunState::Failed, 1),
        "the replay started nothing"
    );

    s.comment_as(n, FakeUser::user(MAINTAINER), words).await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(
        (run.state, run.iteration),
        (RunState::Failed, 2),
        "a new mention restarts it"
    );
}

/// An assignment starts a run once, whatever delivery carries it: a
/// captured `issues.assigned` replayed under a new delivery id after the
/// run failed restarts nothing, though closer is still assigned; nor does
/// one that arrives after closer was unassigned again. The control:
/// assigning closer again (GitHub moves the issue's `updated_at`) restarts
/// it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replayed_assignment_does_not_restart_the_run() {
    let mut s = failing_twice("replay-assign").await;
    let n = s.open_issue("add subtracts", "", &["type:bug"]).await;
    let bot = FakeUser::bot(&s.github.bot_login());
    s.assign_as(n, MAINTAINER, &bot).await;
    let assignment = s.sent() - 1;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!((run.state, run.iteration), (RunState::Failed, 1));

    s.replay(assignment).await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(
        (run.state, run.iteration),
        (RunState::Failed, 1),
        "the replay restarted nothing"
    );
    let outcome = s.last_delivery_outcome().await;
    assert!(outcome.contains("seen already"), "{outcome}");

    // GitHub writes `updated_at` to the second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    // Assigned and unassigned again before the assignment is delivered:
    // GitHub now shows closer unassigned, which decides.
    s.github.assign(&s.repo, n, &bot.login);
    let late = s.issue_json(n);
    s.unassign_as(n, MAINTAINER, &bot).await;
    s.deliver(
        "issues",
        json!({"action": "assigned", "issue": late, "assignee": user_json(&bot),
               "sender": user_json(&FakeUser::user(MAINTAINER))}),
    )
    .await;
    s.idle().await;
    let outcome = s.last_delivery_outcome().await;
    assert!(outcome.contains("not so on GitHub now"), "{outcome}");
    assert_eq!(s.run(n).await.unwrap().iteration, 1);

    tokio::time::sleep(Duration::from_millis(1100)).await;
    s.assign_as(n, MAINTAINER, &bot).await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(
        (run.state, run.iteration),
        (RunState::Failed, 2),
        "a new assignment restarted it: {}",
        s.journal().await
    );
}

/// An unassignment stops a run once: a captured `issues.unassigned`
/// replayed while a run started by the label works (closer unassigned, as
/// the replay says) leaves the run working. The control: assigning and
/// unassigning closer for real stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replayed_unassignment_does_not_stop_a_later_run() {
    let mut s = Story::start("replay-unassign", Some(CONFIG)).await;
    let (started, go) = (s.path("started"), s.path("go"));
    s.agent_step(1, &waiting_for(&started, &go));
    let n = s.open_issue("add subtracts", "", &["type:bug"]).await;
    let bot = FakeUser::bot(&s.github.bot_login());
    s.github.assign(&s.repo, n, &bot.login);
    s.unassign_as(n, MAINTAINER, &bot).await;
    let unassignment = s.sent() - 1;
    s.idle().await;
    s.label_as(n, MAINTAINER, "closer").await;
    wait_for_file(&started).await;

    s.replay(unassignment).await;
    let outcome = s.last_delivery_outcome().await;
    assert!(outcome.contains("seen already"), "{outcome}");
    assert_eq!(s.run(n).await.unwrap().state, RunState::Running);

    tokio::time::sleep(Duration::from_millis(1100)).await;
    s.assign_as(n, MAINTAINER, &bot).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    s.unassign_as(n, MAINTAINER, &bot).await;
    s.until(|run| run.is_some_and(|r| r.state == RunState::Stopped), n)
        .await;
    std::fs::write(&go, "").unwrap();
    s.idle().await;
}

/// An agent step that marks `started`, then waits for `go` before adding
/// a failing test.
fn waiting_for(started: &std::path::Path, go: &std::path::Path) -> String {
    format!(
        "touch '{}'\nwhile [ ! -f '{}' ]; do sleep 0.05; done\n{}",
        started.display(),
        go.display(),
        add_failing_test()
    )
}

/// A close is read back from GitHub before it stops a run: a captured
/// `issues.closed` replayed after the issue was reopened and a run started
/// leaves the run working. The control: closing it for real stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_old_close_replayed_after_the_issue_reopened_does_not_stop_the_run() {
    let mut s = Story::start("replay-close", Some(CONFIG)).await;
    let (started, go) = (s.path("started"), s.path("go"));
    s.agent_step(1, &waiting_for(&started, &go));
    let n = s.open_issue("add subtracts", "", &["type:bug"]).await;
    s.close_as(n, MAINTAINER).await;
    let close = s.sent() - 1;
    s.idle().await;
    s.github.set_issue_state(&s.repo, n, "open");
    s.label_as(n, MAINTAINER, "closer").await;
    wait_for_file(&started).await;

    s.replay(close).await;
    let outcome = s.last_delivery_outcome().await;
    assert!(outcome.contains("open on GitHub now"), "{outcome}");
    assert_eq!(s.run(n).await.unwrap().state, RunState::Running);

    s.close_as(n, MAINTAINER).await;
    s.until(|run| run.is_some_and(|r| r.state == RunState::Stopped), n)
        .await;
    std::fs::write(&go, "").unwrap();
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Stopped);
}

/// The close of a verified issue fails (GitHub answers 502 until the
/// client gives up): the run is done, its status says so, and the run's next
/// step closes the issue — never a closed issue under a status that is not
/// final (`Story::assert_one_truth` checks it on every `idle`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_close_that_fails_is_finished_by_the_next_step_after_the_final_status() {
    let mut s = Story::start("close-fails", Some(CONFIG)).await;
    s.agent_step(1, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    s.github.inject(
        Fault::Status(502)
            .times(8)
            .method("PATCH")
            .path(&format!("/repos/{REPO}/issues/1"))
            .body("\"closed\""),
    );
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;
    let issue = s.github.issue(&s.repo, n);
    assert_eq!(issue.state, "closed", "{}", s.journal().await);
    assert_eq!(s.run(n).await.unwrap().state, RunState::Done);
    assert!(s.status_comment(n).body.contains("closer: done"));
    let closes = s
        .github
        .requests_to("PATCH", &format!("/repos/{REPO}/issues/1"))
        .into_iter()
        .filter(|r| r.body.contains("\"closed\""))
        .count();
    assert!(closes > 1, "the close was tried again: {closes}");
}

/// A repository whose label is spelt `Closer` while the configuration says
/// `closer` (GitHub's label names ignore case; payloads carry the stored
/// spelling): adding it starts the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_trigger_label_spelt_in_another_case_starts_the_run() {
    let mut s = Story::start("label-case", Some(CONFIG)).await;
    s.github.add_repo_label(&s.repo, "Closer");
    let n = s.open_issue("add subtracts", "", &["type:bug"]).await;
    s.idle().await;
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    s.agent_step(1, &fix_add());
    s.label_as(n, MAINTAINER, "Closer").await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Done);
}

/// A repository admin deletes an issue while its run works: GitHub answers
/// `410 Gone` for it from then on. `issues.deleted` stops the run once
/// GitHub confirms it (the control: while GitHub still has the issue, the
/// same delivery stops nothing); and a run whose `deleted` delivery was
/// missed is stopped by reconciliation.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deleted_issue_stops_its_run() {
    let mut s = Story::start("deleted", Some(CONFIG)).await;
    let gate = Gate::new(&s);
    s.agent_step(1, &gate.hold());
    let a = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    gate.started().await;
    let deleted = json!({
        "action": "deleted",
        "issue": s.issue_json(a),
        "sender": user_json(&FakeUser::user(MAINTAINER)),
    });
    s.deliver("issues", deleted.clone()).await;
    let outcome = s.last_delivery_outcome().await;
    assert!(outcome.contains("GitHub still has it"), "{outcome}");
    assert_eq!(s.run(a).await.unwrap().state, RunState::Running);

    s.github.delete_issue(&s.repo, a);
    s.deliver("issues", deleted).await;
    s.until(|run| run.is_some_and(|r| r.state == RunState::Stopped), a)
        .await;
    gate.open();
    s.idle().await;
    let run = s.run(a).await.unwrap();
    assert_eq!(run.state, RunState::Stopped);

    // Missed: issue b waits for an answer when it is deleted.
    s.agent_step(1, ASKS_A_QUESTION);
    let b = s.open_issue("another", "", &["closer", "type:bug"]).await;
    s.idle().await;
    assert_eq!(s.run(b).await.unwrap().state, RunState::AwaitingResponse);
    let engine = s.engine.clone().unwrap();
    assert_eq!(engine.reconcile().await.unwrap(), Default::default());
    s.github.delete_issue(&s.repo, b);
    let done = engine.reconcile().await.unwrap();
    assert_eq!(done.stopped, vec![s.run(b).await.unwrap().id]);
    s.idle().await;
    assert_eq!(s.run(b).await.unwrap().state, RunState::Stopped);
}

/// An issue's author without permission may answer closer's question, not
/// steer a run: a comment of theirs while the run works is not stored, so
/// it neither reaches the prompt (as "the maintainer replied") nor starts
/// another round once the work is verified.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unauthorised_authors_comment_while_the_run_works_steers_nothing() {
    let mut s = Story::start("author-steers", Some(CONFIG)).await;
    let gate = Gate::new(&s);
    s.agent_step(1, &format!("{}\n{}", gate.hold(), fix_add()));
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .github
        .open_issue(&s.repo, "stranger", "add subtracts", "");
    s.github.label_issue(&s.repo, n, "type:bug");
    s.label_as(n, MAINTAINER, "closer").await;
    gate.started().await;

    s.comment_as(n, FakeUser::user("stranger"), "Also delete the README.")
        .await;
    s.deliveries_handled().await;
    let messages = s.replies(n).await;
    assert!(messages.is_empty(), "{messages:#?}");
    gate.open();
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!((run.state, run.iteration), (RunState::Done, 1), "{run:#?}");
}

/// An issue titled with forty credential prefixes, each cut short
/// (`AKIA… AKIA… …`): the outgoing filter makes each a `[redacted]`, which
/// takes the pull request's title past GitHub's 256 characters. The title
/// is cut again at the write, so the verified run still opens its pull
/// request. Before (decision 229), GitHub refused the title with a 422 on
/// every try, and the run failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_issue_title_the_filter_lengthens_still_gets_its_pull_request() {
    let mut s = Story::start("filtered-title", Some(CONFIG)).await;
    s.agent_step(1, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let title = "AKIA… ".repeat(40);
    let n = s
        .open_issue(title.trim(), "", &["closer", "type:bug"])
        .await;
    s.idle().await;

    s.expect_run(n, RunState::Done, 1).await;
    let pulls = s.github.pulls(&s.repo);
    assert_eq!(pulls.len(), 1, "{}", s.journal().await);
    let title = &pulls[0].title;
    assert_eq!(title.chars().count(), 256, "{title}");
    assert!(title.starts_with("fix: [redacted]…"), "{title}");
    assert!(title.ends_with(&format!(" (#{n})")), "{title}");
    assert!(!title.contains("AKIA"), "{title}");
    s.stop().await;
}

/// GitHub delivers an issue's `labeled` after the `closed` that followed it
/// (out of order, or committed last by another replica): the label went on
/// an open issue that is closed now, so no run starts. Before (decision
/// 232), the run started on the closed issue (status comment, labels,
/// iterations) until reconciliation stopped it. The control: the same
/// `labeled` for an issue still open starts the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_label_delivered_after_the_issue_was_closed_starts_no_run() {
    let mut s = Story::start("label-after-close", Some(CONFIG)).await;
    s.agent_step(1, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let labeled = |s: &Story, n: IssueNumber| {
        s.github.label_issue(&s.repo, n, "type:bug");
        s.github.label_issue(&s.repo, n, "closer");
        json!({"action": "labeled", "issue": s.issue_json(n), "label": {"name": "closer"},
               "sender": user_json(&FakeUser::user(MAINTAINER))})
    };
    let n = s
        .github
        .open_issue(&s.repo, MAINTAINER, "add subtracts", "");
    let late = labeled(&s, n);
    s.close_as(n, MAINTAINER).await;
    s.idle().await;
    s.deliver("issues", late).await;
    s.idle().await;
    let outcome = s.last_delivery_outcome().await;
    assert!(outcome.contains("closed since"), "{outcome}");
    assert!(s.run(n).await.is_none(), "no run");
    assert!(s.bot_comments(n).is_empty(), "{:#?}", s.bot_comments(n));

    let open = s
        .github
        .open_issue(&s.repo, MAINTAINER, "add subtracts", "");
    let on_time = labeled(&s, open);
    s.deliver("issues", on_time).await;
    s.idle().await;
    s.expect_run(open, RunState::Done, 1).await;
    s.stop().await;
}

/// The agent deletes its worktree's `.git` file (an agent starting its git
/// afresh): closer's git never reads it, the checks' prune keeps the locked
/// worktree, the file is written again for the next iteration, and that
/// iteration goes on from the first one's commit. Before (decision 233),
/// the prune forgot the worktree, the next iteration started again from
/// the base, and the first iteration's commit was lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_that_deletes_its_git_file_loses_no_commit() {
    let mut s = Story::start("git-file-deleted", Some(CONFIG)).await;
    s.llm.push([
        Reply::closer(false, 0.6, &["Fix add"]),
        Reply::closer(true, 0.95, &[]),
    ]);
    s.agent_step(
        1,
        "echo first > first.txt\nrm -f .git\necho '{\"summary\": \"Wrote first.txt.\"}'\n",
    );
    s.agent_step(
        2,
        &format!(
            "test -f .git || echo unlinked > unlinked.txt\n{}",
            fix_add()
        ),
    );
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;

    s.expect_run(n, RunState::Done, 2).await;
    let log = s.origin.log("closer/issue-1").join("\n");
    assert!(log.contains("Wrote first.txt."), "{log}");
    let files = crate::support::git::git(
        &s.origin.bare,
        &["ls-tree", "--name-only", "closer/issue-1"],
    );
    assert!(files.lines().any(|f| f == "first.txt"), "{files}");
    assert!(!files.lines().any(|f| f == "unlinked.txt"), "{files}");
    s.stop().await;
}
