//! Projects (v2) boards through the production client's GraphQL path against
//! the fake GitHub over real HTTP: finding a board (organization or user),
//! the Status following the phases, missing field/option as typed errors with
//! nothing written, GraphQL error mapping, the retry rules for GraphQL POSTs,
//! dry run, and GitHub Enterprise Server's `/api/graphql`.

use std::sync::Arc;
use std::time::Duration;

use closer::clock::{ManualClock, SharedClock};
use closer::github::Board;
use closer::github::types::{InstallationId, IssueNumber, RepoName};
use closer::github::{
    DRY_RUN_ITEM_ID, GitHubApp, GitHubError, GitHubSettings, InstallationClient, MemoryRecorder,
    ProjectSyncError, RetrySettings, WriteRecorder, graphql_url, sync_project_status,
};
use serde_json::Value;

use crate::support::fake_github::{FakeGitHub, Fault, ProjectOwner, RecordedRequest};

const INSTALLATION: i64 = 7;
const START: i64 = 1_750_006_400_000;
const HANG_TIMEOUT: Duration = Duration::from_secs(1);
/// A board made from GitHub's default "Board" template plus a review column.
const BOARD: &[&str] = &["Todo", "In Progress", "In Review", "Done"];

struct World {
    fake: FakeGitHub,
    gh: Arc<InstallationClient>,
    repo: RepoName,
    issue: IssueNumber,
}

fn settings(fake: &FakeGitHub) -> GitHubSettings {
    GitHubSettings {
        api_url: fake.url(),
        app_id: Some(fake.app_id()),
        private_key: Some(fake.private_key_pem()),
        retry: RetrySettings {
            max_attempts: 5,
            base_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            max_wait: Duration::from_secs(3),
            secondary_rate_limit_wait: Duration::from_secs(60),
        },
        request_timeout: Duration::from_secs(10),
        jitter_seed: Some(1),
        ..GitHubSettings::default()
    }
}

/// The fake with installation 7 on the organization `acme`, the repository
/// `acme/widget` and one open issue; `tweak` adjusts the client's settings.
async fn world_with(
    tweak: impl FnOnce(&FakeGitHub, &mut GitHubSettings),
    recorder: Option<Arc<dyn WriteRecorder>>,
) -> World {
    let clock: SharedClock = Arc::new(ManualClock::new(START));
    let fake = FakeGitHub::start_with_clock(clock.clone()).await;
    fake.add_installation(INSTALLATION, "acme");
    let repo = fake.add_repo(INSTALLATION, "acme/widget");
    let issue = fake.open_issue(&repo, "alice", "Fix the widget", "It is broken.");
    let mut s = settings(&fake);
    tweak(&fake, &mut s);
    let app = GitHubApp::new(s, clock, recorder).expect("app");
    let gh = app
        .installation(InstallationId(INSTALLATION))
        .await
        .unwrap();
    World {
        fake,
        gh,
        repo,
        issue,
    }
}

async fn world() -> World {
    world_with(|_, _| {}, None).await
}

fn board_cfg(owner: &str, number: u64) -> Board {
    Board {
        owner: owner.to_owned(),
        number,
        status_field: "Status".to_owned(),
    }
}

impl World {
    async fn sync(&self, cfg: &Board, phase: &str) -> Result<(), ProjectSyncError> {
        sync_project_status(&self.gh, cfg, &self.repo, self.issue, phase).await
    }

    fn node(&self) -> String {
        self.fake.issue_node_id(&self.repo, self.issue)
    }

    fn graphql_requests(&self) -> Vec<RecordedRequest> {
        self.fake.requests_to("POST", "/graphql")
    }

    /// The GraphQL operations the fake received that change something.
    fn mutations_sent(&self) -> Vec<String> {
        self.graphql_requests()
            .iter()
            .map(query_of)
            .filter(|q| q.trim_start().starts_with("mutation"))
            .collect()
    }
}

fn body_of(r: &RecordedRequest) -> Value {
    serde_json::from_str(&r.body).expect("GraphQL bodies are JSON")
}

