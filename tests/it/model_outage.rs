//! The agent's own model provider down (issue 13, part 9): the agent's tool
//! says so in its last words, the iteration is not counted, the run waits
//! (its step deferred, the status comment saying why) and goes on when the
//! provider answers; after six hours of it the run fails, saying so. The
//! controls: an agent that fails for another reason — even one whose tests
//! printed a refused connection and a 503 — spends its iteration.
//!
//! A `command` agent plays the tool here, on the queue's manual clock with
//! `closer serve`'s queue settings (decision 80); the real Claude Code
//! meets a real 503 in `agent_cli_claude.rs`.

use std::time::Duration;

use closer::clock::Clock;
use closer::engine::run::{ModelOutage, RunData};
use closer::model::{Run, RunState};
use closer::store::runs;

use crate::stories::fix_add;
use crate::support::db::manual_clock;
use crate::support::fake_github::state::FakeUser;
use crate::support::fake_llm::Reply;
use crate::support::story::{CONFIG, MAINTAINER, REPO, Story, Timing};

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;

/// Two iterations at most: an outage that spent them would fail the run.
fn two_iterations() -> String {
    format!("{CONFIG}completion:\n  max_iterations: 2\n")
}

/// The run's wait for the model provider, if it waits.
fn outage(run: &Run) -> Option<ModelOutage> {
    RunData::from_json(&run.data).unwrap().model_outage
}

/// Iteration 1's agent: while `up` does not exist its provider answers
/// 503 (counted in `attempts`); then it fixes the bug, reporting a million
/// tokens spent.
fn provider_down_until_up(s: &Story) -> (std::path::PathBuf, std::path::PathBuf) {
    provider_down_in(s, 1)
}

/// [`provider_down_until_up`] for iteration `n`.
fn provider_down_in(s: &Story, n: u32) -> (std::path::PathBuf, std::path::PathBuf) {
    let (up, attempts) = (s.path("up"), s.path("attempts"));
    s.agent_step(
        n,
        &format!(
            "if [ ! -f '{up}' ]; then\n  echo attempt >> '{attempts}'\n  echo 'calling the model' >&2\n  \
             echo 'Error: 503 Service Unavailable (upstream overloaded)' >&2\n  exit 1\nfi\n{}",
            fix_add().replace(
                r#"{"summary": "Fixed add to add."}"#,
                r#"{"summary": "Fixed add.", "usage": {"input_tokens": 1000000}}"#
            ),
            up = up.display(),
            attempts = attempts.display(),
        ),
    );
    (up, attempts)
}

/// How many times a comment was edited.
fn status_edits(s: &Story) -> usize {
    let comments = format!("/repos/{REPO}/issues/comments");
    s.github.requests_to("PATCH", &comments).len()
}

/// A story with two iterations, on a manual clock started now.
async fn on_a_manual_clock(name: &str) -> (Story, std::sync::Arc<closer::clock::ManualClock>) {
    let (clock, _) = manual_clock(closer::clock::SystemClock.now_ms());
    let s = Story::start_on_clock(
        name,
        Some(&two_iterations()),
        clock.clone(),
        Timing::serve(),
    )
    .await;
    (s, clock)
}

