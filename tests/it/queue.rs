//! The job queue's guarantees, on a real database with a manual clock.

use std::time::Duration;

use closer::model::{JobKind, JobState};
use closer::store::jobs::{self, FailOutcome, NewJob};
use closer::store::{Backend, Store};

use crate::support::db::{TestDb, manual_clock};

const LEASE: Duration = Duration::from_secs(60);
const T0: i64 = 1_700_000_000_000;

fn job(key: &str, max_attempts: i64) -> NewJob {
    NewJob {
        kind: JobKind::Run,
        key: key.to_owned(),
        payload: "{}".to_owned(),
        max_attempts,
        run_at: T0,
    }
}

async fn setup(name: &str) -> (TestDb, std::sync::Arc<closer::clock::ManualClock>, Store) {
    let db = TestDb::new(name).await;
    let (clock, shared) = manual_clock(T0);
    let store = db.store_with_clock(shared).await;
    (db, clock, store)
}

async fn claim(store: &Store, owner: &str) -> Option<jobs::LeasedJob> {
    jobs::claim(store.pool(), store.backend(), owner, store.now_ms(), LEASE)
        .await
        .unwrap()
}

#[tokio::test]
async fn claim_heartbeat_complete() {
    let (_db, clock, store) = setup("q_basic").await;
    let id = jobs::enqueue(store.pool(), &job("k", 3), T0).await.unwrap();
    let leased = claim(&store, "w1").await.expect("a job");
    assert_eq!((leased.id, leased.attempts), (id, 1));
    assert_eq!(leased.lease_expires_at, T0 + 60_000);
    assert!(
        claim(&store, "w2").await.is_none(),
        "leased jobs are not claimable"
    );

    clock.advance(Duration::from_secs(50));
    assert!(
        jobs::heartbeat(store.pool(), id, "w1", store.now_ms(), LEASE)
            .await
            .unwrap()
    );
    assert!(
        !jobs::heartbeat(store.pool(), id, "w2", store.now_ms(), LEASE)
            .await
            .unwrap()
    );
    clock.advance(Duration::from_secs(50));
    assert!(
        claim(&store, "w2").await.is_none(),
        "the heartbeat extended the lease"
    );

    assert!(
        jobs::complete(store.pool(), id, "w1", store.now_ms())
            .await
            .unwrap()
    );
    let row = jobs::get(store.pool(), id).await.unwrap().unwrap();
    assert_eq!(row.state, JobState::Done);
    assert!(claim(&store, "w2").await.is_none());
}