fn query_of(r: &RecordedRequest) -> String {
    body_of(r)["query"].as_str().unwrap_or_default().to_owned()
}

// ---------------------------------------------------------------- finding boards

#[tokio::test]
async fn an_organization_board_is_found_with_its_single_select_fields() {
    let w = world().await;
    let id = w.fake.add_project(
        ProjectOwner::org("acme"),
        3,
        &[("Status", BOARD), ("Priority", &["P0", "P1"])],
    );

    let board = w.gh.project_board("acme", 3).await.unwrap();

    assert_eq!(board.id, id);
    let names: Vec<&str> = board.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["Status", "Priority"], "text fields are left out");
    let fake_board = w.fake.project("acme", 3);
    let fake_status = fake_board.field_named("Status").unwrap();
    let status = board.field("status").unwrap();
    assert_eq!(status.id, fake_status.id);
    let options: Vec<(&str, &str)> = status
        .options
        .iter()
        .map(|o| (o.id.as_str(), o.name.as_str()))
        .collect();
    let expected: Vec<(&str, &str)> = fake_status
        .options
        .as_ref()
        .unwrap()
        .iter()
        .map(|o| (o.id.as_str(), o.name.as_str()))
        .collect();
    assert_eq!(options, expected);

    // One query, organization first; the owner and number travel as
    // variables, not inside the query text.
    let sent = w.graphql_requests();
    assert_eq!(sent.len(), 1);
    let body = body_of(&sent[0]);
    assert!(query_of(&sent[0]).contains("organization(login: $owner)"));
    assert!(!query_of(&sent[0]).contains("acme"));
    assert_eq!(body["variables"]["owner"], "acme");
    assert_eq!(body["variables"]["number"], 3);
}

#[tokio::test]
async fn a_user_board_is_found_after_the_organization_lookup_misses() {
    let w = world().await;
    w.fake.add_installation(8, "alice");
    w.fake.add_repo(8, "alice/tools");
    let id = w
        .fake
        .add_project(ProjectOwner::user("alice"), 1, &[("Status", BOARD)]);
    let app = GitHubApp::new(settings(&w.fake), Arc::new(ManualClock::new(START)), None).unwrap();
    let alice = app.installation(InstallationId(8)).await.unwrap();

    let board = alice.project_board("alice", 1).await.unwrap();

    assert_eq!(board.id, id);
    let queries: Vec<String> = w.graphql_requests().iter().map(query_of).collect();
    assert_eq!(queries.len(), 2);
    assert!(queries[0].contains("organization(login:"));
    assert!(queries[1].contains("user(login:"));
}

#[tokio::test]
async fn an_unknown_or_invisible_board_is_project_not_found() {
    let w = world().await;
    w.fake
        .add_project(ProjectOwner::org("acme"), 1, &[("Status", BOARD)]);
    w.fake
        .add_project(ProjectOwner::org("other-org"), 1, &[("Status", BOARD)]);

    // No board 2 at acme; no account "nobody"; other-org's board is outside
    // this installation.
    for cfg in [
        board_cfg("acme", 2),
        board_cfg("nobody", 1),
        board_cfg("other-org", 1),
    ] {
        let err = w.sync(&cfg, "processing").await.unwrap_err();
        assert_eq!(err, ProjectSyncError::ProjectNotFound, "{cfg:?}");
        assert!(err.is_config_problem());
    }
    assert!(w.mutations_sent().is_empty());
}

#[tokio::test]
async fn an_owner_full_of_graphql_syntax_is_just_a_name() {
    let w = world().await;
    w.fake
        .add_project(ProjectOwner::org("acme"), 1, &[("Status", BOARD)]);
    let hostile = r#"acme") { projectV2(number: 1) { id } } #"#;
    let err = w.gh.project_board(hostile, 1).await.unwrap_err();
    assert_eq!(err, GitHubError::NotFound);
    assert_eq!(
        body_of(&w.graphql_requests()[0])["variables"]["owner"],
        hostile
    );
}

