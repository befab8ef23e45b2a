//! The retention task: what it prunes after each age, and the controls —
//! an open run's rows and files, young rows and a delivery whose job is
//! still queued all survive. Time moves on the store's manual clock (file
//! ages are read against it too); the same tests run on PostgreSQL.

use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;

use closer::agent::process::BaseEnv;
use closer::config::retention::RetentionConfig;
use closer::engine::run::Workspace;
use closer::model::{
    CompletionType, DeliveryStatus, InstallationId, IssueNumber, JobKind, JobState, Phase,
    RepoName, Run, RunId, RunState, Stage,
};
use closer::retention::Retention;
use closer::store::deliveries::{self, NewDelivery};
use closer::store::jobs::{self, NewJob};
use closer::store::writer::IntakeWriter;
use closer::store::{Store, dry_run, runs};

use crate::stories::fix_add;
use crate::support::app::TestApp;
use crate::support::db::{TestDb, manual_clock};
use crate::support::fake_github::state::FakeUser;
use crate::support::fake_llm::Reply;
use crate::support::git::{Origin, sandbox};
use crate::support::story::{CONFIG, MAINTAINER, Story};
use crate::support::{fixture_for_installation, set_mode, wait_for_file};

const DAY: i64 = 86_400_000;

/// A run of `state`, last updated at `updated_at`, with one iteration
/// holding a prompt and agent output.
async fn a_run(store: &Store, id: &str, issue: u64, state: RunState, updated_at: i64) {
    let run = Run {
        id: RunId::from_stored(id),
        installation_id: InstallationId(1),
        repository: RepoName::new("octo", "calc"),
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
        pull_request: None,
        status_comment_id: None,
        tokens_used: 0,
        cost_usd: 0.0,
        outcome: None,
        data: "{}".into(),
        created_at: updated_at,
        updated_at,
        generation: 0,
    };
    runs::insert_or_get(store.pool(), &run).await.unwrap();
    let id = RunId::from_stored(id);
    runs::start_iteration(store.pool(), &id, 1, "the whole prompt", updated_at)
        .await
        .unwrap();
    runs::finish_iteration(
        store.pool(),
        &id,
        1,
        r#"{"message":"10 MiB of output"}"#,
        r#"{"kept":true}"#,
        closer::model::IterationEnd::Incomplete,
        updated_at,
    )
    .await
    .unwrap();
}

/// Whether the run's iteration still holds its prompt and agent output,
/// and its judgment.
async fn output_of(store: &Store, id: &str) -> (bool, bool) {
    let rows = runs::iterations(store.pool(), &RunId::from_stored(id))
        .await
        .unwrap();
    let i = &rows[0];
    (
        !i.prompt.is_empty() && i.agent.is_some(),
        i.judgment.is_some(),
    )
}

/// A delivery received at `at` with its job queued, as the intake stores it.
fn delivery(id: &str, at: i64) -> NewDelivery {
    NewDelivery {
        delivery_id: id.to_owned(),
        event: "issues".to_owned(),
        action: Some("opened".to_owned()),
        installation_id: None,
        repository: None,
        body: b"{}".to_vec(),
        received_at: at,
        status: DeliveryStatus::Received,
        only_with_work: None,
        job: Some(NewJob {
            kind: JobKind::Delivery,
            key: format!("delivery:{id}"),
            payload: serde_json::json!({ "delivery_id": id }).to_string(),
            max_attempts: 3,
            run_at: at,
        }),
    }
}

fn workspace(data_dir: &Path) -> Workspace {
    Workspace::new(data_dir, &BaseEnv::from_process())
}

