//! The store's housekeeping: migrations replay cleanly (a replica waits for
//! another's), PostgreSQL's waits are bounded, a newer schema is
//! refused, and pruning keeps what is still needed.

use closer::model::{
    CompletionType, DeliveryStatus, InstallationId, IssueNumber, JobKind, Outcome, Phase, RepoName,
    RepositoryId, Run, RunId, RunState, Stage, TaskType,
};
use closer::store::deliveries::{self, NewDelivery};
use closer::store::jobs::{self, NewJob};
use closer::store::runs;
use closer::store::writer::{IntakeWriter, WriteOutcome};
use closer::store::{Store, StoreError, StoreOptions, migrate};
use sqlx::Row;

use crate::support::db::{TestDb, manual_clock};

const DAY: i64 = 86_400_000;

#[tokio::test]
async fn migrations_replay_from_empty_and_are_idempotent() {
    let db = TestDb::new("migrations").await;
    let store = Store::connect(&db.options(), closer::clock::system())
        .await
        .unwrap();
    assert!(store.ready().await.is_err(), "not ready before migrating");
    let applied = migrate::run(&store).await.unwrap();
    assert_eq!(applied.len() as i64, migrate::latest_version());
    assert_eq!(migrate::run(&store).await.unwrap(), Vec::<i64>::new());
    store.ready().await.unwrap();
}

#[tokio::test]
async fn a_database_from_a_newer_closer_is_refused() {
    let db = TestDb::new("newer").await;
    let store = db.store().await;
    sqlx::query(
        "INSERT INTO closer_migrations (version, name, applied_at) VALUES ($1, 'future', 0)",
    )
    .bind(migrate::latest_version() + 1)
    .execute(store.pool())
    .await
    .unwrap();
    let err = migrate::run(&store).await.unwrap_err();
    assert!(matches!(err, StoreError::NewerSchema(_)), "{err}");
}

fn delivery(id: &str, received_at: i64) -> NewDelivery {
    NewDelivery {
        delivery_id: id.to_owned(),
        event: "issues".to_owned(),
        action: Some("opened".to_owned()),
        installation_id: None,
        repository: None,
        body: b"{}".to_vec(),
        received_at,
        status: DeliveryStatus::Received,
        job: Some(NewJob {
            kind: JobKind::Delivery,
            key: format!("delivery:{id}"),
            payload: "{}".to_owned(),
            max_attempts: 3,
            run_at: received_at,
        }),
        only_with_work: None,
    }
}

#[tokio::test]
async fn an_in_memory_sqlite_database_is_refused_with_a_reason() {
    for url in ["sqlite::memory:", "sqlite://?mode=memory"] {
        let err = Store::connect(&StoreOptions::new(url), closer::clock::system())
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::InMemorySqlite), "{url}: {err}");
        assert!(err.to_string().contains("name a file"), "{err}");
    }
}

/// The SQLite writer prepares its statements when it starts: a database
/// without closer's schema is an error then, not on the first delivery.
#[tokio::test]
async fn the_intake_writer_refuses_to_start_on_a_database_without_the_schema() {
    let db = TestDb::new("no-schema").await;
    let store = Store::connect(&db.options(), closer::clock::system())
        .await
        .unwrap();
    match store.backend() {
        closer::store::Backend::Sqlite => {
            let err = IntakeWriter::spawn(store.clone(), 4).unwrap_err();
            assert!(err.to_string().contains("no such table"), "{err}");
        }
        closer::store::Backend::Postgres => {
            eprintln!("the PostgreSQL writer prepares nothing at start; nothing to check");
        }
    }
}

/// On PostgreSQL a statement waits at most 10 s for a lock and a session
/// idle inside a transaction is ended after a minute (the server's defaults
/// wait forever); a bound the operator set for the database is kept.
#[tokio::test]
async fn postgres_waits_are_bounded_unless_the_operator_bounded_them() {
    let db = TestDb::new("pg-waits").await;
    if db.backend != closer::store::Backend::Postgres {
        eprintln!("PostgreSQL only: SQLite's wait is its busy timeout");
        return;
    }
    let store = db.store().await;
    assert_eq!(setting(&store, "lock_timeout").await, "10s");
    assert_eq!(
        setting(&store, "idle_in_transaction_session_timeout").await,
        "1min"
    );

    let name = db.url.rsplit('/').next().unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "ALTER DATABASE \"{name}\" SET lock_timeout = '3s'"
    )))
    .execute(store.pool())
    .await
    .unwrap();
    store.close().await;
    let store = db.store().await;
    assert_eq!(
        setting(&store, "lock_timeout").await,
        "3s",
        "the operator's"
    );
    assert_eq!(
        setting(&store, "idle_in_transaction_session_timeout").await,
        "1min"
    );
}