fn lines(path: &std::path::Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_agents_provider_down_pauses_the_run_without_counting_and_it_resumes() {
    let (mut s, clock) = on_a_manual_clock("model-down").await;
    let start = clock.now_ms();
    let (up, attempts) = provider_down_until_up(&s);
    // closer's own LLM is down when the agent's work is first judged.
    let down = || Reply::status(503, "The server is overloaded");
    s.llm.push([down(), down(), down(), down()]);
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;

    // The first attempt met the outage; the step waits for its backoff.
    s.pass_time(clock.now_ms()).await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Running, "{}", s.journal().await);
    assert_eq!(run.iteration, 0, "no iteration counted");
    assert!(
        runs::iterations(s.store.pool(), &run.id)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(outage(&run).map(|o| o.attempts), Some(1));
    let since = chrono::DateTime::from_timestamp_millis(outage(&run).unwrap().since)
        .unwrap()
        .format("%Y-%m-%d %H:%M UTC")
        .to_string();
    let status = s.status_comment(n).body;
    let shown = status
        .replace(&run.id.to_string(), "RUN")
        .replace(&since, "SINCE");
    insta::assert_snapshot!("model_down_status", shown);
    let edited = status_edits(&s);

    // Half an hour of outage: attempt after attempt, each one deferred,
    // more of them than the run has iterations.
    let deferred = s.pass_time(start + 30 * MINUTE).await;
    let tried = lines(&attempts);
    assert!(
        tried >= 4 && deferred >= 3,
        "{tried} attempts, {deferred} deferrals"
    );
    let run = s.run(n).await.unwrap();
    assert_eq!(run.iteration, 0);
    assert_eq!(outage(&run).map(|o| o.attempts as usize), Some(tried));
    assert!(s.llm.requests().is_empty(), "nothing judged meanwhile");
    assert_eq!(
        status_edits(&s),
        edited,
        "the same status: not edited for each attempt"
    );

    // The provider answers again: the iteration runs once more, counted
    // once, and its work is judged twice (closer's LLM down the first
    // time) and its spending counted once.
    std::fs::write(&up, "").unwrap();
    s.pass_time(start + 2 * HOUR).await;
    s.pass_time(start + 3 * HOUR).await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}\n{}", s.journal().await);
    assert_eq!(run.iteration, 1, "one iteration for the work");
    assert_eq!(s.llm.requests().len(), 5, "judged twice");
    assert!(
        (1_000_000..1_100_000).contains(&run.tokens_used),
        "{}",
        run.tokens_used
    );
    assert_eq!(outage(&run), None);
    let iterations = runs::iterations(s.store.pool(), &run.id).await.unwrap();
    assert_eq!(iterations.len(), 1);
    assert_eq!(
        lines(&attempts),
        tried,
        "no attempt after the provider was back"
    );
    assert!(s.status_comment(n).body.contains("closer: done"));
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    s.stop().await;
}

/// The issue is edited while the run waits for an answer, and the answer's
/// iteration meets the outage: the attempt that does the work, after it,
/// is still told of the edit. Before, the first attempt's prompt spent the
/// note, and the iteration that counted never saw it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_note_for_the_agent_outlives_an_attempt_the_outage_took_back() {
    let (mut s, clock) = on_a_manual_clock("model-down-note").await;
    let start = clock.now_ms();
    s.agent_step(
        1,
        r#"echo '{"summary": "A question first.", "questions": ["Negatives too?"]}'"#,
    );
    let (up, attempts) = provider_down_in(&s, 2);
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.pass_time(clock.now_ms()).await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::AwaitingResponse);
    s.edit_issue_as(n, MAINTAINER, "add subtracts", "Negatives too, please.")
        .await;
    s.comment_as(n, FakeUser::user(MAINTAINER), "Yes.").await;
    s.pass_time(clock.now_ms()).await;
    assert!(lines(&attempts) >= 1, "the outage met");
    assert!(s.prompt(2).contains("The issue was edited"));

    std::fs::write(&up, "").unwrap();
    s.pass_time(start + 2 * HOUR).await;
    s.pass_time(start + 3 * HOUR).await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    let prompt = s.prompt(2);
    assert!(
        prompt.contains("The issue was edited") && prompt.contains("Negatives too, please."),
        "{prompt}"
    );
    s.stop().await;
}

