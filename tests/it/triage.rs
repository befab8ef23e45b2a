//! Triage at intake: a delivery that cannot matter is stored as `ignored`
//! with no job; one that can (by rule, or because closer has work on its
//! issue or pull request) gets its job. Each rule has a delivery that shows
//! it, and the open-work rule a control: the same comment with and without
//! a run.

use closer::model::{
    CompletionType, DeliveryStatus, InstallationId, IssueNumber, JobKind, Phase, RepoName, Run,
    RunId, RunState, Stage,
};
use closer::store::deliveries::{self, IGNORED_NO_WORK};
use closer::store::jobs::{self, NewJob};
use closer::store::{Backend, runs};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::app::TestApp;
use crate::support::db::TestDb;
use crate::support::{fixture, unique};

const REPO: &str = "Codertocat/Hello-World";

async fn app(name: &str) -> TestApp {
    let app = TestApp::start(TestDb::new(name).await).await;
    let _ = app.app_slug.set("closer-bot".to_owned());
    app
}

/// A fixture with some fields changed.
fn payload(name: &str, edit: impl FnOnce(&mut Value)) -> Vec<u8> {
    let mut value: Value = serde_json::from_slice(&fixture(name)).unwrap();
    edit(&mut value);
    serde_json::to_vec(&value).unwrap()
}

fn comment(number: u64, body: &str) -> Vec<u8> {
    payload("issue_comment.created.json", |v| {
        v["issue"]["number"] = number.into();
        v["comment"]["body"] = body.into();
    })
}

fn pull(name: &str, number: u64, head: &str) -> Vec<u8> {
    payload(name, |v| {
        v["pull_request"]["number"] = number.into();
        v["pull_request"]["head"]["ref"] = head.into();
    })
}

fn issue(action: &str, number: u64, labels: Value) -> Vec<u8> {
    payload("issues.opened.json", |v| {
        v["action"] = action.into();
        v["issue"]["number"] = number.into();
        v["issue"]["labels"] = labels;
    })
}

/// What intake made of a delivery.
#[derive(Debug, PartialEq, Eq)]
enum Triaged {
    /// Stored with a job (received, or processed already).
    Kept,
    /// Stored as ignored, with triage's outcome and no job.
    Ignored,
}

/// Delivers; says what intake made of it, checking that a delivery has a
/// job exactly when it is not ignored.
async fn deliver(app: &TestApp, event: &str, body: &[u8]) -> Triaged {
    let id = unique(event);
    assert_eq!(app.deliver(event, &id, body).await, StatusCode::ACCEPTED);
    let stored = deliveries::get(app.store.pool(), &id)
        .await
        .unwrap()
        .unwrap();
    let has_job = job_for(app, &id).await;
    match stored.status {
        DeliveryStatus::Ignored => {
            assert_eq!(stored.outcome.as_deref(), Some(IGNORED_NO_WORK));
            assert!(!has_job, "an ignored delivery has no job");
            assert_eq!(stored.payload, None, "nor its payload");
            Triaged::Ignored
        }
        _ => {
            assert!(has_job, "a kept delivery has its job");
            assert_eq!(stored.payload.as_deref(), Some(body), "and its payload");
            Triaged::Kept
        }
    }
}

async fn job_for(app: &TestApp, delivery_id: &str) -> bool {
    use sqlx::Row;
    let n: i64 = sqlx::query("SELECT COUNT(*) AS n FROM jobs WHERE payload = $1")
        .bind(json!({ "delivery_id": delivery_id }).to_string())
        .fetch_one(app.store.pool())
        .await
        .unwrap()
        .get("n");
    n == 1
}

fn a_run(issue: u64, state: RunState, pull_request: Option<u64>) -> Run {
    Run {
        id: RunId::generate(),
        installation_id: InstallationId(1),
        repository: RepoName::parse(REPO).unwrap(),
        repository_id: None,
        issue_number: IssueNumber(issue),
        state,
        phase: Phase::Processing,
        completion_type: CompletionType::Issue,
        task_type: None,
        stage: Stage::Normal,
        iteration: 1,
        max_iterations: 10,
        branch: format!("closer/issue-{issue}"),
        base_commit: None,
        clone_url: None,
        default_branch: None,
        pull_request: pull_request.map(IssueNumber),
        status_comment_id: None,
        tokens_used: 0,
        cost_usd: 0.0,
        outcome: None,
        data: "{}".into(),
        created_at: 1,
        updated_at: 1,
        generation: 0,
    }
}