async fn setting(store: &Store, name: &str) -> String {
    sqlx::query("SELECT current_setting($1) AS v")
        .bind(name)
        .fetch_one(store.pool())
        .await
        .unwrap()
        .get("v")
}

/// A replica that starts while another migrates waits for it however long
/// it takes: the connections' 10 s lock timeout does not cut that wait
/// short (a start failing with "canceling statement due to lock timeout").
#[tokio::test]
async fn a_replica_waits_for_anothers_migration_past_the_lock_timeout() {
    let db = TestDb::new("pg-migrating").await;
    if db.backend != closer::store::Backend::Postgres {
        eprintln!("PostgreSQL only: SQLite has one process migrating");
        return;
    }
    let store = db.store().await;
    let mut other = store.pool().acquire().await.unwrap();
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(migrate::PG_LOCK_KEY)
        .execute(&mut *other)
        .await
        .unwrap();
    let starting = tokio::spawn({
        let store = store.clone();
        async move { migrate::run(&store).await }
    });
    tokio::time::sleep(std::time::Duration::from_secs(12)).await;
    assert!(
        !starting.is_finished(),
        "still waiting: {:?}",
        starting.await
    );
    sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(migrate::PG_LOCK_KEY)
        .execute(&mut *other)
        .await
        .unwrap();
    let applied = tokio::time::timeout(std::time::Duration::from_secs(10), starting)
        .await
        .expect("migrates once the lock goes")
        .unwrap()
        .unwrap();
    assert_eq!(applied, Vec::<i64>::new(), "nothing left to apply");
}

/// Two processes starting on one new SQLite file at once (`closer migrate`
/// while a service restarts) both start: each migration is applied once,
/// under SQLite's write lock, and the one that finds it applied goes on.
/// Before, both read version 0 and one failed on "table already exists".
#[tokio::test]
async fn two_processes_migrating_one_sqlite_file_at_once_both_start() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..5 {
        let file = dir.path().join(format!("closer-{round}.db"));
        let options = closer::store::StoreOptions::new(format!("sqlite://{}", file.display()));
        let (a, b) = (
            Store::connect(&options, closer::clock::system())
                .await
                .unwrap(),
            Store::connect(&options, closer::clock::system())
                .await
                .unwrap(),
        );
        let (ra, rb) = tokio::join!(migrate::run(&a), migrate::run(&b));
        let (ra, rb) = (ra.unwrap(), rb.unwrap());
        let mut all: Vec<i64> = ra.iter().chain(&rb).copied().collect();
        all.sort_unstable();
        let every: Vec<i64> = (1..=migrate::latest_version()).collect();
        assert_eq!(all, every, "each migration applied once: {ra:?} {rb:?}");
    }
}

/// A stop writes only the state, the outcome and the time, and queues the
/// job it is given (the step that shows it) in the same transaction: what a
/// step wrote a moment before (here the iteration, its usage and task
/// type) is kept, and that step's later writes are refused. A second stop
/// writes nothing and queues nothing.
#[tokio::test]
async fn stopping_a_run_keeps_what_a_step_just_wrote() {
    let db = TestDb::new("stop-keeps").await;
    let store = db.store().await;
    let loaded = a_run("run-1");
    let (stored, created) = runs::insert_or_get(store.pool(), &loaded).await.unwrap();
    assert!(created);
    // A step writes iteration 2 after the stop loaded its copy.
    let mut step = stored.clone();
    step.iteration = 2;
    step.tokens_used = 250;
    step.task_type = Some(TaskType::Bug);
    assert!(
        runs::save_unless_stopped(store.pool(), &step)
            .await
            .unwrap()
    );

    let id = RunId::from_stored("run-1");
    let outcome = Outcome::Stopped("/closer stop".into());
    let show = show_stop_job(30_009);
    let queued = || async {
        sqlx::query("SELECT run_at FROM jobs WHERE job_key = 'run:run-1'")
            .fetch_all(store.pool())
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<i64, _>("run_at"))
            .collect::<Vec<i64>>()
    };
    assert!(
        runs::mark_stopped(store.pool(), &id, &outcome, &show, 9)
            .await
            .unwrap()
    );
    assert_eq!(queued().await, vec![30_009], "the stop's step is queued");
    assert!(
        !runs::mark_stopped(store.pool(), &id, &outcome, &show, 10)
            .await
            .unwrap(),
        "a second stop writes nothing"
    );
    assert_eq!(queued().await, vec![30_009], "and queues nothing");
    let after = runs::get(store.pool(), &id).await.unwrap().unwrap();
    assert_eq!(after.state, RunState::Stopped);
    assert_eq!(after.outcome, Some(outcome));
    assert_eq!(after.updated_at, 9);
    assert_eq!(
        (after.iteration, after.tokens_used, after.task_type),
        (2, 250, Some(TaskType::Bug)),
        "the step's write is kept"
    );
    step.iteration = 3;
    assert!(
        !runs::save_unless_stopped(store.pool(), &step)
            .await
            .unwrap(),
        "the step's next write is refused"
    );
    assert_eq!(
        runs::get(store.pool(), &id)
            .await
            .unwrap()
            .unwrap()
            .iteration,
        2
    );
}