// ---------------------------------------------------------------- status follows the phases

#[tokio::test]
async fn status_follows_the_four_phases_on_one_item() {
    let w = world().await;
    w.fake
        .add_project(ProjectOwner::org("acme"), 3, &[("Status", BOARD)]);
    let cfg = board_cfg("acme", 3);
    let node = w.node();
    assert_eq!(
        w.gh.issue_node_id(&w.repo, w.issue).await.unwrap(),
        node,
        "the REST issue carries the node id"
    );
    assert_eq!(w.fake.project_item_status("acme", 3, &node), None);

    for (phase, option) in [
        ("preparation", "Todo"),
        ("processing", "In Progress"),
        ("review", "In Review"),
        ("complete", "Done"),
    ] {
        w.sync(&cfg, phase).await.unwrap();
        assert_eq!(
            w.fake.project_item_status("acme", 3, &node).as_deref(),
            Some(option),
            "{phase}"
        );
    }
    let board = w.fake.project("acme", 3);
    assert_eq!(board.items.len(), 1, "adding again answers the same item");
    // Each sync: one board query, one add, one set.
    assert_eq!(w.mutations_sent().len(), 8);
}

#[tokio::test]
async fn an_option_named_like_the_phase_wins_over_common_spellings() {
    let w = world().await;
    w.fake.add_project(
        ProjectOwner::org("acme"),
        4,
        &[("Stage", &["Done", "Complete"])],
    );
    let cfg = Board {
        status_field: "stage".to_owned(),
        ..board_cfg("acme", 4)
    };
    w.sync(&cfg, "complete").await.unwrap();
    assert_eq!(
        w.fake
            .project_item_value("acme", 4, &w.node(), "Stage")
            .as_deref(),
        Some("Complete")
    );
}

#[tokio::test]
async fn a_missing_field_is_typed_and_nothing_is_written() {
    let w = world().await;
    w.fake
        .add_project(ProjectOwner::org("acme"), 3, &[("Priority", &["P0"])]);

    let err = w
        .sync(&board_cfg("acme", 3), "processing")
        .await
        .unwrap_err();

    assert_eq!(
        err,
        ProjectSyncError::MissingField {
            field: "Status".into()
        }
    );
    assert!(err.is_config_problem());
    assert!(w.mutations_sent().is_empty(), "{:?}", w.mutations_sent());
    assert!(w.fake.project("acme", 3).items.is_empty());
}

#[tokio::test]
async fn a_missing_option_is_typed_and_nothing_is_written() {
    let w = world().await;
    w.fake.add_project(
        ProjectOwner::org("acme"),
        3,
        &[("Status", &["Todo", "In Progress", "Done"])],
    );

    let err = w.sync(&board_cfg("acme", 3), "review").await.unwrap_err();

    assert_eq!(
        err,
        ProjectSyncError::MissingOption {
            field: "Status".into(),
            option: "review".into()
        }
    );
    assert!(err.is_config_problem());
    assert!(w.mutations_sent().is_empty(), "{:?}", w.mutations_sent());
    assert!(w.fake.project("acme", 3).items.is_empty());
}

// ---------------------------------------------------------------- GraphQL errors