/// At day 100: ended runs old and young, an old open run, deliveries
/// whose jobs died long ago, recently or never, and dry-run writes old and
/// young.
async fn seed_rows(store: &Store) {
    a_run(store, "r-old-done", 1, RunState::Done, 60 * DAY).await;
    a_run(store, "r-old-stopped", 2, RunState::Stopped, 60 * DAY).await;
    a_run(store, "r-young-failed", 3, RunState::Failed, 95 * DAY).await;
    // Awaiting a reply for two months: open, so nothing of it goes.
    a_run(store, "r-old-open", 4, RunState::AwaitingResponse, 40 * DAY).await;

    let (writer, _task) = IntakeWriter::spawn(store.clone(), 16).expect("intake writer");
    for (id, age) in [
        ("orphan", 40),
        ("queued-long", 40),
        ("young-orphan", 5),
        ("died-late", 40),
    ] {
        writer
            .submit(delivery(id, (100 - age) * DAY))
            .await
            .unwrap();
    }
    // The orphans' jobs died (one long ago); "queued-long" still waits;
    // "died-late" was tried for weeks and died ten days ago: its dead job is
    // kept, for an operator to requeue, and so is what it handles.
    for (id, died) in [
        ("orphan", 50 * DAY),
        ("young-orphan", 96 * DAY),
        ("died-late", 90 * DAY),
    ] {
        sqlx::query("UPDATE jobs SET state = 'dead', finished_at = $1 WHERE job_key = $2")
            .bind(died)
            .bind(format!("delivery:{id}"))
            .execute(store.pool())
            .await
            .unwrap();
    }
    for (at, path) in [(80 * DAY, "/old"), (99 * DAY, "/young")] {
        sqlx::query(
            "INSERT INTO dry_run_writes (recorded_at, method, path) VALUES ($1, 'POST', $2)",
        )
        .bind(at)
        .bind(path)
        .execute(store.pool())
        .await
        .unwrap();
    }
}

#[tokio::test]
async fn old_rows_of_ended_runs_dead_jobs_and_orphaned_deliveries_are_pruned_open_and_young_ones_kept()
 {
    let db = TestDb::new("retention_rows").await;
    let (_clock, shared) = manual_clock(100 * DAY);
    let store = db.store_with_clock(shared).await;
    seed_rows(&store).await;

    let data = tempfile::tempdir().unwrap();
    let retention = Retention::new(
        store.clone(),
        workspace(data.path()),
        data.path().to_owned(),
        RetentionConfig::default(),
    );
    let pruned = retention.prune_once().await;

    assert_eq!(pruned.run_outputs, 2, "{pruned:?}");
    for id in ["r-old-done", "r-old-stopped"] {
        assert_eq!(
            output_of(&store, id).await,
            (false, true),
            "{id}: output gone, judgment kept"
        );
        assert!(
            runs::get(store.pool(), &RunId::from_stored(id))
                .await
                .unwrap()
                .is_some()
        );
    }
    for id in ["r-young-failed", "r-old-open"] {
        assert_eq!(
            output_of(&store, id).await,
            (true, true),
            "{id} is kept whole"
        );
    }
    assert_eq!(
        (pruned.dead_jobs, pruned.orphaned_deliveries),
        (1, 1),
        "{pruned:?}"
    );
    assert!(
        deliveries::get(store.pool(), "orphan")
            .await
            .unwrap()
            .is_none()
    );
    for kept in ["queued-long", "young-orphan", "died-late"] {
        assert!(
            deliveries::get(store.pool(), kept).await.unwrap().is_some(),
            "{kept}"
        );
    }
    assert_eq!(pruned.dry_run_writes, 1);
    let left: Vec<String> = dry_run::list(store.pool())
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.path)
        .collect();
    assert_eq!(left, ["/young"]);
    let dead_left = jobs::depth_by_state(store.pool()).await.unwrap();
    assert!(
        dead_left
            .iter()
            .any(|(s, n)| *s == JobState::Dead && *n == 2),
        "the young dead jobs are kept: {dead_left:?}"
    );

    // A second pass finds nothing more.
    let again = retention.prune_once().await;
    assert_eq!(
        again.run_outputs + again.dead_jobs + again.orphaned_deliveries,
        0
    );
}

/// The run's prompt-file directory, handler scripts, HOME and a check's
/// home a crash left, as the engine makes them.
fn run_files(data_dir: &Path, run: &str) -> [PathBuf; 4] {
    let dirs = [
        data_dir.join("scratch").join(run),
        data_dir.join("handlers").join(run),
        data_dir.join("homes").join(run),
        data_dir.join("goals/checks").join(format!("{run}-checks")),
    ];
    for dir in &dirs {
        std::fs::create_dir_all(dir.join("inner")).unwrap();
        std::fs::write(dir.join("inner/file"), "x").unwrap();
    }
    dirs
}