/// A stopped agent's spending, added to the run by `stop_iteration`, is
/// kept when the stop's own status save (from a copy read before it) writes
/// the run: the totals only grow.
#[tokio::test]
async fn a_save_from_an_older_copy_keeps_what_a_stopped_agent_spent() {
    let db = TestDb::new("stop-spent").await;
    let store = db.store().await;
    let mut run = a_run("run-1");
    run.tokens_used = 100;
    run.cost_usd = 0.5;
    let (stopped, _) = runs::insert_or_get(store.pool(), &run).await.unwrap();
    // The stop's copy, read before the worker records the stopped iteration.
    let mut stop = stopped.clone();
    stop.state = RunState::Stopped;
    runs::start_iteration(store.pool(), &stopped.id, 1, "", 0)
        .await
        .unwrap();
    let spent = runs::Spent {
        tokens: 1234,
        cost_usd: 0.25,
    };
    runs::stop_iteration(store.pool(), &stopped.id, 1, "{}", spent, 5)
        .await
        .unwrap();
    assert!(
        runs::save_unless_stopped(store.pool(), &stop)
            .await
            .unwrap()
    );

    let after = runs::get(store.pool(), &stopped.id).await.unwrap().unwrap();
    assert_eq!(after.state, RunState::Stopped);
    assert_eq!(
        after.tokens_used, 1334,
        "what the stopped agent spent is kept"
    );
    assert!((after.cost_usd - 0.75).abs() < 1e-9, "{}", after.cost_usd);
}

/// An agent may report any token count; a stopped iteration's adds up to
/// the column's largest value, and the run stays readable (past it,
/// SQLite stored a float the run could not be read back from, and
/// PostgreSQL refused the update).
#[tokio::test]
async fn a_stopped_agent_reporting_absurd_spending_leaves_the_run_readable() {
    let db = TestDb::new("stop-absurd").await;
    let store = db.store().await;
    let mut run = a_run("run-1");
    run.tokens_used = 100;
    let (stopped, _) = runs::insert_or_get(store.pool(), &run).await.unwrap();
    for number in [1, 2] {
        runs::start_iteration(store.pool(), &stopped.id, number, "", 0)
            .await
            .unwrap();
        let spent = runs::Spent {
            tokens: u64::MAX,
            cost_usd: closer::agent::outcome::MAX_REPORTED_COST_USD,
        };
        runs::stop_iteration(store.pool(), &stopped.id, number, "{}", spent, 5)
            .await
            .unwrap();
    }
    let after = runs::get(store.pool(), &stopped.id).await.unwrap().unwrap();
    assert_eq!(after.tokens_used, i64::MAX as u64);
}

/// A step that verified and judged while the run was stopped has its save
/// refused, but what it spent (the agent, the completion check) is kept.
#[tokio::test]
async fn a_refused_save_keeps_what_the_step_spent() {
    let db = TestDb::new("refused-spent").await;
    let store = db.store().await;
    let mut run = a_run("run-1");
    run.tokens_used = 100;
    let (loaded, _) = runs::insert_or_get(store.pool(), &run).await.unwrap();
    let show = show_stop_job(0);
    let stopped = Outcome::Stopped("/closer stop".into());
    assert!(
        runs::mark_stopped(store.pool(), &loaded.id, &stopped, &show, 9)
            .await
            .unwrap()
    );
    let mut step = loaded.clone();
    step.tokens_used = 5_100;
    step.cost_usd = 1.5;
    step.iteration = 2;
    assert!(
        !runs::save_unless_stopped(store.pool(), &step)
            .await
            .unwrap(),
        "the step's save is refused"
    );

    let after = runs::get(store.pool(), &loaded.id).await.unwrap().unwrap();
    assert_eq!(after.state, RunState::Stopped);
    assert_eq!(after.iteration, loaded.iteration, "nothing else is written");
    assert_eq!(after.tokens_used, 5_100, "what the step spent is kept");
    assert!((after.cost_usd - 1.5).abs() < 1e-9, "{}", after.cost_usd);
}