#[tokio::test]
async fn graphql_errors_map_onto_github_errors_and_are_not_retried() {
    let w = world().await;
    w.fake
        .add_project(ProjectOwner::org("acme"), 3, &[("Status", BOARD)]);
    w.gh.token().await.unwrap();
    // The fake stamps `x-ratelimit-reset` = now + 1 h on every answer.
    let reset = START + 3_600_000;
    let cases = [
        (
            "FORBIDDEN",
            GitHubError::Forbidden {
                message: "Resource not accessible by integration".into(),
            },
        ),
        (
            "INSUFFICIENT_SCOPES",
            GitHubError::Forbidden {
                message: "Resource not accessible by integration".into(),
            },
        ),
        ("RATE_LIMITED", GitHubError::RateLimited { until: reset }),
        ("NOT_FOUND", GitHubError::NotFound),
        (
            "SERVICE_UNAVAILABLE",
            GitHubError::GraphQl {
                kind: "SERVICE_UNAVAILABLE".into(),
                message: "Resource not accessible by integration".into(),
            },
        ),
    ];
    for (kind, expected) in cases {
        w.fake.clear_requests();
        w.fake.inject(
            Fault::GraphQlError {
                kind: kind.into(),
                message: "Resource not accessible by integration".into(),
            }
            .times(1)
            .method("POST")
            .path("/graphql"),
        );
        let err =
            w.gh.add_to_project(&w.fake.project("acme", 3).id, &w.node())
                .await
                .unwrap_err();
        assert_eq!(err, expected, "{kind}");
        assert_eq!(w.graphql_requests().len(), 1, "{kind}: sent once");
    }

    // Through the sync: a missing permission is the maintainer's to fix.
    w.fake.inject(
        Fault::GraphQlError {
            kind: "FORBIDDEN".into(),
            message: "Resource not accessible by integration".into(),
        }
        .times(1)
        .method("POST")
        .path("/graphql"),
    );
    let err = w.sync(&board_cfg("acme", 3), "review").await.unwrap_err();
    assert!(
        matches!(err, ProjectSyncError::GitHub(GitHubError::Forbidden { .. })),
        "{err}"
    );
    assert!(err.is_config_problem());
}

#[tokio::test]
async fn errors_the_model_gives_are_typed_too() {
    let w = world().await;
    w.fake
        .add_project(ProjectOwner::org("acme"), 3, &[("Status", BOARD)]);
    let board = w.gh.project_board("acme", 3).await.unwrap();
    let status = board.field("Status").unwrap();

    let err =
        w.gh.add_to_project(&board.id, "I_no_such_issue")
            .await
            .unwrap_err();
    assert_eq!(err, GitHubError::NotFound);

    let item = w.gh.add_to_project(&board.id, &w.node()).await.unwrap();
    let err =
        w.gh.set_single_select(&board.id, &item, &status.id, "not-an-option")
            .await
            .unwrap_err();
    match err {
        GitHubError::GraphQl { kind, message } => {
            assert_eq!(kind, "");
            assert!(message.contains("does not belong"), "{message}");
        }
        other => panic!("expected a GraphQL error, got {other:?}"),
    }
}

// ---------------------------------------------------------------- retry rules

#[tokio::test]
async fn a_graphql_post_answered_with_502_is_retried_because_github_answered() {
    let w = world().await;
    w.fake
        .add_project(ProjectOwner::org("acme"), 3, &[("Status", BOARD)]);
    w.gh.token().await.unwrap();
    // Two 502s on the first GraphQL calls, which are reads: repeated.
    w.fake
        .inject(Fault::Status(502).times(2).method("POST").path("/graphql"));

    w.sync(&board_cfg("acme", 3), "processing").await.unwrap();

    assert_eq!(
        w.fake.project_item_status("acme", 3, &w.node()).as_deref(),
        Some("In Progress")
    );
    assert_eq!(w.graphql_requests().len(), 3 + 2);
    assert_eq!(w.fake.project("acme", 3).items.len(), 1);
}

#[tokio::test]
async fn a_mutation_whose_answer_never_comes_is_maybe_applied_not_repeated() {
    let w = world_with(|_, s| s.request_timeout = HANG_TIMEOUT, None).await;
    w.fake
        .add_project(ProjectOwner::org("acme"), 3, &[("Status", BOARD)]);
    let board = w.gh.project_board("acme", 3).await.unwrap();
    let node = w.gh.issue_node_id(&w.repo, w.issue).await.unwrap();
    w.fake.clear_requests();
    w.fake.inject(
        Fault::Hang(Duration::from_secs(60))
            .times(1)
            .method("POST")
            .path("/graphql"),
    );

    let err = w.gh.add_to_project(&board.id, &node).await.unwrap_err();

    assert_eq!(
        err,
        GitHubError::MaybeApplied {
            method: "POST".into(),
            path: "/graphql".into(),
            status: None,
        }
    );
    assert_eq!(w.graphql_requests().len(), 1, "not repeated");
    // Every step of the sync is idempotent: running it again is the re-check.
    w.sync(&board_cfg("acme", 3), "processing").await.unwrap();
    assert_eq!(
        w.fake.project_item_status("acme", 3, &node).as_deref(),
        Some("In Progress")
    );
}