const IGNORED: Triaged = Triaged::Ignored;
const KEPT: Triaged = Triaged::Kept;

#[tokio::test]
async fn deliveries_that_cannot_matter_are_stored_as_ignored_without_a_job() {
    let app = app("triage-ignored").await;
    let cases: Vec<(&str, &str, Vec<u8>)> = vec![
        (
            "issues",
            "a new issue without labels",
            issue("opened", 11, json!([])),
        ),
        (
            "issues",
            "an edited issue",
            issue("edited", 11, json!([{"name": "bug"}])),
        ),
        ("issues", "a closed issue", issue("closed", 11, json!([]))),
        (
            "issues",
            "a label taken off",
            issue("unlabeled", 11, json!([])),
        ),
        (
            "issue_comment",
            "a plain comment",
            comment(11, "Thanks, same here."),
        ),
        (
            "issue_comment",
            "someone else mentioned",
            comment(11, "cc @octocat"),
        ),
        (
            "issue_comment",
            "a command in code",
            comment(11, "`/closer run`"),
        ),
        (
            "pull_request",
            "another pull request",
            pull("pull_request.opened.json", 12, "feature"),
        ),
        (
            "pull_request",
            "another merged",
            pull("pull_request.closed.json", 12, "feature"),
        ),
        (
            "pull_request_review",
            "a review elsewhere",
            pull("pull_request_review.submitted.json", 12, "feature"),
        ),
        (
            "pull_request_review_comment",
            "a line comment elsewhere",
            pull("pull_request_review_comment.created.json", 12, "x"),
        ),
    ];
    for (event, case, body) in &cases {
        assert_eq!(deliver(&app, event, body).await, IGNORED, "{case}");
    }
    assert_eq!(app.count("jobs").await, 0);
    assert_eq!(app.count("deliveries").await, cases.len() as i64);
    let (_, metrics) = app.get("/metrics").await;
    assert!(
        metrics.contains(
            "closer_webhook_deliveries_total{event=\"issue_comment\",outcome=\"ignored\"}"
        ),
        "{metrics}"
    );
    app.stop().await;
}

#[tokio::test]
async fn each_rule_keeps_its_delivery_with_a_job() {
    let mut app = app("triage-rules").await;
    let installation = payload("installation.created.json", |_| {});
    let repositories = payload("installation_repositories.added.json", |_| {});
    let cases: Vec<(&str, &str, Vec<u8>)> = vec![
        ("ping", "ping", fixture("ping.json")),
        ("installation", "installation", installation),
        ("installation_repositories", "repositories", repositories),
        (
            "issues",
            "a label added",
            issue("labeled", 21, json!([{"name": "closer"}])),
        ),
        (
            "issues",
            "a new issue with a label",
            issue("opened", 22, json!([{"name": "closer"}])),
        ),
        ("issues", "assigned", issue("assigned", 23, json!([]))),
        ("issues", "unassigned", issue("unassigned", 24, json!([]))),
        ("issue_comment", "a command", comment(25, "/closer run")),
        (
            "issue_comment",
            "a command by mention",
            comment(26, "@closer-bot status"),
        ),
        (
            "issue_comment",
            "a mention in a sentence",
            comment(27, "what do you think, @closer-bot?"),
        ),
        (
            "pull_request",
            "closer's pull request closed",
            pull("pull_request.closed.json", 28, "closer/issue-5"),
        ),
        (
            "pull_request",
            "closer's pull request pushed to",
            pull("pull_request.synchronize.json", 29, "closer/issue-6"),
        ),
        (
            "pull_request_review",
            "a review on closer's",
            pull("pull_request_review.submitted.json", 30, "closer/issue-7"),
        ),
        (
            "pull_request_review_comment",
            "a line comment on closer's",
            pull(
                "pull_request_review_comment.created.json",
                31,
                "closer/issue-8",
            ),
        ),
    ];
    for (event, case, body) in &cases {
        assert_eq!(deliver(&app, event, body).await, KEPT, "{case}");
    }
    app.settled(cases.len()).await;
    app.stop().await;
}

