//! Durability with the real binary: every delivery answered 2xx survives a
//! kill -9, the service refuses to run unsigned, shuts down cleanly on
//! SIGTERM, and (on PostgreSQL) two processes share one queue; the default
//! process runs its workers below its intake's CPU priority.

use std::time::Duration;

use reqwest::StatusCode;
use sqlx::Row;

use crate::support::SpawnApart;
use crate::support::app::SECRET;
use crate::support::db::TestDb;
use crate::support::process::{CloserProcess, closer_command};
use crate::support::{fixture, sign, unique};

async fn post(client: &reqwest::Client, url: &str, id: &str, body: &[u8]) -> Option<StatusCode> {
    client
        .post(format!("{url}/webhooks"))
        .header("x-github-event", "issues")
        .header("x-github-delivery", id)
        .header("x-hub-signature-256", sign(SECRET, body))
        .body(body.to_vec())
        .send()
        .await
        .ok()
        .map(|r| r.status())
}

fn short_lease_config(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("closer.toml");
    std::fs::write(&path, "workers = 2\n[queue]\nlease_secs = 5\n").unwrap();
    path
}

#[tokio::test]
async fn refuses_to_start_without_a_webhook_secret() {
    let db = TestDb::new("nosecret").await;
    let mut command = closer_command(&db.url, &[]);
    command
        .env_remove("GITHUB_WEBHOOK_SECRET")
        .args(["serve", "--dry-run"]);
    let output = command.output_apart().await.unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("GITHUB_WEBHOOK_SECRET is not set"),
        "{stderr}"
    );
}

#[tokio::test]
async fn refuses_to_start_without_app_credentials_unless_dry_run() {
    let db = TestDb::new("nocreds").await;
    let mut command = closer_command(&db.url, &[]);
    command.arg("serve");
    let output = command.output_apart().await.unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--dry-run"), "{stderr}");
}

