//! A burst of runs in one installation (decision 194): status-comment writes
//! are spaced a second apart per installation, and a step whose slot is
//! further off than that goes back to the queue instead of holding a
//! worker. So a maintainer labelling many issues at once holds up nobody
//! else's work, and the installation's writes stay a second apart.

use std::time::Duration;

use closer::github::types::IssueNumber;
use closer::model::RunState;
use serde_json::json;

use crate::story_review::{done, fix_add};
use crate::support::fake_github::state::{FakeUser, RecordedRequest};
use crate::support::fake_llm::Reply;
use crate::support::story::{CONFIG, MAINTAINER, Story, user_json};

/// One iteration each, judged incomplete: every run of the story fails at
/// its limit, and its comment must end saying so.
fn config() -> String {
    format!("{CONFIG}completion:\n  max_iterations: 1\n")
}

/// The other installation's id and repository.
const OTHER: i64 = 78;
const OTHER_REPO: &str = "elsewhere/calc";

/// How many runs the busy installation starts at once (the story runs two
/// workers): enough that, were they to wait for their slots, the other
/// installation's trigger would come after most of them.
const BURST: usize = 8;

/// The status-comment writes (created or edited) in `repo`, in the order
/// they reached GitHub.
fn status_writes(s: &Story, repo: &str) -> Vec<RecordedRequest> {
    let created = format!("/repos/{repo}/issues/");
    let mut writes: Vec<_> = s
        .github
        .writes()
        .into_iter()
        .filter(|r| r.path.starts_with(&created) && r.body.contains("closer:run="))
        .collect();
    writes.sort_by_key(|r| r.at);
    writes
}

/// Asserts that at most three of the burst's status writes (those after
/// `since`) came before the other installation's first: it was not held
/// up while the burst was written a second apart.
async fn other_came_among_the_first(s: &Story, since: std::time::Instant) {
    let theirs = status_writes(s, OTHER_REPO);
    let first_elsewhere = theirs.first().expect("the other run's status comment").at;
    let before = status_writes(s, "octo/calc")
        .iter()
        .filter(|w| w.at > since && w.at < first_elsewhere)
        .count();
    assert!(
        before <= 3,
        "{before} of the burst's status writes came first\n{}",
        s.journal().await
    );
}