/// The control for the open-work rule: the same plain comment is kept while
/// the issue has an open run (or its pull request is the run's), and
/// ignored without one or once the run has ended.
#[tokio::test]
async fn a_plain_comment_matters_only_while_a_run_is_open() {
    let mut app = app("triage-open-run").await;
    let store = app.store.clone();
    let pool = store.pool();
    let said = "I tried it, still broken.";
    assert_eq!(
        deliver(&app, "issue_comment", &comment(41, said)).await,
        IGNORED,
        "no run yet"
    );

    let run = a_run(41, RunState::AwaitingResponse, Some(42));
    runs::insert_or_get(pool, &run).await.unwrap();

    assert_eq!(
        deliver(&app, "issue_comment", &comment(41, said)).await,
        KEPT,
        "open run"
    );
    let on_its_pull = pull(
        "pull_request_review.submitted.json",
        42,
        "someone-elses-name",
    );
    assert_eq!(
        deliver(&app, "pull_request_review", &on_its_pull).await,
        KEPT,
        "the run's pull request"
    );
    assert_eq!(
        deliver(&app, "issue_comment", &comment(43, said)).await,
        IGNORED,
        "another issue"
    );
    // The two kept deliveries are worked off first: while one of them waits
    // in the queue, a comment behind it is kept (the next test's rule).
    app.settled(2).await;

    let mut ended = runs::by_issue(pool, &run.repository, run.issue_number)
        .await
        .unwrap()
        .unwrap();
    ended.state = RunState::Done;
    runs::save(pool, &ended).await.unwrap();
    assert_eq!(
        deliver(&app, "issue_comment", &comment(41, said)).await,
        IGNORED,
        "run ended"
    );
    app.stop().await;
}

/// A delivery about the issue still waiting in the queue may be the one that
/// starts a run: a comment behind it is kept, so the engine sees it in order.
#[tokio::test]
async fn a_comment_behind_a_queued_delivery_of_its_issue_is_kept() {
    let app = app("triage-queued").await;
    let later = app.store.now_ms() + 3_600_000;
    let waiting = NewJob {
        kind: JobKind::Delivery,
        key: format!("thread:{REPO}#51"),
        payload: json!({ "delivery_id": "not-yet" }).to_string(),
        max_attempts: 3,
        run_at: later,
    };
    jobs::enqueue(app.store.pool(), &waiting, app.store.now_ms())
        .await
        .unwrap();
    let said = "Also happens on Linux.";

    assert_eq!(
        deliver(&app, "issue_comment", &comment(51, said)).await,
        KEPT,
        "queued delivery"
    );
    assert_eq!(
        deliver(&app, "issue_comment", &comment(52, said)).await,
        IGNORED,
        "control"
    );
    app.stop().await;
}

/// The same, when the delivery that gets a job and the comment behind it
/// arrive in one batch of the intake writer.
#[tokio::test]
async fn a_comment_batched_behind_a_label_on_its_issue_is_kept() {
    let app = app("triage-batch").await;
    let pool = app.store.pool();
    let mut blocker = pool.acquire().await.unwrap();
    let lock = match app.store.backend() {
        Backend::Sqlite => "BEGIN IMMEDIATE",
        Backend::Postgres => "BEGIN; LOCK TABLE deliveries IN EXCLUSIVE MODE",
    };
    sqlx::raw_sql(lock).execute(&mut *blocker).await.unwrap();
    let label = issue("labeled", 61, json!([{"name": "closer"}]));
    let reply = comment(61, "Here are the logs.");
    let other = comment(62, "Here are the logs.");
    let first = app.deliver("issues", "d-label-61", &label);
    let second = async {
        writer_waits_for_the_lock(&app).await;
        app.deliver("issue_comment", "d-reply-61", &reply).await
    };
    let third = async {
        writer_waits_for_the_lock(&app).await;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        app.deliver("issue_comment", "d-other-62", &other).await
    };
    let release = async {
        writer_waits_for_the_lock(&app).await;
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        sqlx::raw_sql("COMMIT")
            .execute(&mut *blocker)
            .await
            .unwrap();
    };
    let (a, b, c, ()) = tokio::join!(first, second, third, release);
    assert_eq!(
        (a, b, c),
        (
            StatusCode::ACCEPTED,
            StatusCode::ACCEPTED,
            StatusCode::ACCEPTED
        )
    );
    drop(blocker);
    assert!(job_for(&app, "d-label-61").await);
    assert!(
        job_for(&app, "d-reply-61").await,
        "behind the label, in the same batch"
    );
    assert!(!job_for(&app, "d-other-62").await, "control: another issue");
    app.stop().await;
}