#[tokio::test]
async fn an_expired_lease_is_claimed_again_and_the_old_owner_loses_it() {
    let (_db, clock, store) = setup("q_expiry").await;
    let id = jobs::enqueue(store.pool(), &job("k", 3), T0).await.unwrap();
    claim(&store, "dead-worker").await.expect("first claim");
    clock.advance(LEASE + Duration::from_millis(1));
    let again = claim(&store, "w2")
        .await
        .expect("expired lease is claimable");
    assert_eq!((again.id, again.attempts), (id, 2));
    assert!(
        !jobs::heartbeat(store.pool(), id, "dead-worker", store.now_ms(), LEASE)
            .await
            .unwrap()
    );
    assert!(
        !jobs::complete(store.pool(), id, "dead-worker", store.now_ms())
            .await
            .unwrap()
    );
    assert!(
        jobs::complete(store.pool(), id, "w2", store.now_ms())
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn a_failed_job_is_retried_after_its_backoff_then_dead_lettered() {
    let (_db, clock, store) = setup("q_retry").await;
    let id = jobs::enqueue(store.pool(), &job("k", 2), T0).await.unwrap();
    let first = claim(&store, "w").await.unwrap();
    let outcome = jobs::fail(
        store.pool(),
        &first,
        "w",
        store.now_ms(),
        "boom 1",
        Some(Duration::from_secs(10)),
    )
    .await
    .unwrap();
    assert_eq!(
        outcome,
        FailOutcome::Retrying {
            run_at: T0 + 10_000
        }
    );
    assert!(claim(&store, "w").await.is_none(), "not before the backoff");
    clock.advance(Duration::from_secs(10));
    let second = claim(&store, "w").await.expect("due again");
    assert_eq!(second.attempts, 2);
    let outcome = jobs::fail(
        store.pool(),
        &second,
        "w",
        store.now_ms(),
        "boom 2",
        Some(Duration::from_secs(10)),
    )
    .await
    .unwrap();
    assert_eq!(outcome, FailOutcome::Dead, "out of attempts");
    let row = jobs::get(store.pool(), id).await.unwrap().unwrap();
    assert_eq!(row.state, JobState::Dead);
    assert_eq!(row.last_error.as_deref(), Some("boom 2"));
    clock.advance(Duration::from_secs(3600));
    assert!(claim(&store, "w").await.is_none(), "dead jobs stay dead");
}

/// A job whose dependency is down (GitHub, the LLM) is deferred: it keeps
/// its failures left however long the outage, so it is never dead-lettered
/// by one; past `OUTAGE_PATIENCE` a deferral counts like any failure. The
/// control: the same failures recorded as ordinary ones kill it.
#[tokio::test]
async fn a_deferred_job_keeps_its_attempts_until_the_outage_outlasts_a_day() {
    let (_db, clock, store) = setup("q_defer").await;
    let id = jobs::enqueue(store.pool(), &job("k", 2), T0).await.unwrap();
    let control = jobs::enqueue(store.pool(), &job("c", 2), T0).await.unwrap();
    let minute = Duration::from_secs(60);
    // Twenty minutes of outage, both jobs failing every minute.
    for _ in 0..20 {
        while let Some(leased) = claim(&store, "w").await {
            let now = store.now_ms();
            if leased.id == id {
                let deferred = jobs::defer(store.pool(), &leased, "w", now, "502", minute);
                assert!(deferred.await.unwrap().is_some());
            } else {
                jobs::fail(store.pool(), &leased, "w", now, "502", Some(minute))
                    .await
                    .unwrap();
            }
        }
        clock.advance(minute);
    }
    let deferred = jobs::get(store.pool(), id).await.unwrap().unwrap();
    assert_eq!(deferred.state, JobState::Queued, "{deferred:?}");
    assert_eq!(deferred.attempts, 20, "{deferred:?}");
    assert_eq!(
        deferred.max_attempts - deferred.attempts,
        2,
        "no failure counted: both attempts left"
    );
    let dead = jobs::get(store.pool(), control).await.unwrap().unwrap();
    assert_eq!(
        dead.state,
        JobState::Dead,
        "the control: counted failures kill"
    );

    // A day after it was queued, the outage is no longer waited out.
    clock.advance(jobs::OUTAGE_PATIENCE);
    let leased = claim(&store, "w").await.expect("due");
    let outcome = jobs::defer(store.pool(), &leased, "w", store.now_ms(), "502", minute)
        .await
        .unwrap();
    assert_eq!(outcome, None, "past the patience the caller fails it");
}

#[tokio::test]
async fn a_permanent_failure_is_dead_at_once() {
    let (_db, _clock, store) = setup("q_permanent").await;
    let id = jobs::enqueue(store.pool(), &job("k", 5), T0).await.unwrap();
    let leased = claim(&store, "w").await.unwrap();
    let outcome = jobs::fail(store.pool(), &leased, "w", store.now_ms(), "no", None)
        .await
        .unwrap();
    assert_eq!(outcome, FailOutcome::Dead);
    assert_eq!(
        jobs::get(store.pool(), id).await.unwrap().unwrap().attempts,
        1
    );
}

#[tokio::test]
async fn a_lease_that_expires_on_the_last_attempt_is_dead_lettered() {
    let (_db, clock, store) = setup("q_reap").await;
    let id = jobs::enqueue(store.pool(), &job("k", 1), T0).await.unwrap();
    claim(&store, "dies").await.unwrap();
    clock.advance(LEASE * 2);
    assert!(claim(&store, "w").await.is_none());
    let row = jobs::get(store.pool(), id).await.unwrap().unwrap();
    assert_eq!(row.state, JobState::Dead);
    assert!(row.last_error.unwrap().contains("lease expired"));
}

#[tokio::test]
async fn release_gives_the_job_back_without_counting_the_attempt() {
    let (_db, _clock, store) = setup("q_release").await;
    let id = jobs::enqueue(store.pool(), &job("k", 1), T0).await.unwrap();
    claim(&store, "w").await.unwrap();
    assert!(
        jobs::release(store.pool(), id, "w", store.now_ms())
            .await
            .unwrap()
    );
    let again = claim(&store, "w2")
        .await
        .expect("released jobs are claimable");
    assert_eq!(again.attempts, 1);
}

#[tokio::test]
async fn at_most_one_job_per_key_is_leased() {
    let (_db, _clock, store) = setup("q_key").await;
    let a1 = jobs::enqueue(store.pool(), &job("run-a", 3), T0)
        .await
        .unwrap();
    let a2 = jobs::enqueue(store.pool(), &job("run-a", 3), T0)
        .await
        .unwrap();
    let b1 = jobs::enqueue(store.pool(), &job("run-b", 3), T0)
        .await
        .unwrap();
    let first = claim(&store, "w1").await.unwrap();
    let second = claim(&store, "w2").await.unwrap();
    assert_eq!(first.id, a1);
    assert_eq!(second.id, b1, "run-a's second job waits for its first");
    assert!(claim(&store, "w3").await.is_none());
    jobs::complete(store.pool(), a1, "w1", store.now_ms())
        .await
        .unwrap();
    assert_eq!(claim(&store, "w3").await.unwrap().id, a2);
}

#[tokio::test]
async fn concurrent_workers_never_hold_the_same_job() {
    let db = TestDb::new("q_concurrent").await;
    let store = db.store().await;
    let total = 400;
    for i in 0..total {
        let mut j = job(&format!("key-{}", i % 50), 3);
        j.run_at = 0;
        jobs::enqueue(store.pool(), &j, 0).await.unwrap();
    }
    let mut tasks = Vec::new();
    for w in 0..8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let owner = format!("w{w}");
            let mut mine = Vec::new();
            let mut idle = 0;
            while idle < 50 {
                let now = store.now_ms();
                match jobs::claim(store.pool(), store.backend(), &owner, now, LEASE)
                    .await
                    .unwrap()
                {
                    Some(job) => {
                        idle = 0;
                        // Per-key exclusivity, checked while we hold the lease.
                        let others = leased_with_key(&store, &job.key).await;
                        assert_eq!(others, 1, "two leased jobs for key {}", job.key);
                        mine.push(job.id);
                        assert!(
                            jobs::complete(store.pool(), job.id, &owner, store.now_ms())
                                .await
                                .unwrap()
                        );
                    }
                    None => {
                        idle += 1;
                        tokio::task::yield_now().await;
                    }
                }
            }
            mine
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.unwrap());
    }
    let claimed = all.len();
    all.sort();
    all.dedup();
    assert_eq!(all.len(), claimed, "a job was claimed twice");
    assert_eq!(claimed, total, "every job was claimed");
    if store.backend() == Backend::Postgres {
        eprintln!("postgres: {total} jobs, 8 workers, 0 double claims");
    }
}