#[tokio::test]
async fn an_ended_runs_files_and_unused_mirrors_go_an_open_runs_stay() {
    let db = TestDb::new("retention_files").await;
    let now = closer::clock::system().now_ms();
    let (clock, shared) = manual_clock(now);
    let store = db.store_with_clock(shared).await;
    let data = tempfile::tempdir().unwrap();
    let (open_origin, ended_origin) = (
        Origin::with_files(&[("a", "1")]),
        Origin::with_files(&[("b", "2")]),
    );
    let sandbox = sandbox(data.path());
    let open = sandbox
        .prepare(&open_origin.source(), 1, "r-open", None)
        .await
        .unwrap();
    let ended = sandbox
        .prepare(&ended_origin.source(), 2, "r-ended", None)
        .await
        .unwrap();
    a_run(&store, "r-open", 1, RunState::Running, now).await;
    a_run(&store, "r-ended", 2, RunState::Failed, now).await;
    // Done long ago, with a step queued (a person pushed: `reverify` will
    // work in its worktree without changing the run until it ends).
    a_run(&store, "r-busy", 3, RunState::Done, now).await;
    let busy_step = NewJob {
        kind: JobKind::Run,
        key: closer::model::run_job_key(&RunId::from_stored("r-busy")),
        payload: "{}".into(),
        max_attempts: 3,
        run_at: now + 40 * DAY,
    };
    jobs::enqueue(store.pool(), &busy_step, now).await.unwrap();
    let open_files = run_files(data.path(), "r-open");
    let ended_files = run_files(data.path(), "r-ended");
    let busy_files = run_files(data.path(), "r-busy");
    // Read-only directories, as Go's module cache leaves them.
    let locked = ended.path.join("locked");
    std::fs::create_dir_all(locked.join("deep")).unwrap();
    std::fs::write(locked.join("deep/f"), "x").unwrap();
    set_mode(&locked.join("deep"), 0o555);
    set_mode(&locked, 0o555);
    let config = RetentionConfig {
        disk_budget_bytes: Some(1),
        ..RetentionConfig::default()
    };
    let retention = Retention::new(
        store.clone(),
        workspace(data.path()),
        data.path().to_owned(),
        config,
    );

    // The recorder `closer serve` installs at start.
    let metrics = closer::server::metrics::handle();

    // Three days on: the failed run may still be retried; nothing goes.
    clock.set(now + 3 * DAY);
    let young = retention.prune_once().await;
    assert_eq!((young.run_dirs, young.mirrors), (0, 0), "{young:?}");
    assert!(ended.path.exists() && ended.mirror.exists());
    assert!(young.data_dir_bytes > 1, "the size is measured: {young:?}");
    let metrics = metrics.render();
    assert!(metrics.contains("closer_data_dir_bytes"), "{metrics}");
    assert!(
        metrics.contains("closer_data_dir_budget_bytes 1"),
        "{metrics}"
    );

    // Forty days on: the ended run's worktree, prompt files, handler
    // scripts, HOME and check home go,
    // and with its worktree gone its mirror is unused; the open run's
    // worktree, files and mirror stay, however old.
    clock.set(now + 40 * DAY);
    let old = retention.prune_once().await;
    assert_eq!((old.run_dirs, old.mirrors), (5, 1), "{old:?}");
    assert!(!ended.path.exists() && !ended.mirror.exists());
    assert!(ended_files.iter().all(|d| !d.exists()));
    assert!(
        open.path.join("a").exists(),
        "the open run's worktree is kept"
    );
    assert!(
        open.mirror.join("HEAD").exists(),
        "the open run's mirror is kept"
    );
    assert!(open_files.iter().all(|d| d.exists()));
    assert!(
        busy_files.iter().all(|d| d.exists()),
        "a done run with a step on its way keeps its files"
    );

    // The open run goes on in its worktree: the mirror still knows it.
    let again = sandbox
        .prepare(&open_origin.source(), 1, "r-open", None)
        .await
        .unwrap();
    assert_eq!(again.path, open.path);
    assert!(
        data.path()
            .join("sandbox/worktrees")
            .read_dir()
            .unwrap()
            .count()
            == 1
    );
}