/// Returns once the intake writer is waiting for the lock the test holds,
/// so the label's delivery is in its hands before the comments are sent. On
/// PostgreSQL the wait shows in `pg_stat_activity`; SQLite's writer waits in
/// its busy handler, which shows nowhere, so there a second stands in for it
/// (the label's request reaches the writer in milliseconds on an idle
/// machine).
async fn writer_waits_for_the_lock(app: &TestApp) {
    if app.store.backend() == Backend::Sqlite {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        return;
    }
    let waiting = "SELECT COUNT(*) FROM pg_stat_activity \
                   WHERE datname = current_database() AND wait_event_type = 'Lock'";
    for _ in 0..600 {
        let n: i64 = sqlx::query_scalar(waiting)
            .fetch_one(app.store.pool())
            .await
            .unwrap();
        if n > 0 {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the intake writer never waited for the test's lock");
}

/// The engine answers as intake does for a delivery that reaches it anyway
/// (one stored before triage existed, say): a plain comment on an issue
/// without a run is answered at once, with no GitHub call; the control, the
/// same comment while the issue has an open run, goes on to the engine's
/// handling (the author's reply is stored for the run).
#[tokio::test]
async fn the_engine_answers_as_intake_for_a_delivery_that_reaches_it() {
    use closer::events::{EventKind, parse_event};

    use crate::support::story::{INSTALLATION, MAINTAINER, REPO as STORY_REPO, Story};

    let mut story = Story::start("triage-engine", None).await;
    story.spawn_workers();
    let number = story.open_issue("Crash on save", "It crashes.", &[]).await;
    story.idle().await;
    let engine = story.engine.clone().expect("workers spawned");
    let event = |comment_id: u64| {
        let payload = json!({
            "action": "created",
            "installation": {"id": INSTALLATION},
            "repository": {"full_name": STORY_REPO, "default_branch": "main", "private": false},
            "issue": {"number": number.0, "title": "Crash on save", "body": "It crashes.",
                      "user": {"login": MAINTAINER, "id": 1, "type": "User"}, "labels": [], "state": "open"},
            "comment": {"id": comment_id, "body": "Still broken for me.",
                        "user": {"login": MAINTAINER, "id": 1, "type": "User"}},
            "sender": {"login": MAINTAINER, "id": 1, "type": "User"},
        });
        parse_event(EventKind::IssueComment, payload.to_string().as_bytes()).unwrap()
    };
    // Calls about the repository; the App's identity (`GET /app`, asked
    // once per process for its slug) is not one.
    let repository_calls = || {
        let requests = story.github.requests();
        requests
            .iter()
            .filter(|r| r.path.starts_with("/repos"))
            .count()
    };
    let calls = repository_calls();
    let outcome = engine.on_event(&event(901)).await.unwrap();
    assert!(outcome.starts_with("triage:"), "{outcome}");
    assert_eq!(repository_calls(), calls, "no call about the repository");

    let run = a_run(number.0, RunState::Running, None);
    let run = Run {
        repository: RepoName::parse(STORY_REPO).unwrap(),
        installation_id: InstallationId(INSTALLATION),
        ..run
    };
    runs::insert_or_get(story.store.pool(), &run).await.unwrap();
    let outcome = engine.on_event(&event(902)).await.unwrap();
    assert!(outcome.starts_with("reply by maria"), "{outcome}");
    story.stop().await;
}
