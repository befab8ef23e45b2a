//! The store's housekeeping: migrations replay cleanly, a newer schema is
//! refused, and pruning keeps what is still needed.

use closer::store::deliveries::{self, NewDelivery, PayloadEncoding};
use closer::store::jobs::{self, NewJob};
use closer::store::writer::{IntakeWriter, WriteOutcome};
use closer::store::{Store, StoreError, StoreOptions, migrate};

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
        payload: b"{}".to_vec(),
        encoding: PayloadEncoding::Identity,
        received_at,
        status: deliveries::RECEIVED,
        job: Some(NewJob {
            kind: "delivery".to_owned(),
            key: format!("delivery:{id}"),
            payload: "{}".to_owned(),
            max_attempts: 3,
            run_at: received_at,
        }),
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
        deliveries::mark(store.pool(), id, deliveries::PROCESSED, "ok", 0)
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
