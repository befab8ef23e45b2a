//! The agent's question and the replies at the edges of the run: a
//! question asked with no iteration left to use an answer, an answer while
//! the next iteration gets ready, and a reply deleted before a prompt
//! carried it.

use closer::model::RunState;

use crate::stories::{ASKS_A_QUESTION, first_iteration_held, fix_add, question_comments};
use crate::support::fake_github::state::FakeUser;
use crate::support::fake_llm::Reply;
use crate::support::gate::Gate;
use crate::support::story::{CONFIG, MAINTAINER, Story};

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

/// The author answers, and the next iteration takes a while to show
/// anything: the status no longer says it waits for the answer. Before,
/// it did until the agent's first progress, or the iteration's end.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_moves_the_status_on_at_once() {
    let mut s = Story::start("answer-status", Some(CONFIG)).await;
    s.agent_step(1, ASKS_A_QUESTION);
    let gate = Gate::new(&s);
    s.agent_step(2, &format!("{}\n{}", gate.hold(), fix_add()));
    s.llm.push([Reply::closer(true, 0.95, &[])]);
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
    s.stop().await;
}

/// A maintainer writes twice while the agent works, then deletes the
/// second comment before the next iteration: the next prompt carries the
/// first and not the second. Before, a deleted reply still reached the
/// agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_deleted_before_the_next_prompt_is_not_in_it() {
    let mut s = Story::start("reply-deleted", Some(CONFIG)).await;
    let (n, gate) = first_iteration_held(&mut s, "Make the test pass").await;
    let maintainer = FakeUser::user(MAINTAINER);
    s.comment_as(n, maintainer.clone(), "Keep the change small.")
        .await;
    let gone = s.comment_as(n, maintainer.clone(), "Use the v2 API.").await;
    s.delete_comment_as(n, gone, maintainer.clone(), maintainer)
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