async fn leased_with_key(store: &Store, key: &str) -> i64 {
    use sqlx::Row;
    sqlx::query("SELECT COUNT(*) AS n FROM jobs WHERE job_key = $1 AND state = 'leased'")
        .bind(key)
        .fetch_one(store.pool())
        .await
        .unwrap()
        .get("n")
}

#[tokio::test]
async fn backoff_grows_exponentially_within_its_jitter_and_cap() {
    let backoff = jobs::Backoff {
        base: Duration::from_secs(2),
        max: Duration::from_secs(60),
    };
    assert_eq!(backoff.delay(1, 0.5), Duration::from_secs(2));
    assert_eq!(backoff.delay(3, 0.5), Duration::from_secs(8));
    assert_eq!(backoff.delay(20, 0.5), Duration::from_secs(60));
    assert_eq!(backoff.delay(1, 0.0), Duration::from_millis(1600));
    assert_eq!(backoff.delay(1, 1.0), Duration::from_millis(2400));
}

/// Runs `run` jobs: panics on the payload `"boom"`, succeeds otherwise.
struct Panicky;

impl closer::worker::JobRunner for Panicky {
    fn run<'a>(&'a self, job: &'a jobs::LeasedJob) -> closer::worker::JobFuture<'a> {
        Box::pin(async move {
            if job.payload == "boom" {
                panic!("bad value in the job");
            }
            Ok(())
        })
    }
}

/// A runner that panics fails its job for good, with the message, and the
/// worker goes on with the next job.
#[tokio::test]
async fn a_panicking_runner_fails_its_job_and_the_worker_goes_on() {
    use std::collections::HashMap;
    use std::sync::Arc;

    let db = TestDb::new("queue_panic").await;
    let store = db.store().await;
    let now = store.now_ms();
    let mut boom = job("k-boom", 5);
    boom.payload = "boom".into();
    boom.run_at = now;
    let mut fine = job("k-fine", 5);
    fine.run_at = now;
    let boom_id = jobs::enqueue(store.pool(), &boom, now).await.unwrap();
    let fine_id = jobs::enqueue(store.pool(), &fine, now).await.unwrap();

    let runners: HashMap<JobKind, Arc<dyn closer::worker::JobRunner>> = HashMap::from([(
        JobKind::Run,
        Arc::new(Panicky) as Arc<dyn closer::worker::JobRunner>,
    )]);
    let settings = closer::worker::WorkerSettings {
        poll_interval: Duration::from_millis(20),
        ..closer::worker::WorkerSettings::default()
    };
    let ready = Arc::new(tokio::sync::Notify::new());
    let pool = closer::worker::WorkerPool::new(store.clone(), runners, settings, ready);
    let mut settled = pool.subscribe();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    // One worker: the job after the panic must be run by the same one.
    let workers = pool.spawn(1, "panic-test", stop_rx);
    let mut seen = HashMap::new();
    while seen.len() < 2 {
        let s = tokio::time::timeout(Duration::from_secs(10), settled.recv())
            .await
            .expect("settled in time")
            .expect("settled");
        seen.insert(s.id, s.outcome);
    }
    assert_eq!(seen[&boom_id], closer::worker::Settled::Dead);
    assert_eq!(seen[&fine_id], closer::worker::Settled::Done);
    let dead = jobs::get(store.pool(), boom_id).await.unwrap().unwrap();
    assert_eq!(dead.state, JobState::Dead);
    let error = dead.last_error.unwrap_or_default();
    assert!(error.contains("panicked: bad value in the job"), "{error}");
    let _ = stop.send(true);
    for w in workers {
        w.await.expect("the worker ended normally, not by a panic");
    }
}
