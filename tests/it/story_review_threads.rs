//! A review thread as a conversation: a maintainer answers closer's reply
//! in a thread, or writes in it while closer's round works on it. Each of
//! their words gets one round and one reply, and no more: a thread is open
//! while a permitted person wrote after what closer's last reply answered
//! (the newest comment its round's prompts carried).

use closer::github::types::IssueNumber;
use closer::model::RunState;

use crate::story_review::{done, thread_replies, verified_story_with_roles};
use crate::support::gate::Gate;
use crate::support::story::{CONFIG, MAINTAINER, Story};

/// An iteration that answers the one thread in its prompt: `changed`, with
/// `reply`; with `changed`, it also changes `calc.sh`.
pub(crate) fn answer_thread(n: u32, changed: bool, reply: &str) -> String {
    let change = match changed {
        true => format!("printf '# round {n}\\n' >> calc.sh\n"),
        false => String::new(),
    };
    format!(
        "set -- $(grep -o '^### Thread [0-9]*' \"$(dirname \"$0\")/prompt-{n}.txt\" | cut -d' ' -f3)\n\
         {change}\
         echo \"{{\\\"message\\\": \\\"round {n}\\\", \\\"summary\\\": \\\"Answered the review.\\\", \\\"threads\\\": [\
         {{\\\"thread\\\": $1, \\\"changed\\\": {changed}, \\\"reply\\\": \\\"{reply}\\\"}}]}}\"\n"
    )
}

/// A verified story whose pull request got one thread, worked on in
/// round 2 (held at the returned gate until it is opened); answers the
/// pull request and the thread's first comment.
async fn thread_in_round(name: &str) -> (Story, IssueNumber, IssueNumber, u64, Gate) {
    thread_in_round_with(name, CONFIG, &[]).await
}

/// [`thread_in_round`] with the repository's `config`, and these
/// `(user, role)`s.
pub(crate) async fn thread_in_round_with(
    name: &str,
    config: &str,
    roles: &[(&str, &str)],
) -> (Story, IssueNumber, IssueNumber, u64, Gate) {
    let (mut s, n, pull) = verified_story_with_roles(name, config, roles).await;
    let gate = Gate::new(&s);
    s.agent_step(
        2,
        &format!(
            "{}\n{}",
            gate.hold(),
            answer_thread(2, true, "Documented add.")
        ),
    );
    s.llm.push([done()]);
    let root = s
        .review_as(
            pull,
            MAINTAINER,
            "CHANGES_REQUESTED",
            "",
            &[("calc.sh", 1, "Please document add.")],
        )
        .await[0];
    gate.started().await;
    (s, n, pull, root, gate)
}

/// The maintainer thanks closer in the thread it answered; the agent
/// changes nothing and says so. closer answers that once, and the run is at
/// rest after the one round. Before, the reply's marker was the pushed
/// head, which had not moved: the answer was taken as posted, the thread
/// stayed open, and rounds followed one another for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_to_closers_answer_gets_one_round_and_one_answer() {
    let (mut s, n, pull, root, gate) = thread_in_round("thread-thanks").await;
    gate.open();
    s.idle().await;
    assert_eq!(thread_replies(&s, pull).len(), 1, "round 2 answered");

    s.agent_step(3, &answer_thread(3, false, "Glad it reads well."));
    s.llm.push([done()]);
    s.reply_in_thread_as(pull, root, MAINTAINER, "Thanks, that reads well.")
        .await;
    s.idle().await;

    s.expect_run(n, RunState::Done, 3).await;
    assert!(!s.path("prompt-4.txt").exists(), "no round after it");
    let replies = thread_replies(&s, pull);
    assert_eq!(replies.len(), 2, "{replies:#?}");
    assert!(
        replies[1].body.contains("Not changed") && replies[1].body.contains("Glad it reads well."),
        "{}",
        replies[1].body
    );
    s.stop().await;
}

/// The maintainer adds to the thread while round 2 works on it. closer's
/// answer to what the round saw comes after their reply, yet the reply gets
/// a round of its own, whose prompt carries it, and an answer. Before,
/// closer's answer counted as answering everything older than itself: the
/// reply was dropped without a word.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_reply_written_while_the_round_works_gets_a_round_of_its_own() {
    let (mut s, n, pull, root, gate) = thread_in_round("thread-meanwhile").await;
    s.reply_in_thread_as(pull, root, MAINTAINER, "Also mention negative numbers.")
        .await;
    s.deliveries_handled().await;
    s.agent_step(3, &answer_thread(3, true, "Mentioned negatives."));
    s.llm.push([done()]);
    gate.open();
    s.idle().await;

    s.expect_run(n, RunState::Done, 3).await;
    let prompt = std::fs::read_to_string(s.path("prompt-3.txt")).expect("round 3 ran");
    assert!(
        prompt.contains("Also mention negative numbers."),
        "{prompt}"
    );
    let replies = thread_replies(&s, pull);
    assert_eq!(replies.len(), 2, "{replies:#?}");
    assert!(
        replies[1].body.contains("Mentioned negatives."),
        "{}",
        replies[1].body
    );
    assert!(!s.path("prompt-4.txt").exists(), "no round after it");
    s.stop().await;
}