/// The repository moves to another owner (another installation) while a
/// step works with the run it read before: the step's save keeps where the
/// repository lives now, and a restart writes it (decision 232). Before, the
/// step wrote the old installation and clone URL back under the new name,
/// and later steps got tokens for an installation that no longer covers it.
#[tokio::test]
async fn a_steps_save_keeps_where_a_rename_moved_the_repository() {
    let db = TestDb::new("rename-kept").await;
    let store = db.store().await;
    let mut run = a_run("run-1");
    run.clone_url = Some("https://github.com/octo/calc.git".into());
    let (read, _) = runs::insert_or_get(store.pool(), &run).await.unwrap();
    let new = RepoName::new("acme", "calc");
    let renamed = runs::rename_repository(
        store.pool(),
        &read.repository,
        &new,
        RepositoryId(42),
        "https://github.com/acme/calc.git",
        InstallationId(2),
    )
    .await
    .unwrap();
    assert_eq!(renamed, 1);

    let mut step = read.clone();
    step.iteration = 2;
    assert!(
        runs::save_unless_stopped(store.pool(), &step)
            .await
            .unwrap()
    );
    let after = runs::get(store.pool(), &read.id).await.unwrap().unwrap();
    assert_eq!(after.iteration, 2, "the step's own columns are written");
    assert_eq!(after.repository, new);
    assert_eq!(after.installation_id, InstallationId(2));
    assert_eq!(
        after.clone_url.as_deref(),
        Some("https://github.com/acme/calc.git")
    );

    // A restart writes them: it read them from GitHub.
    let mut restart = after.clone();
    restart.clone_url = Some("https://github.com/acme/calc2.git".into());
    restart.installation_id = InstallationId(3);
    runs::save(store.pool(), &restart).await.unwrap();
    let after = runs::get(store.pool(), &read.id).await.unwrap().unwrap();
    assert_eq!(after.installation_id, InstallationId(3));
    assert_eq!(
        after.clone_url.as_deref(),
        Some("https://github.com/acme/calc2.git")
    );
}

/// The job that shows run-1's stop on GitHub, due at `run_at`.
fn show_stop_job(run_at: i64) -> NewJob {
    NewJob {
        kind: JobKind::Run,
        key: "run:run-1".to_owned(),
        payload: r#"{"run_id":"run-1","step":"show_stop"}"#.to_owned(),
        max_attempts: 3,
        run_at,
    }
}

/// A run as a step would write it: running, iteration 1.
fn a_run(id: &str) -> Run {
    Run {
        id: RunId::from_stored(id),
        installation_id: InstallationId(1),
        repository: RepoName::new("octo", "calc"),
        repository_id: None,
        issue_number: IssueNumber(7),
        state: RunState::Running,
        phase: Phase::Processing,
        completion_type: CompletionType::Issue,
        task_type: None,
        stage: Stage::Normal,
        iteration: 1,
        max_iterations: 10,
        branch: "closer/issue-7".into(),
        base_commit: None,
        clone_url: None,
        default_branch: None,
        pull_request: None,
        status_comment_id: Some(5),
        tokens_used: 100,
        cost_usd: 0.0,
        outcome: None,
        data: "{}".into(),
        created_at: 1,
        updated_at: 1,
        generation: 0,
    }
}

/// A row written by hand (or by a newer closer) with a state this one does
/// not know is an error that names the column and the value, never a
/// default state.
#[tokio::test]
async fn a_run_with_an_unknown_state_is_an_error_naming_it() {
    let db = TestDb::new("unknown-state").await;
    let store = db.store().await;
    let run = a_run("run-odd");
    runs::insert_or_get(store.pool(), &run).await.unwrap();
    sqlx::query("UPDATE runs SET state = 'paused' WHERE id = 'run-odd'")
        .execute(store.pool())
        .await
        .unwrap();
    let err = runs::get(store.pool(), &run.id).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("runs.state"), "{text}");
    assert!(text.contains("\"paused\""), "{text}");
    let by_issue = runs::by_issue(store.pool(), &run.repository, run.issue_number).await;
    assert!(by_issue.is_err(), "every read is strict: {by_issue:?}");
    // The control: the same row with a known state reads.
    sqlx::query("UPDATE runs SET state = 'queued' WHERE id = 'run-odd'")
        .execute(store.pool())
        .await
        .unwrap();
    let back = runs::get(store.pool(), &run.id).await.unwrap().unwrap();
    assert_eq!(back.state, RunState::Queued);
}