#[tokio::test]
async fn every_acknowledged_delivery_survives_kill_9_and_is_processed_after_restart() {
    let db = TestDb::new("kill9").await;
    let dir = tempfile::tempdir().unwrap();
    let config = short_lease_config(dir.path());
    let server = CloserProcess::serve(&db.url, Some(&config), &[]).await;
    let client = crate::support::client();
    let body = fixture("issues.opened.json");

    // Post concurrently and kill the process while requests are in flight.
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..300 {
        let (client, url, body) = (client.clone(), server.url.clone(), body.clone());
        let id = format!("kill9-{i}");
        tasks.spawn(async move { (id.clone(), post(&client, &url, &id, &body).await) });
    }
    let mut acknowledged = Vec::new();
    while let Some(result) = tasks.join_next().await {
        let (id, status) = result.unwrap();
        if status.is_some_and(|s| s.is_success()) {
            acknowledged.push(id);
        }
        if acknowledged.len() == 200 {
            break;
        }
    }
    server.kill_hard().await;
    while let Some(result) = tasks.join_next().await {
        let (id, status) = result.unwrap();
        if status.is_some_and(|s| s.is_success()) {
            acknowledged.push(id);
        }
    }
    assert!(acknowledged.len() >= 200);

    // After a restart every acknowledged delivery is there, and gets processed.
    let restarted = CloserProcess::serve(&db.url, Some(&config), &[]).await;
    let store = db.store().await;
    for id in &acknowledged {
        let row = closer::store::deliveries::get(store.pool(), id)
            .await
            .unwrap();
        assert!(row.is_some(), "acknowledged delivery {id} was lost");
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let pending: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM deliveries WHERE status = 'received'")
                .fetch_one(store.pool())
                .await
                .unwrap()
                .get("n");
        if pending == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{pending} deliveries never processed"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let dead: i64 = sqlx::query("SELECT COUNT(*) AS n FROM jobs WHERE state <> 'done'")
        .fetch_one(store.pool())
        .await
        .unwrap()
        .get("n");
    assert_eq!(dead, 0);
    assert_eq!(restarted.terminate().await.code(), Some(0));
}

#[tokio::test]
async fn sigterm_finishes_in_flight_work_and_exits_0() {
    let db = TestDb::new("sigterm").await;
    let server = CloserProcess::serve(&db.url, None, &[]).await;
    let client = crate::support::client();
    let body = fixture("issues.opened.json");
    let status = post(&client, &server.url, &unique("term"), &body).await;
    assert_eq!(status, Some(StatusCode::ACCEPTED));
    let status = server.terminate().await;
    assert_eq!(status.code(), Some(0));
    let store = db.store().await;
    assert_eq!(
        closer::store::deliveries::count(store.pool())
            .await
            .unwrap(),
        1
    );
}

/// A supervisor may send SIGTERM as soon as the port answers, before closer
/// has finished starting (decision 246): the signal is caught from the
/// start and the process still drains and exits 0, never killed mid-write.
#[tokio::test]
async fn sigterm_as_soon_as_the_port_answers_still_exits_0() {
    let db = TestDb::new("early_term").await;
    let server = CloserProcess::start(&db.url, None, &[]);
    server.wait_bound().await;
    let status = server.terminate().await;
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// SIGTERM while closer waits at start for another replica's migration
/// (the migration lock held elsewhere; that wait has no bound): it stops
/// there and exits 0. Before, the signal was kept until closer served,
/// which it never did while the lock was held.
#[tokio::test]
async fn sigterm_while_another_replica_migrates_ends_the_wait_and_exits_0() {
    let db = TestDb::new("term_migrating").await;
    if db.backend != closer::store::Backend::Postgres {
        eprintln!("SKIPPED sigterm_while_another_replica_migrates: TEST_DATABASE_URL is not set");
        return;
    }
    let store = db.store().await;
    let mut held = store.pool().acquire().await.unwrap();
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(closer::store::migrate::PG_LOCK_KEY)
        .execute(&mut *held)
        .await
        .unwrap();
    let server = CloserProcess::start(&db.url, None, &[]);
    server.wait_bound().await;
    // Past the bind, it opens the database and waits for the lock.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let status = server.terminate().await;
    assert_eq!(status.code(), Some(0), "{status:?}");
    drop(held);
}

/// A process with workers says its workspace (its data directory's id) is
/// alive, and that it left when it stops (decision 254): another replica
/// then takes its runs over at once.
#[tokio::test]
async fn a_worker_process_announces_its_workspace_until_it_stops() {
    let db = TestDb::new("workspace_beat").await;
    let server = CloserProcess::serve(&db.url, None, &[]).await;
    let store = db.store().await;
    let announced = || async {
        sqlx::query("SELECT id FROM workspaces")
            .fetch_all(store.pool())
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>("id"))
            .collect::<Vec<_>>()
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while announced().await.is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "never announced");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The test's processes share the default data directory (`closer-data`).
    let id = std::fs::read_to_string(
        std::env::current_dir()
            .unwrap()
            .join("closer-data/workspace-id"),
    )
    .unwrap();
    assert_eq!(announced().await, [id.trim()]);
    assert_eq!(server.terminate().await.code(), Some(0));
    assert_eq!(announced().await, Vec::<String>::new(), "left at shutdown");
}

#[tokio::test]
async fn two_processes_share_one_postgres_queue_without_double_work() {
    let db = TestDb::new("twoproc").await;
    if db.backend != closer::store::Backend::Postgres {
        eprintln!("SKIPPED two_processes_share_one_postgres_queue: TEST_DATABASE_URL is not set");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let config = short_lease_config(dir.path());
    let intake = CloserProcess::serve(&db.url, Some(&config), &["--role", "intake"]).await;
    let client = crate::support::client();
    let body = fixture("issue_comment.created.json");
    for i in 0..200 {
        let mut value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        value["issue"]["number"] = (i % 40).into();
        // An assignment: triage keeps every one (a way to hand closer an
        // issue); the engine has nothing to do with this one.
        value["action"] = "assigned".into();
        let bytes = value.to_string().into_bytes();
        let status = post(&client, &intake.url, &format!("two-{i}"), &bytes).await;
        assert_eq!(status, Some(StatusCode::ACCEPTED));
    }
    let worker_a = CloserProcess::serve(&db.url, Some(&config), &["--role", "worker"]).await;
    let worker_b = CloserProcess::serve(&db.url, Some(&config), &["--role", "worker"]).await;
    let store = db.store().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let open: i64 = sqlx::query("SELECT COUNT(*) AS n FROM jobs WHERE state <> 'done'")
            .fetch_one(store.pool())
            .await
            .unwrap()
            .get("n");
        if open == 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "{open} jobs left");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let retried: i64 = sqlx::query("SELECT COUNT(*) AS n FROM jobs WHERE attempts <> 1")
        .fetch_one(store.pool())
        .await
        .unwrap()
        .get("n");
    assert_eq!(retried, 0, "a job was claimed more than once");
    let processed: i64 =
        sqlx::query("SELECT COUNT(*) AS n FROM deliveries WHERE status = 'processed'")
            .fetch_one(store.pool())
            .await
            .unwrap()
            .get("n");
    assert_eq!(processed, 200);
    for process in [intake, worker_a, worker_b] {
        assert_eq!(process.terminate().await.code(), Some(0));
    }
}

/// Each thread of process `pid`: its name and nice value.
fn threads_of(pid: u32) -> Vec<(String, i32)> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the process's threads");
    tasks
        .filter_map(|task| {
            let stat = std::fs::read_to_string(task.ok()?.path().join("stat")).ok()?;
            let (head, rest) = stat.rsplit_once(')')?;
            let name = head.split_once('(')?.1.to_owned();
            // Fields from the third (state) on; nice is the nineteenth.
            let nice = rest.split_whitespace().nth(16)?.parse().ok()?;
            Some((name, nice))
        })
        .collect()
}

/// The default process's workers run below its intake's CPU priority
/// (decision 195): on a busy machine the kernel answers GitHub first. A
/// process that only takes deliveries has no such threads.
#[tokio::test]
async fn the_workers_threads_run_below_intakes_priority() {
    let db = TestDb::new("work_nice").await;
    let server = CloserProcess::serve(&db.url, None, &[]).await;
    let threads = threads_of(server.child.id().expect("running"));
    let work: Vec<i32> = threads
        .iter()
        .filter(|(name, _)| name == closer::work_runtime::THREAD_NAME)
        .map(|(_, nice)| *nice)
        .collect();
    let intake: Vec<i32> = threads
        .iter()
        .filter(|(name, _)| name.starts_with("tokio-r"))
        .map(|(_, nice)| *nice)
        .collect();
    assert!(!work.is_empty() && !intake.is_empty(), "{threads:?}");
    // Relative to intake's: the tests may themselves run niced.
    let lowered = (intake[0] + closer::work_runtime::WORK_NICE).min(19);
    assert!(intake.iter().all(|n| *n == intake[0]), "{threads:?}");
    assert!(work.iter().all(|n| *n == lowered), "{threads:?}");
    assert_eq!(server.terminate().await.code(), Some(0));

    let intake_only = CloserProcess::serve(&db.url, None, &["--role", "intake"]).await;
    let threads = threads_of(intake_only.child.id().expect("running"));
    assert!(
        threads
            .iter()
            .all(|(name, _)| name != closer::work_runtime::THREAD_NAME),
        "{threads:?}"
    );
    assert_eq!(intake_only.terminate().await.code(), Some(0));
}
