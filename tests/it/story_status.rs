//! What closer shows on the issue, as people and repositories treat it: a
//! maintainer (or a moderation bot) deletes the status comment mid-run,
//! and closer posts it again at its next write (before, every later write
//! edited the deleted comment, GitHub answered 404, and the verified run
//! never closed its issue); a repository whose phase labels are spelled
//! `Phase:…` still shows one phase at a time; a stopped run shows no phase.

use closer::model::RunState;

use closer::model::IssueNumber;

use crate::stories::{classify, first_iteration_held, fix_add};
use crate::support::fake_github::state::FakeUser;
use crate::support::fake_llm::Reply;
use crate::support::gate::Gate;
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

/// The repository made its board's labels before closer, capitalised:
/// GitHub applies `Phase:Processing` when closer adds `phase:processing`
/// (it names labels without regard to case), and closer takes each off as
/// the run moves on. Before, only the exact spelling was taken off, and the
/// issue ended with every phase it went through.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn phase_labels_spelled_otherwise_move_one_at_a_time() {
    let mut s = Story::start("phase-case", Some(CONFIG)).await;
    for phase in ["Preparation", "Processing", "Review", "Complete"] {
        s.github.add_repo_label(&s.repo, &format!("Phase:{phase}"));
    }
    s.llm
        .push([classify("bug"), Reply::closer(true, 0.95, &[])]);
    s.agent_step(1, &fix_add());
    let n = s.open_issue("add subtracts", "", &["closer"]).await;
    s.idle().await;

    s.expect_run(n, RunState::Done, 1).await;
    let phases: Vec<String> = s
        .labels(n)
        .into_iter()
        .filter(|l| l.to_lowercase().starts_with("phase:"))
        .collect();
    assert_eq!(
        phases,
        ["Phase:Complete"],
        "one phase, as the repository spells it"
    );
    s.stop().await;
}

/// `/closer status` links the status comment, on the issue's own page.
/// Before, the answer promised the link and never gave it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_status_command_links_the_status_comment() {
    let mut s = Story::start("status-link", Some(CONFIG)).await;
    let (n, gate) = first_iteration_held(&mut s, "Make the test pass").await;
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer status")
        .await;
    s.deliveries_handled().await;
    gate.open();
    s.idle().await;

    let status = s.status_comment(n);
    let html = s.issue_json(n)["html_url"].as_str().unwrap().to_owned();
    let answer = s
        .bot_comments(n)
        .into_iter()
        .find(|c| c.body.starts_with("closer is **"))
        .expect("the answer");
    let link = format!("[status comment]({html}#issuecomment-{})", status.id);
    assert!(answer.body.contains(&link), "{}", answer.body);
    s.stop().await;
}

/// A story whose repository's config names the board `octo/7`, its first
/// iteration held at work: the issue shows `phase:processing` and "In
/// progress" on the board.
async fn working_on_a_board(name: &str) -> (Story, IssueNumber, Gate, String) {
    use crate::support::fake_github::projects::ProjectOwner;
    let config = format!("{CONFIG}project: {{ owner: octo, number: 7 }}\n");
    let mut s = Story::start(name, Some(&config)).await;
    s.github.add_project(
        ProjectOwner::org("octo"),
        7,
        &[("Status", &["Todo", "In progress", "In review", "Done"])],
    );
    let (n, gate) = first_iteration_held(&mut s, "Make the test pass").await;
    let node = s.github.issue_node_id(&s.repo, n);
    assert!(s.labels(n).iter().any(|l| l == "phase:processing"));
    let status = s.github.project_item_status("octo", 7, &node);
    assert_eq!(status.as_deref(), Some("In progress"));
    (s, n, gate, node)
}

fn phases(s: &Story, n: IssueNumber) -> Vec<String> {
    let labels = s.labels(n).into_iter();
    labels.filter(|l| l.starts_with("phase:")).collect()
}

/// `/closer stop` mid-run: the run is in no phase any more, so its
/// `phase:*` label comes off and its board status is emptied. Before, the
/// issue kept `phase:processing` and the board "In progress" for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_run_shows_no_phase_on_the_issue_or_the_board() {
    let (mut s, n, gate, node) = working_on_a_board("stop-phase").await;
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer stop")
        .await;
    s.deliveries_handled().await;
    gate.open();
    s.idle().await;

    s.expect_run(n, RunState::Stopped, 1).await;
    assert_eq!(phases(&s, n), Vec::<String>::new());
    assert_eq!(s.github.project_item_status("octo", 7, &node), None);
    s.stop().await;
}

/// A maintainer closes the issue mid-run: the labels come off as for a
/// stop, and the board is left to its own workflow for closed items (which
/// moves them to Done on GitHub): closer does not empty it after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_stopped_by_closing_its_issue_leaves_the_board_to_its_workflow() {
    let (mut s, n, gate, node) = working_on_a_board("close-phase").await;
    s.close_as(n, MAINTAINER).await;
    s.deliveries_handled().await;
    gate.open();
    s.idle().await;

    s.expect_run(n, RunState::Stopped, 1).await;
    assert_eq!(phases(&s, n), Vec::<String>::new());
    let status = s.github.project_item_status("octo", 7, &node);
    assert_eq!(status.as_deref(), Some("In progress"));
    s.stop().await;
}