#[tokio::test]
async fn pruning_removes_old_handled_deliveries_and_finished_jobs_only() {
    let db = TestDb::new("prune").await;
    let (_clock, shared) = manual_clock(100 * DAY);
    let store = db.store_with_clock(shared).await;
    let (writer, _task) = IntakeWriter::spawn(store.clone(), 16).expect("intake writer");
    for (id, age_days) in [("old-done", 20), ("old-waiting", 20), ("new-done", 1)] {
        let outcome = writer
            .submit(delivery(id, (100 - age_days) * DAY))
            .await
            .unwrap();
        assert_eq!(outcome, WriteOutcome::Stored);
    }
    for id in ["old-done", "new-done"] {
        deliveries::mark(store.pool(), id, DeliveryStatus::Processed, "ok", 0)
            .await
            .unwrap();
    }
    // Finish the old delivery's job long ago.
    let job = jobs::claim(
        store.pool(),
        store.backend(),
        "w",
        100 * DAY,
        std::time::Duration::from_secs(60),
    )
    .await
    .unwrap()
    .unwrap();
    jobs::complete(store.pool(), job.id, "w", 80 * DAY)
        .await
        .unwrap();

    let cutoff = 100 * DAY - 14 * DAY;
    assert_eq!(deliveries::prune(store.pool(), cutoff).await.unwrap(), 1);
    assert!(
        deliveries::get(store.pool(), "old-done")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        deliveries::get(store.pool(), "old-waiting")
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        deliveries::get(store.pool(), "new-done")
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(jobs::prune_done(store.pool(), cutoff).await.unwrap(), 1);
    assert!(jobs::get(store.pool(), job.id).await.unwrap().is_none());
}

/// Run `key`'s job, queued at `at`, claimed and then completed (`dies`:
/// failed for good) at `finished`.
async fn finish_job(store: &Store, key: &str, at: i64, finished: i64, dies: bool) {
    let job = NewJob {
        kind: JobKind::Run,
        key: key.to_owned(),
        payload: r#"{"run_id":"run-1","step":"finish"}"#.to_owned(),
        max_attempts: 1,
        run_at: at,
    };
    jobs::enqueue(store.pool(), &job, at).await.unwrap();
    let lease = std::time::Duration::from_secs(60);
    let leased = jobs::claim(store.pool(), store.backend(), "w", at, lease)
        .await
        .unwrap()
        .expect("the job is claimable");
    if dies {
        jobs::fail(
            store.pool(),
            &leased,
            "w",
            finished,
            "422 from GitHub",
            None,
        )
        .await
        .unwrap();
    } else {
        assert!(
            jobs::complete(store.pool(), leased.id, "w", finished)
                .await
                .unwrap()
        );
    }
}

/// A run's steps that died are counted since the last one that completed
/// and since the run's restart; retention keeps the completed job that
/// ends a streak for as long as a death before it is kept, so an old death
/// is never counted again once its successor is pruned.
#[tokio::test]
async fn dead_steps_are_counted_since_the_last_success_and_the_restart_even_after_pruning() {
    let db = TestDb::new("dead-streak").await;
    let store = db.store().await;
    let key = "run:run-1";
    finish_job(&store, key, 60 * DAY, 70 * DAY, true).await;
    finish_job(&store, key, 75 * DAY, 80 * DAY, false).await;
    finish_job(&store, key, 90 * DAY, 91 * DAY, true).await;
    let (dead, error) = jobs::dead_in_a_row(store.pool(), key, 0).await.unwrap();
    assert_eq!((dead, error.as_deref()), (1, Some("422 from GitHub")));
    let (dead, _) = jobs::dead_in_a_row(store.pool(), key, 95 * DAY)
        .await
        .unwrap();
    assert_eq!(dead, 0, "deaths before the restart do not count");

    // Done jobs go after 14 days, dead ones after 30: the success that
    // ended the first streak is kept while that death is.
    assert_eq!(jobs::prune_done(store.pool(), 86 * DAY).await.unwrap(), 0);
    let (dead, _) = jobs::dead_in_a_row(store.pool(), key, 0).await.unwrap();
    assert_eq!(dead, 1, "the death before the success is not counted");
    assert_eq!(jobs::prune_dead(store.pool(), 71 * DAY).await.unwrap(), 1);
    assert_eq!(jobs::prune_done(store.pool(), 86 * DAY).await.unwrap(), 1);
    let (dead, _) = jobs::dead_in_a_row(store.pool(), key, 0).await.unwrap();
    assert_eq!(dead, 1);
}

/// A review comment's kept words are replaced only by words at least as
/// new: a redelivered `created` arriving after the `edited` keeps the edit.
#[tokio::test]
async fn a_review_comments_kept_words_are_replaced_only_by_newer_ones() {
    use closer::store::review_texts::{self, KeptText};
    let db = TestDb::new("review-texts").await;
    let store = db.store().await;
    let run = RunId::from_stored("run-1");
    let text = |body: &str, version: &str| KeptText {
        comment_id: 7,
        author: "maria".into(),
        body: body.into(),
        version: version.into(),
    };
    let edit = text("as edited", "2026-11-28T10:00:05Z");
    assert!(
        review_texts::keep(store.pool(), &run, &edit, 1)
            .await
            .unwrap()
    );
    let late = text("as written", "2026-11-28T10:00:00Z");
    assert!(
        !review_texts::keep(store.pool(), &run, &late, 2)
            .await
            .unwrap()
    );
    let kept = review_texts::of_run(store.pool(), &run).await.unwrap();
    assert_eq!(kept[&7], "as edited");
    let newer = text("edited again", "2026-11-28T10:01:00Z");
    assert!(
        review_texts::keep(store.pool(), &run, &newer, 3)
            .await
            .unwrap()
    );
    let kept = review_texts::of_run(store.pool(), &run).await.unwrap();
    assert_eq!(kept[&7], "edited again");
    assert!(
        review_texts::of_run(store.pool(), &RunId::from_stored("run-2"))
            .await
            .unwrap()
            .is_empty()
    );
}

/// Of two reconciliation passes failing the same run, one writes it; a
/// run that moved on (another state, or a new life) is not written.
#[tokio::test]
async fn a_runs_failure_is_written_once_and_only_as_it_was_read() {
    let db = TestDb::new("fail-if-still").await;
    let store = db.store().await;
    let read = a_run("run-1");
    runs::insert_or_get(store.pool(), &read).await.unwrap();
    let failed = Run {
        state: RunState::Failed,
        outcome: Some(Outcome::Failed("steps kept failing".into())),
        ..read.clone()
    };
    let later_life = Run {
        generation: 1,
        ..failed.clone()
    };
    let save = |run: &Run, was: RunState| {
        let (pool, run) = (store.pool().clone(), run.clone());
        async move { runs::save_if_still(&pool, &run, was).await.unwrap() }
    };
    assert!(!save(&later_life, RunState::Running).await, "another life");
    assert!(!save(&failed, RunState::Verifying).await, "another state");
    assert!(save(&failed, RunState::Running).await);
    assert!(!save(&failed, RunState::Running).await, "failed already");
    let stored = runs::get(store.pool(), &read.id).await.unwrap().unwrap();
    assert_eq!(stored.state, RunState::Failed);
    assert_eq!(stored.outcome, failed.outcome, "the whole run is written");
}

/// A renamed repository's runs take the new name and the installation that
/// reaches it; a run whose issue number the new name already has a run for
/// (a deleted repository's name taken again) keeps the old name, and so
/// does a run of another repository that had the old name before.
#[tokio::test]
async fn a_renamed_repositorys_runs_follow_unless_the_new_name_has_that_issue() {
    let db = TestDb::new("rename-runs").await;
    let store = db.store().await;
    let (old, new) = (RepoName::new("octo", "calc"), RepoName::new("acme", "calc"));
    const URL: &str = "https://github.com/acme/calc.git";
    let run = |id: &str, repo: &RepoName, issue: u64| Run {
        repository: repo.clone(),
        issue_number: IssueNumber(issue),
        ..a_run(id)
    };
    // GitHub's answer for the old name is repository 4; repository 5 had
    // the name before it, and #9 is its run.
    let of = |id: i64, run: Run| Run {
        repository_id: Some(RepositoryId(id)),
        ..run
    };
    for r in [
        run("r7", &old, 7),
        of(4, run("r8", &old, 8)),
        of(5, run("r9", &old, 9)),
        run("r10", &old, 10),
        run("there-7", &new, 7),
    ] {
        runs::insert_or_get(store.pool(), &r).await.unwrap();
    }
    let renamed = runs::rename_repository(
        store.pool(),
        &old,
        &new,
        RepositoryId(4),
        URL,
        InstallationId(9),
    );
    assert_eq!(renamed.await.unwrap(), 2);
    let get = |id: &str| {
        let (pool, id) = (store.pool().clone(), RunId::from_stored(id));
        async move { runs::get(&pool, &id).await.unwrap().unwrap() }
    };
    let moved = get("r8").await;
    assert_eq!(
        (moved.repository, moved.installation_id),
        (new.clone(), InstallationId(9))
    );
    assert_eq!(moved.clone_url.as_deref(), Some(URL), "the new name's");
    assert_eq!(get("r10").await.repository, new, "stored without an id");
    assert_eq!(get("r7").await.repository, old, "#7 is taken there");
    assert_eq!(get("r9").await.repository, old, "another repository's");
    assert_eq!(get("there-7").await.repository, new);
}

/// The runs stored under a name that another repository now holds are set
/// aside: of another id or of none, and created before the holder was
/// (ended ones as they were, open ones stopped in a new generation); the
/// holder's own runs, runs created after it (a run stored without an id
/// that is the holder's), a differently written name and, for a late
/// delivery from a repository older than the runs, nothing.
#[tokio::test]
async fn runs_of_a_name_another_repository_holds_are_set_aside_and_no_others() {
    use closer::store::replaced::{self, Holder, SET_ASIDE};
    let db = TestDb::new("set-aside").await;
    let store = db.store().await;
    let calc = RepoName::new("octo", "calc");
    let run = |id: &str, issue: u64, repo_id: Option<i64>, created: i64, state| Run {
        repository: calc.clone(),
        issue_number: IssueNumber(issue),
        repository_id: repo_id.map(RepositoryId),
        created_at: created,
        state,
        ..a_run(id)
    };
    for r in [
        run("ended", 1, Some(1), 1_000, RunState::Done),
        run("open", 2, Some(1), 1_000, RunState::Running),
        run("no-id-before", 3, None, 1_000, RunState::Done),
        run("no-id-after", 4, None, 9_000, RunState::Done),
        run("holders", 5, Some(2), 1_000, RunState::Running),
        Run {
            repository: RepoName::new("Octo", "Calc"),
            ..run("other-case", 1, Some(1), 1_000, RunState::Done)
        },
    ] {
        runs::insert_or_get(store.pool(), &r).await.unwrap();
    }
    let get = |id: &str| {
        let (pool, id) = (store.pool().clone(), RunId::from_stored(id));
        async move { runs::get(&pool, &id).await.unwrap().unwrap() }
    };
    let holder = |id: i64, created_at: Option<i64>| Holder {
        name: &calc,
        id: RepositoryId(id),
        created_at,
    };
    let now = 10_000;

    // A late delivery from the repository that had the name, created
    // before every run: nothing is set aside.
    let late = replaced::set_aside(store.pool(), holder(1, Some(500)), now);
    assert!(late.await.unwrap().is_empty());

    let mut aside = replaced::set_aside(store.pool(), holder(2, Some(5_000)), now)
        .await
        .unwrap();
    aside.sort();
    let ids = ["ended", "no-id-before", "open"].map(RunId::from_stored);
    assert_eq!(aside, ids.to_vec());
    let ended = get("ended").await;
    assert!(ended.is_set_aside());
    assert_eq!(ended.repository.to_string(), "octo/calc~ended");
    assert_eq!((ended.state, ended.outcome), (RunState::Done, None));
    let open = get("open").await;
    assert_eq!(open.state, RunState::Stopped);
    assert_eq!(open.outcome, Some(Outcome::Stopped(SET_ASIDE.into())));
    assert_eq!(open.generation, 1, "a step in flight cannot save it");
    for kept in ["no-id-after", "holders", "other-case"] {
        assert!(!get(kept).await.is_set_aside(), "{kept}");
    }

    // Not knowing when the holder was created: another id only.
    let aside = replaced::set_aside(store.pool(), holder(3, None), now);
    assert_eq!(aside.await.unwrap(), vec![RunId::from_stored("holders")]);
    assert!(!get("no-id-after").await.is_set_aside());
}

/// The open runs of repositories closer can no longer reach are stopped,
/// each with the reason, as `/closer stop` stops them (same generation, so
/// a step in flight still adds what it spent): the repository's runs by
/// its id under any name (a rename not followed yet), and those stored
/// without an id by the name in any case. Nothing else is: ended runs,
/// another repository of the installation, another installation, a run of
/// another repository that once had the name.
#[tokio::test]
async fn open_runs_closer_lost_access_to_are_stopped_and_no_others() {
    use closer::model::Withdrawal;
    use closer::store::withdrawn::{Scope, stop_runs};
    let db = TestDb::new("withdrawn").await;
    let store = db.store().await;
    let (calc, docs) = (RepoName::new("octo", "calc"), RepoName::new("octo", "docs"));
    let run = |id: &str, issue: u64, repo: &RepoName, repo_id: Option<i64>, state| Run {
        repository: repo.clone(),
        issue_number: IssueNumber(issue),
        repository_id: repo_id.map(RepositoryId),
        state,
        ..a_run(id)
    };
    for r in [
        run("open", 1, &calc, Some(10), RunState::Running),
        run(
            "no-id",
            2,
            &RepoName::new("Octo", "Calc"),
            None,
            RunState::Queued,
        ),
        run(
            "old-name",
            8,
            &RepoName::new("octo", "abacus"),
            Some(10),
            RunState::Queued,
        ),
        run("ended", 3, &calc, Some(10), RunState::Done),
        run("older-repo", 4, &calc, Some(9), RunState::AwaitingResponse),
        run("docs", 5, &docs, Some(11), RunState::Running),
        Run {
            installation_id: InstallationId(2),
            ..run("other-installation", 6, &calc, Some(10), RunState::Running)
        },
    ] {
        runs::insert_or_get(store.pool(), &r).await.unwrap();
    }
    let get = |id: &str| {
        let (pool, id) = (store.pool().clone(), RunId::from_stored(id));
        async move { runs::get(&pool, &id).await.unwrap().unwrap() }
    };
    let ids = |list: &[&str]| {
        list.iter()
            .map(|id| RunId::from_stored(*id))
            .collect::<Vec<_>>()
    };
    let (pool, now) = (store.pool(), 10_000);

    let deleted = Scope::Repository {
        installation: InstallationId(1),
        name: &calc,
        id: Some(RepositoryId(10)),
    };
    let mut stopped = stop_runs(pool, deleted, Withdrawal::Deleted, now)
        .await
        .unwrap();
    stopped.sort();
    assert_eq!(stopped, ids(&["no-id", "old-name", "open"]));
    let open = get("open").await;
    assert_eq!(open.state, RunState::Stopped);
    assert_eq!(open.outcome, Some(Withdrawal::Deleted.outcome()));
    assert_eq!(open.withdrawn(), Some(Withdrawal::Deleted));
    assert_eq!(open.generation, 0, "as a person's stop");
    let mut in_flight = Run {
        state: RunState::Running,
        tokens_used: 500,
        ..open.clone()
    };
    in_flight.outcome = None;
    assert!(!runs::save_unless_stopped(pool, &in_flight).await.unwrap());
    let open = get("open").await;
    assert_eq!(
        open.withdrawn(),
        Some(Withdrawal::Deleted),
        "not saved over"
    );
    assert_eq!(open.tokens_used, 500, "what the step spent is kept");
    let ended = get("ended").await;
    assert_eq!((ended.state, ended.outcome), (RunState::Done, None));
    for kept in ["older-repo", "docs", "other-installation"] {
        assert!(!get(kept).await.state.is_final(), "{kept}");
    }

    let removed = Scope::Repository {
        installation: InstallationId(1),
        name: &docs,
        id: None,
    };
    let stopped = stop_runs(pool, removed, Withdrawal::Removed, now);
    assert_eq!(stopped.await.unwrap(), ids(&["docs"]));
    assert_eq!(get("docs").await.withdrawn(), Some(Withdrawal::Removed));

    let uninstalled = Scope::Installation(InstallationId(2));
    let stopped = stop_runs(pool, uninstalled, Withdrawal::Uninstalled, now);
    assert_eq!(stopped.await.unwrap(), ids(&["other-installation"]));
    assert!(
        !get("older-repo").await.state.is_final(),
        "installation 1's"
    );

    // A run stopped by a person is not withdrawn: its steps still show it.
    let by_hand = Run {
        outcome: Some(Outcome::Stopped("stopped by @octo".into())),
        ..run("by-hand", 7, &calc, Some(10), RunState::Stopped)
    };
    assert_eq!(by_hand.withdrawn(), None);
}