/// Opens an issue with the trigger label in the other installation and
/// delivers `issues.opened` for it.
async fn open_elsewhere(s: &mut Story) -> IssueNumber {
    let repo = s.github.add_repo(OTHER, OTHER_REPO);
    s.github.set_clone_url(&repo, &s.origin.url);
    s.github
        .set_file(&repo, "main", ".github/closer.yml", &config());
    s.github.set_permission(&repo, MAINTAINER, "write");
    let n = s.github.open_issue(&repo, MAINTAINER, "elsewhere", "");
    for label in ["closer", "type:bug"] {
        s.github.label_issue(&repo, n, label);
    }
    let payload = json!({
        "action": "opened",
        "issue": s.github.issue_json(&repo, n),
        "sender": user_json(&FakeUser::user(MAINTAINER)),
        "installation": {"id": OTHER},
        "repository": {"full_name": OTHER_REPO, "clone_url": s.origin.url,
                       "default_branch": "main", "private": false},
    });
    let body = serde_json::to_vec(&payload).unwrap();
    let id = crate::support::unique("burst-elsewhere");
    s.deliver_raw("issues", &id, &body).await;
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_runs_in_one_installation_holds_up_no_other_installation() {
    let mut s = Story::start("burst", Some(&config())).await;
    s.github.add_installation(OTHER, "elsewhere");
    s.agent_step(1, "echo '{\"summary\": \"Tried.\"}'\n");
    s.llm
        .push((0..=BURST).map(|_| Reply::closer(false, 0.5, &["more to do"])));
    let since = std::time::Instant::now();
    let mut busy = Vec::new();
    for i in 0..BURST {
        busy.push(
            s.open_issue(&format!("task {i}"), "", &["closer", "type:bug"])
                .await,
        );
    }
    let elsewhere = open_elsewhere(&mut s).await;
    s.deliveries_handled().await;

    // The other installation's status comment came right after the first
    // of the burst's, not after the burst had been written a second apart.
    other_came_among_the_first(&s, since).await;
    // Every run of the burst got its status comment all the same (the
    // deliveries sent back came back), and the busy installation's writes
    // stayed apart: a second, less what a loaded machine may delay one
    // request and not the next; writes bunched up would be milliseconds.
    for n in &busy {
        assert!(s.status_comment(*n).body.contains("closer:run="));
    }
    for pair in status_writes(&s, "octo/calc").windows(2) {
        let gap = pair[1].at.duration_since(pair[0].at);
        assert!(
            gap >= Duration::from_millis(500),
            "two status writes {gap:?} apart: {} then {}",
            pair[0].path,
            pair[1].path
        );
    }

    // Steps sent back after saving their transition still wrote it: once
    // the queue is empty every comment shows its run's failure.
    s.idle().await;
    for n in &busy {
        let status = s.status_comment(*n).body;
        assert!(status.contains("see the diagnosis"), "{n:?}: {status}");
    }
    let repo = closer::github::types::RepoName::parse(OTHER_REPO).unwrap();
    let other = s.github.comments(&repo, elsewhere);
    assert!(other.iter().any(|c| c.body.contains("see the diagnosis")));
    s.stop().await;
}

/// Runs at rest with their pull requests open, in one installation. The
/// maintainer closes six of the pull requests unmerged, then asks for a
/// change on the last two; then an issue is labelled in another
/// installation. The pull request's steps are sent back at their status
/// writes like the others (decision 196): the other installation's comment
/// comes after a few of the burst's writes, every closed one's run ends
/// failed with its comment saying so, and each reviewed one's round runs
/// (and fails: its change breaks the tests) without its review step, back
/// from the queue after the round failed, taking the review for a new one
/// (a hint on the pull request that the run failed).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_on_pull_requests_in_one_installation_holds_up_no_other_installation() {
    const PULLS: usize = 8;
    let mut s = Story::start("burst-pulls", Some(&config())).await;
    s.github.add_installation(OTHER, "elsewhere");
    s.llm.push((0..PULLS).map(|_| done()));
    s.agent_step(1, &fix_add());
    let mut runs = Vec::new();
    for i in 0..PULLS {
        let n = s
            .open_issue(&format!("add subtracts {i}"), "", &["closer", "type:bug"])
            .await;
        runs.push(n);
    }
    s.idle().await;
    let mut pulls = Vec::new();
    for n in &runs {
        let run = s.run(*n).await.expect("a run");
        let pull = run.pull_request.expect("a pull request");
        pulls.push((*n, pull));
    }

    // The burst: the first half closed, the rest reviewed (their round's
    // change breaks the tests, so each round fails at its limit).
    s.agent_step(
        2,
        "echo 'exit 1' > tests/add.sh\necho '{\"message\": \"break it\", \"summary\": \"Done.\"}'\n",
    );
    s.llm.push((0..=PULLS).map(|_| done()));
    let since = std::time::Instant::now();
    let (closed, reviewed) = pulls.split_at(PULLS - 2);
    for (_, pull) in closed {
        s.close_pull_as(*pull, MAINTAINER).await;
    }
    for (_, pull) in reviewed {
        s.review_as(*pull, MAINTAINER, "CHANGES_REQUESTED", "Try again.", &[])
            .await;
    }
    // The burst's steps are queued before the other installation's trigger.
    s.deliveries_handled().await;
    open_elsewhere(&mut s).await;
    s.deliveries_handled().await;

    other_came_among_the_first(&s, since).await;

    s.idle().await;
    for (n, _) in closed {
        let status = s.status_comment(*n).body;
        assert!(status.contains("closer: failed"), "{n:?}: {status}");
    }
    for (n, pull) in reviewed {
        let run = s.run(*n).await.unwrap();
        assert_eq!((run.state, run.iteration), (RunState::Failed, 2), "{n:?}");
        let status = s.status_comment(*n).body;
        assert!(status.contains("see the diagnosis"), "{n:?}: {status}");
        let said = s.bot_comments(*pull);
        assert!(said.is_empty(), "{pull:?}: {said:#?}");
    }
    s.stop().await;
}
