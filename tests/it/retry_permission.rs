//! A retry re-checks the permission: `/closer retry` is allowed only to a
//! user whose permission, looked up when the command comes, reaches the
//! repository's `commands.min_permission` — not to one who merely started
//! the run, and not to one below a raised minimum. The control: the same
//! command from the same user, with the permission restored, resumes the run.
//! A command added by editing somebody's comment needs the editor to be
//! authorised as well as the comment's author.

use closer::model::{IssueNumber, RunState};

use crate::support::fake_github::FakeUser;
use crate::support::fake_llm::Reply;
use crate::support::story::{CONFIG, MAINTAINER, Story};

/// A story whose commands need `maintain`, with `mo` at `maintain`, and
/// issue `n`'s run, started by mo, failed after its one iteration; a retry
/// would fix it.
async fn failed_at_maintain(name: &str) -> (Story, IssueNumber) {
    let config = format!(
        "{CONFIG}commands: {{ min_permission: maintain }}\ncompletion:\n  max_iterations: 1\n"
    );
    let mut s = Story::start(name, Some(&config)).await;
    s.github.set_permission(&s.repo, "mo", "maintain");
    s.agent_step(1, "echo '{\"summary\": \"Not yet.\"}'\n");
    s.agent_step(
        2,
        "cat > calc.sh <<'T'\nadd() { echo $(( $1 + $2 )); }\nT\necho '{\"summary\": \"Fixed.\"}'\n",
    );
    s.llm.push([
        Reply::closer(false, 0.5, &["Fix add"]),
        Reply::closer(true, 0.95, &[]),
    ]);
    let n = s.open_issue("add subtracts", "", &["type:feature"]).await;
    s.label_as(n, "mo", "closer").await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);
    (s, n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_is_refused_below_the_minimum_and_after_a_downgrade_and_allowed_at_it() {
    let (mut s, n) = failed_at_maintain("retry-permission").await;

    // A writer is below `maintain`: refused, the run stays failed.
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);
    let refusals = |s: &Story, who: &str| {
        s.bot_comments(n)
            .iter()
            .filter(|c| c.body.contains(&format!("@{who}, sorry")))
            .count()
    };
    assert_eq!(refusals(&s, MAINTAINER), 1);

    // The user who started the run, since downgraded: refused too.
    s.github.set_permission(&s.repo, "mo", "write");
    s.comment_as(n, FakeUser::user("mo"), "/closer retry").await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);
    assert_eq!(refusals(&s, "mo"), 1);

    // The control: mo at `maintain` again, the same command resumes the run.
    s.github.set_permission(&s.repo, "mo", "maintain");
    s.comment_as(n, FakeUser::user("mo"), "/closer retry").await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert_eq!(run.iteration, 2);
    s.stop().await;
}

/// The repository's file stops parsing after the run started (a typo, a
/// field this closer does not know) and no longer names a minimum: the
/// run's own `maintain` still holds, so a writer's retry is refused. Before
/// (decision 227), a file that did not parse meant `write` for every
/// command, request, issue edit and label. The control: mo, at `maintain`,
/// is not refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_file_broken_since_the_run_started_does_not_lower_its_minimum() {
    let (mut s, n) = failed_at_maintain("broken-minimum").await;
    let broken = format!("{CONFIG}completion:\n  max_iterations: lots\n");
    s.github
        .set_file(&s.repo, "main", ".github/closer.yml", &broken);
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;
    let refused = |s: &Story, who: &str| {
        s.bot_comments(n)
            .iter()
            .any(|c| c.body.contains(&format!("@{who}, sorry")))
    };
    assert!(refused(&s, MAINTAINER), "{}", s.journal().await);
    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);

    s.comment_as(n, FakeUser::user("mo"), "/closer retry").await;
    s.idle().await;
    assert!(!refused(&s, "mo"), "{}", s.journal().await);
    s.stop().await;
}

/// GitHub lets a writer edit anyone's comment. A writer (below `maintain`)
/// adding `/closer retry` to a maintainer's comment is refused, once however
/// often they edit it; the control: the maintainer's own edit retries.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_command_a_writer_adds_to_a_maintainers_comment_is_refused() {
    let (mut s, n) = failed_at_maintain("edited-command").await;
    let mo = FakeUser::user("mo");
    let id = s.comment_as(n, mo.clone(), "Looking into it.").await;
    s.idle().await;

    let writer = FakeUser::user(MAINTAINER);
    for text in [
        "Looking into it.\n/closer retry",
        "Looking into it.\n/closer run",
    ] {
        s.edit_comment_as(n, id, mo.clone(), writer.clone(), text)
            .await;
        s.idle().await;
    }
    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);
    let refusals = s
        .bot_comments(n)
        .iter()
        .filter(|c| c.body.contains(&format!("@{MAINTAINER}, sorry")))
        .count();
    assert_eq!(refusals, 1, "one refusal for the comment, not one per edit");

    // The control: mo's own edit to the same text retries.
    s.edit_comment_as(n, id, mo.clone(), mo.clone(), "Looking into it.")
        .await;
    s.edit_comment_as(n, id, mo.clone(), mo, "Looking into it.\n/closer retry")
        .await;
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    s.stop().await;
}