/// A step holds its run's files while it works, and the retention task
/// takes them only when no step holds them, reading the run under that
/// hold: here the database says the run ended long ago with nothing queued
/// (the instant a `/closer retry` is on its way, its step already
/// started), and the files stay until the step lets go. The control: once
/// let go, they go.
#[tokio::test]
async fn an_ended_runs_files_a_step_holds_are_kept_until_it_lets_go() {
    let db = TestDb::new("retention_held").await;
    let now = closer::clock::system().now_ms();
    let (clock, shared) = manual_clock(now);
    let store = db.store_with_clock(shared).await;
    let data = tempfile::tempdir().unwrap();
    a_run(&store, "r-held", 1, RunState::Failed, now).await;
    let files = run_files(data.path(), "r-held");
    let retention = Retention::new(
        store.clone(),
        workspace(data.path()),
        data.path().to_owned(),
        RetentionConfig::default(),
    );
    let step = workspace(data.path())
        .hold_files(&RunId::from_stored("r-held"))
        .await
        .unwrap();

    clock.set(now + 40 * DAY);
    let held = retention.prune_once().await;
    assert_eq!(held.run_dirs, 0, "{held:?}");
    assert!(files.iter().all(|d| d.join("inner/file").exists()));

    drop(step);
    // A process another test spawns meanwhile may hold a copy of the lock
    // for the moment between its fork and its exec: the next pass goes on.
    let mut removed = 0;
    for _ in 0..20 {
        removed += retention.prune_once().await.run_dirs;
        if removed == 4 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(removed, 4);
    assert!(files.iter().all(|d| !d.exists()));
}

/// The other side of the hold: while the agent works, its step holds the
/// run's files and the retention task cannot take them; and a
/// `/closer retry` of a stopped run whose files the retention task is
/// removing waits for the removal to end, then works the issue to
/// completion.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_waits_while_the_retention_task_removes_its_runs_files() {
    let mut s = Story::start("retention-retry", Some(CONFIG)).await;
    let (started, retried) = (s.path("started"), s.path("retried"));
    s.agent_step(1, &format!("touch '{}'\nsleep 120\n", started.display()));
    s.agent_step(2, &format!("touch '{}'\n{}", retried.display(), fix_add()));
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    wait_for_file(&started).await;
    let run = s.run(n).await.unwrap();
    let files = workspace(&s.data_dir());
    assert!(
        files
            .try_take_files(run.id.as_str())
            .await
            .unwrap()
            .is_none(),
        "the step at work holds its run's files"
    );
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer stop")
        .await;
    s.idle().await;

    // Free once stopped (a process spawned meanwhile may hold a copy of
    // the lock between its fork and its exec: try again a moment later).
    let mut removal = None;
    for _ in 0..50 {
        removal = files.try_take_files(run.id.as_str()).await.unwrap();
        if removal.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(removal.is_some(), "a stopped run's files are free");
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(!retried.exists(), "the retry waits for the removal");
    drop(removal);
    s.idle().await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert!(retried.exists());
    s.stop().await;
}

/// A step sweeping stale HOMEs removes another run's HOME only under that
/// run's file lock: a step of that run at work (resuming after the keep
/// period, say) keeps its HOME. The sweeping run's own stale HOME goes at
/// once; the control: once the other step lets go, the next sweep removes
/// its HOME too.
#[tokio::test]
async fn a_home_sweep_spares_the_home_of_a_run_at_work() {
    let data = tempfile::tempdir().unwrap();
    let files = workspace(data.path());
    let (own, other) = (RunId::from_stored("r-own"), RunId::from_stored("r-other"));
    // Both HOMEs last used an hour ago, past a keep period of a minute.
    let an_hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    for run in [&own, &other] {
        std::fs::create_dir_all(files.home(run).join("inner")).unwrap();
        let dir = std::fs::File::open(files.home(run)).unwrap();
        dir.set_modified(an_hour_ago).unwrap();
    }
    let keep = Duration::from_secs(60);
    let _own_step = files.hold_files(&own).await.unwrap();
    let other_step = files.hold_files(&other).await.unwrap();

    files.sweep_homes(&own, keep).await;
    assert!(
        !files.home(&own).exists(),
        "the sweeping run's stale HOME goes"
    );
    assert!(
        files.home(&other).join("inner").exists(),
        "the HOME of a run at work stays"
    );

    drop(other_step);
    // A process another test spawns may hold a copy of the lock for a
    // moment (see the retention test above).
    for _ in 0..20 {
        files.sweep_homes(&own, keep).await;
        if !files.home(&other).exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!files.home(&other).exists(), "once let go, it goes");
}

/// The intake's own delivery job is what keeps a waiting delivery: a
/// delivery stored through `POST /webhooks`, made old, survives while its
/// job is queued, and goes once the job died long ago (the control).
#[tokio::test]
async fn a_delivery_from_the_intake_is_kept_while_its_job_waits() {
    let mut app = TestApp::start(TestDb::new("retention_intake").await).await;
    let body = fixture_for_installation("issues.opened.json", 42);
    assert_eq!(
        app.deliver("issues", "d-waiting", &body).await,
        StatusCode::ACCEPTED
    );
    app.settled(1).await;
    let store = app.store.clone();
    let sql = |q: &'static str| sqlx::query(q).execute(store.pool());
    sql("UPDATE deliveries SET status = 'received', received_at = 0")
        .await
        .unwrap();
    // Queued again, for a time no worker of the running app reaches.
    sql("UPDATE jobs SET state = 'queued', finished_at = NULL, run_at = 9000000000000000")
        .await
        .unwrap();
    let data = tempfile::tempdir().unwrap();
    let retention = Retention::new(
        store.clone(),
        workspace(data.path()),
        data.path().to_owned(),
        RetentionConfig::default(),
    );

    assert_eq!(retention.prune_once().await.orphaned_deliveries, 0);
    assert!(
        deliveries::get(store.pool(), "d-waiting")
            .await
            .unwrap()
            .is_some()
    );

    sql("UPDATE jobs SET state = 'dead', finished_at = 0")
        .await
        .unwrap();
    let pruned = retention.prune_once().await;
    assert_eq!(
        (pruned.dead_jobs, pruned.orphaned_deliveries),
        (1, 1),
        "{pruned:?}"
    );
    assert!(
        deliveries::get(store.pool(), "d-waiting")
            .await
            .unwrap()
            .is_none()
    );
    app.stop().await;
}

/// The refs, under `refs/`, of the mirror `wt` works in.
fn mirror_refs(wt: &closer::agent::sandbox::Worktree) -> Vec<String> {
    crate::support::git::git(&wt.mirror, &["for-each-ref", "--format=%(refname)"])
        .lines()
        .filter(|r| r.starts_with("refs/closer/") || r.starts_with("refs/heads/closer/"))
        .map(str::to_owned)
        .collect()
}

/// Two runs on one repository: once the ended run's worktree goes, its
/// branch, base ref and the remote head fetched for it leave the mirror,
/// which stays for the open run with all of that run's refs. The ended run
/// can still come back: its worktree is made afresh.
#[tokio::test]
async fn an_ended_runs_refs_leave_a_mirror_another_run_still_uses() {
    let db = TestDb::new("retention_refs").await;
    let now = closer::clock::system().now_ms();
    let (clock, shared) = manual_clock(now);
    let store = db.store_with_clock(shared).await;
    let data = tempfile::tempdir().unwrap();
    let origin = Origin::with_files(&[("a", "1")]);
    let source = origin.source();
    let sandbox = sandbox(data.path());
    let open = sandbox.prepare(&source, 1, "r-open", None).await.unwrap();
    let ended = sandbox.prepare(&source, 2, "r-ended", None).await.unwrap();
    for wt in [&open, &ended] {
        sandbox.push(wt, &source, None).await.unwrap();
        assert!(sandbox.fetch_branch(wt, &source).await.unwrap().is_some());
    }
    a_run(&store, "r-open", 1, RunState::Running, now).await;
    a_run(&store, "r-ended", 2, RunState::Failed, now).await;
    let all = [
        "refs/closer/base/r-ended",
        "refs/closer/base/r-open",
        "refs/closer/remote/closer_issue-1",
        "refs/closer/remote/closer_issue-2",
        "refs/heads/closer/issue-1",
        "refs/heads/closer/issue-2",
    ];
    assert_eq!(mirror_refs(&open), all, "each run has its refs");
    let retention = Retention::new(
        store.clone(),
        workspace(data.path()),
        data.path().to_owned(),
        RetentionConfig::default(),
    );

    // Three days on, the ended run's worktree stays, and so do its refs.
    clock.set(now + 3 * DAY);
    retention.prune_once().await;
    assert_eq!(mirror_refs(&open), all);

    clock.set(now + 40 * DAY);
    let pruned = retention.prune_once().await;
    assert_eq!(pruned.mirrors, 0, "the open run still works in the mirror");
    assert!(!ended.path.exists());
    assert_eq!(
        mirror_refs(&open),
        [
            "refs/closer/base/r-open",
            "refs/closer/remote/closer_issue-1",
            "refs/heads/closer/issue-1",
        ],
        "only the open run's refs are left"
    );

    let back = sandbox.prepare(&source, 2, "r-ended", None).await.unwrap();
    assert!(back.path.join("a").exists(), "a retried run starts afresh");
}