/// The control: the agent's tests printed a refused connection and a 503,
/// then the test summary, and it exited 1. That is its own failure: the
/// iteration counts, the next one fixes the bug.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_agent_failing_for_another_reason_spends_its_iteration_even_when_it_printed_503() {
    let mut s = Story::start("model-control", Some(&two_iterations())).await;
    s.agent_step(
        1,
        "echo 'test_fetch ... ERROR' >&2\n\
         echo 'ConnectionRefusedError: [Errno 111] Connection refused' >&2\n\
         echo 'HTTP/1.1 503 Service Unavailable' >&2\n\
         echo 'FAILED (errors=1)' >&2\nexit 1\n",
    );
    s.agent_step(2, &fix_add());
    // A failed agent is not put to the completion check: one answer.
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert_eq!(run.iteration, 2, "the failed iteration counted");
    let iterations = runs::iterations(s.store.pool(), &run.id).await.unwrap();
    let first = iterations[0].agent.as_deref().unwrap();
    assert!(
        first.contains(r#""kind":"exited""#) && first.contains("FAILED (errors=1)"),
        "{first}"
    );
    assert!(!first.contains("model_unavailable"), "{first}");
    s.stop().await;
}

/// A provider that never comes back (or an endpoint that was never
/// right): after six hours of waiting the run fails, the diagnosis saying
/// so, its last attempt recorded; nothing was dead-lettered on the way.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_provider_down_for_six_hours_fails_the_run_saying_so() {
    let (mut s, clock) = on_a_manual_clock("model-gone").await;
    let start = clock.now_ms();
    let (_up, attempts) = provider_down_until_up(&s);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;

    s.pass_time(start + 5 * HOUR).await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Running);
    s.pass_time(start + 7 * HOUR).await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Failed, "{}", s.journal().await);
    assert_eq!(run.iteration, 1, "the last attempt is recorded");
    let tried = lines(&attempts);
    assert!(tried >= 20, "{tried} attempts in six hours");
    let diagnosis = s.diagnosis(n);
    assert!(
        diagnosis.contains(&format!(
            "the agent's model provider was still unavailable after 6 h of waiting ({tried} attempts): \
             Error: 503 Service Unavailable (upstream overloaded)"
        )),
        "{diagnosis}"
    );
    assert!(s.labels(n).contains(&"closer:failed".to_owned()));
    s.stop().await;
}

/// The agent shows progress ("**Now:** working …") on its second try, then
/// meets the provider's outage again: the status goes back to saying the
/// run waits for the provider. Its text is the one written after the first
/// try, but the progress edits changed the comment since. Before, the
/// unchanged text was not written, and the comment said "working" for as
/// long as the outage lasted.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_progress_line_does_not_outlive_the_attempt_it_showed() {
    let (mut s, clock) = on_a_manual_clock("model-down-progress").await;
    s.kill_workers();
    s.progress_every = Some(Duration::from_millis(200));
    s.spawn_workers();
    let attempts = s.path("attempts");
    s.agent_step(
        1,
        &format!(
            "echo attempt >> '{attempts}'\nsleep 1.5\n\
             echo 'Error: 503 Service Unavailable (upstream overloaded)' >&2\nexit 1\n",
            attempts = attempts.display()
        ),
    );
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    let start = clock.now_ms();
    s.pass_time(start).await;
    let waiting = s.status_comment(n).body;
    assert!(
        waiting.contains("waiting for the agent's model provider"),
        "{waiting}"
    );
    let progress = |s: &Story| {
        s.github
            .requests_to("PATCH", &format!("/repos/{REPO}/issues/comments/"))
            .into_iter()
            .filter(|r| r.body.contains("**Now:**"))
            .count()
    };
    let shown = progress(&s);

    // The next attempt, after the backoff: it shows progress, then fails.
    while lines(&attempts) < 2 {
        s.pass_time(clock.now_ms() + 60_000).await;
    }
    s.pass_time(clock.now_ms()).await;
    assert!(
        progress(&s) > shown,
        "the second attempt showed its progress"
    );
    let status = s.status_comment(n).body;
    assert!(!status.contains("**Now:**"), "{status}");
    assert!(
        status.contains("waiting for the agent's model provider"),
        "{status}"
    );
    s.stop().await;
}