#[tokio::test]
async fn a_query_whose_answer_never_comes_is_retried() {
    let w = world_with(|_, s| s.request_timeout = HANG_TIMEOUT, None).await;
    w.fake
        .add_project(ProjectOwner::org("acme"), 3, &[("Status", BOARD)]);
    w.gh.token().await.unwrap();
    w.fake.inject(
        Fault::Hang(Duration::from_secs(60))
            .times(1)
            .method("POST")
            .path("/graphql"),
    );

    w.gh.project_board("acme", 3).await.unwrap();
    assert_eq!(w.graphql_requests().len(), 2, "a query reads: repeated");
}

// ---------------------------------------------------------------- dry run

#[tokio::test]
async fn dry_run_records_the_mutations_and_sends_none() {
    let recorder = Arc::new(MemoryRecorder::new());
    let dyn_recorder: Arc<dyn WriteRecorder> = recorder.clone();
    let w = world_with(|_, s| s.dry_run = true, Some(dyn_recorder)).await;
    let project_id = w
        .fake
        .add_project(ProjectOwner::org("acme"), 3, &[("Status", BOARD)]);

    w.sync(&board_cfg("acme", 3), "review").await.unwrap();

    // The board query is a read and was sent; no mutation reached the fake.
    assert_eq!(w.graphql_requests().len(), 1);
    assert!(w.mutations_sent().is_empty());
    assert!(w.fake.project("acme", 3).items.is_empty());
    let writes = recorder.writes();
    let paths: Vec<(&str, &str)> = writes
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str()))
        .collect();
    assert_eq!(paths, [("POST", "/graphql"), ("POST", "/graphql")]);
    let add: Value = serde_json::from_str(writes[0].body.as_deref().unwrap()).unwrap();
    assert!(
        add["query"]
            .as_str()
            .unwrap()
            .contains("addProjectV2ItemById")
    );
    assert_eq!(add["variables"]["project"], project_id.as_str());
    assert_eq!(add["variables"]["content"], w.node().as_str());
    let set: Value = serde_json::from_str(writes[1].body.as_deref().unwrap()).unwrap();
    assert!(
        set["query"]
            .as_str()
            .unwrap()
            .contains("updateProjectV2ItemFieldValue")
    );
    assert_eq!(set["variables"]["item"], DRY_RUN_ITEM_ID);
    let review = w
        .fake
        .project("acme", 3)
        .field_named("Status")
        .unwrap()
        .options
        .clone()
        .unwrap()
        .into_iter()
        .find(|o| o.name == "In Review")
        .unwrap();
    assert_eq!(set["variables"]["option"], review.id.as_str());
}

// ---------------------------------------------------------------- GitHub Enterprise Server

#[tokio::test]
async fn enterprise_server_graphql_goes_to_api_graphql() {
    let w = world_with(|fake, s| s.api_url = format!("{}/api/v3", fake.url()), None).await;
    w.fake
        .add_project(ProjectOwner::org("acme"), 3, &[("Status", BOARD)]);
    assert_eq!(
        graphql_url(&format!("{}/api/v3", w.fake.url())),
        format!("{}/api/graphql", w.fake.url())
    );

    w.sync(&board_cfg("acme", 3), "complete").await.unwrap();

    assert_eq!(
        w.fake.project_item_status("acme", 3, &w.node()).as_deref(),
        Some("Done")
    );
    assert_eq!(w.fake.requests_to("POST", "/api/graphql").len(), 3);
    assert!(w.graphql_requests().is_empty(), "nothing at /graphql");
    assert_eq!(
        w.fake
            .requests_to("GET", "/api/v3/repos/acme/widget/issues")
            .len(),
        1
    );
}
