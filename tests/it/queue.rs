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

/// One worker running `run` jobs with `runner`.
fn one_worker(
    store: &Store,
    runner: std::sync::Arc<dyn closer::worker::JobRunner>,
    name: &str,
) -> Workers {
    let settings = closer::worker::WorkerSettings {
        poll_interval: Duration::from_millis(20),
        ..closer::worker::WorkerSettings::default()
    };
    workers(store, runner, name, 1, settings)
}

/// What a test holds of its workers: what they settle, the switch that
/// stops them, and their tasks.
type Workers = (
    tokio::sync::broadcast::Receiver<closer::worker::JobSettled>,
    tokio::sync::watch::Sender<bool>,
    Vec<tokio::task::JoinHandle<()>>,
);

/// `count` workers running `run` jobs with `runner`.
fn workers(
    store: &Store,
    runner: std::sync::Arc<dyn closer::worker::JobRunner>,
    name: &str,
    count: usize,
    settings: closer::worker::WorkerSettings,
) -> Workers {
    let runners = std::collections::HashMap::from([(JobKind::Run, runner)]);
    let ready = std::sync::Arc::new(tokio::sync::Notify::new());
    let pool = closer::worker::WorkerPool::new(store.clone(), runners, settings, ready);
    let settled = pool.subscribe();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    (settled, stop, pool.spawn(count, name, stop_rx))
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

    // One worker: the job after the panic must be run by the same one.
    let (mut settled, stop, workers) = one_worker(&store, Arc::new(Panicky), "panic-test");
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

/// Postpones each job once by `POSTPONE`, then completes it.
struct PostponedOnce(std::sync::atomic::AtomicUsize);

const POSTPONE: Duration = Duration::from_millis(300);

impl closer::worker::JobRunner for PostponedOnce {
    fn run<'a>(&'a self, _job: &'a jobs::LeasedJob) -> closer::worker::JobFuture<'a> {
        Box::pin(async move {
            match self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) {
                0 => Err(closer::worker::JobError::Postpone(POSTPONE)),
                _ => Ok(()),
            }
        })
    }
}

async fn next_settled(
    settled: &mut tokio::sync::broadcast::Receiver<closer::worker::JobSettled>,
) -> closer::worker::JobSettled {
    tokio::time::timeout(Duration::from_secs(10), settled.recv())
        .await
        .expect("settled in time")
        .expect("settled")
}

/// A job postponed (a limit it shares is booked) is queued again for the
/// time it named, its attempt given back and no error recorded: a job with
/// a single attempt still runs to the end.
#[tokio::test]
async fn a_postponed_job_comes_back_at_its_time_without_spending_an_attempt() {
    use closer::worker::Settled;
    use std::sync::Arc;

    let db = TestDb::new("queue_postpone").await;
    let store = db.store().await;
    let now = store.now_ms();
    let id = jobs::enqueue(
        store.pool(),
        &NewJob {
            run_at: now,
            ..job("k-later", 1)
        },
        now,
    )
    .await
    .unwrap();
    let runner = Arc::new(PostponedOnce(std::sync::atomic::AtomicUsize::new(0)));
    let (mut settled, stop, workers) = one_worker(&store, runner.clone(), "postpone-test");
    let first = next_settled(&mut settled).await;
    assert_eq!((first.id, first.outcome), (id, Settled::Postponed));
    let row = jobs::get(store.pool(), id).await.unwrap().unwrap();
    assert_eq!(
        (row.state, row.attempts, row.last_error),
        (JobState::Queued, 0, None)
    );
    assert!(
        row.run_at >= now + POSTPONE.as_millis() as i64,
        "{} vs {now}",
        row.run_at
    );
    let second = next_settled(&mut settled).await;
    assert_eq!((second.id, second.outcome), (id, Settled::Done));
    assert!(store.now_ms() >= row.run_at, "not run before its time");
    let _ = stop.send(true);
    for w in workers {
        w.await.unwrap();
    }
}

/// Runs `run` jobs once the test says so, counting how often it was asked.
struct Gated {
    started: tokio::sync::mpsc::UnboundedSender<()>,
    go: std::sync::Arc<tokio::sync::Notify>,
    runs: std::sync::atomic::AtomicUsize,
}

impl closer::worker::JobRunner for Gated {
    fn run<'a>(&'a self, _job: &'a jobs::LeasedJob) -> closer::worker::JobFuture<'a> {
        Box::pin(async move {
            self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = self.started.send(());
            self.go.notified().await;
            Ok(())
        })
    }
}

/// One job run by one worker on SQLite, finishing while another
/// connection holds the write lock: taken once the job runs, kept until
/// `release` is sent or `hold` has passed.
struct FinishedUnderLock {
    store: Store,
    id: i64,
    runner: std::sync::Arc<Gated>,
    settled: tokio::sync::broadcast::Receiver<closer::worker::JobSettled>,
    stop: tokio::sync::watch::Sender<bool>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    release: std::sync::mpsc::Sender<()>,
    locker: std::thread::JoinHandle<()>,
}

/// `None`, saying so, on PostgreSQL: a lock there makes writes wait
/// rather than fail.
async fn finish_under_lock(db: &TestDb, key: &str, hold: Duration) -> Option<FinishedUnderLock> {
    if db.backend != Backend::Sqlite {
        eprintln!("SKIPPED: SQLite's busy timeout story; PostgreSQL waits on a lock instead");
        return None;
    }
    let store = db.store().await;
    let now = store.now_ms();
    let mut one = job(key, 5);
    one.run_at = now;
    let id = jobs::enqueue(store.pool(), &one, now).await.unwrap();
    let (started, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
    let go = std::sync::Arc::new(tokio::sync::Notify::new());
    let runner = std::sync::Arc::new(Gated {
        started,
        go: go.clone(),
        runs: 0.into(),
    });
    let (settled, stop, workers) = one_worker(&store, runner.clone(), key);
    started_rx.recv().await.expect("the job runs");

    let file = store.sqlite_file().expect("a SQLite file").to_owned();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let locker = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(file).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        go.notify_one();
        let _ = released.recv_timeout(hold);
        conn.execute_batch("ROLLBACK").unwrap();
    });
    Some(FinishedUnderLock {
        store,
        id,
        runner,
        settled,
        stop,
        workers,
        release,
        locker,
    })
}

/// A job finished while another connection holds SQLite's write lock past
/// the busy timeout: the first try to record it fails ("database is
/// locked"), a later one lands, and the job is done, run once, instead of
/// staying leased until its lease expires and running again.
#[tokio::test]
async fn an_outcome_the_locked_database_refuses_is_recorded_once_the_lock_goes() {
    let db = TestDb::new("queue_settle_locked").await;
    // Past the pool's busy timeout (10 s), then the lock goes.
    let Some(mut f) = finish_under_lock(&db, "k-locked", Duration::from_secs(11)).await else {
        return;
    };
    let s = tokio::time::timeout(Duration::from_secs(60), f.settled.recv())
        .await
        .expect("the outcome is recorded once the lock goes")
        .expect("settled");
    f.locker.join().unwrap();
    assert_eq!((s.id, s.outcome), (f.id, closer::worker::Settled::Done));
    let done = jobs::get(f.store.pool(), f.id).await.unwrap().unwrap();
    assert_eq!(done.state, JobState::Done);
    assert_eq!(f.runner.runs.load(std::sync::atomic::Ordering::SeqCst), 1);
    let _ = f.stop.send(true);
    for w in f.workers {
        w.await.unwrap();
    }
}

/// The same refusal during shutdown: the worker stops after the one try
/// (its busy timeout, 10 s) instead of trying again while the lock lasts,
/// so the process still exits within its grace; the job stays leased, for
/// its lease to hand on.
#[tokio::test]
async fn at_shutdown_a_refused_outcome_is_not_tried_again() {
    let db = TestDb::new("queue_settle_shutdown").await;
    // 40 s: past four tries' worth of waiting.
    let Some(f) = finish_under_lock(&db, "k-shutdown", Duration::from_secs(40)).await else {
        return;
    };
    let _ = f.stop.send(true);
    let stopping = std::time::Instant::now();
    for w in f.workers {
        tokio::time::timeout(Duration::from_secs(25), w)
            .await
            .expect("the worker stopped after one try, not with the lock")
            .unwrap();
    }
    let took = stopping.elapsed();
    f.release.send(()).unwrap();
    f.locker.join().unwrap();
    assert!(took < Duration::from_secs(20), "{took:?}");
    let left = jobs::get(f.store.pool(), f.id).await.unwrap().unwrap();
    assert_eq!(left.state, JobState::Leased);
}

/// Runs `run` jobs, the first time holding its thread without yielding for
/// `hold`, as a fork or a large removal on a loaded machine can.
struct HoldsItsThread {
    hold: Duration,
    runs: std::sync::atomic::AtomicUsize,
}

impl closer::worker::JobRunner for HoldsItsThread {
    fn run<'a>(&'a self, _job: &'a jobs::LeasedJob) -> closer::worker::JobFuture<'a> {
        Box::pin(async move {
            if self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                std::thread::sleep(self.hold);
            }
            Ok(())
        })
    }
}

/// The heartbeat is not the runner's to starve: a runner that holds its
/// thread for two and a half leases keeps its job, and the other worker, polling
/// all along, never runs it a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_runner_holding_its_thread_past_its_lease_keeps_the_job() {
    let db = TestDb::new("queue_hold").await;
    let store = db.store().await;
    let now = store.now_ms();
    let mut one = job("k-hold", 5);
    one.run_at = now;
    let id = jobs::enqueue(store.pool(), &one, now).await.unwrap();
    let runner = std::sync::Arc::new(HoldsItsThread {
        hold: Duration::from_secs(5),
        runs: Default::default(),
    });
    let settings = closer::worker::WorkerSettings {
        lease: Duration::from_secs(2),
        poll_interval: Duration::from_millis(20),
        ..closer::worker::WorkerSettings::default()
    };
    let (mut settled, stop, workers) = workers(&store, runner.clone(), "hold", 2, settings);
    let first = tokio::time::timeout(Duration::from_secs(30), settled.recv())
        .await
        .expect("settled in time")
        .expect("settled");
    assert_eq!(
        (first.id, first.outcome),
        (id, closer::worker::Settled::Done)
    );
    // Time for the other worker to take the job, had its lease run out.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        runner.runs.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the job was run again while its first runner held its thread"
    );
    let _ = stop.send(true);
    for w in workers {
        w.await.unwrap();
    }
}

/// Runs until dropped, and says when it was.
struct RunsUntilDropped {
    dropped: std::sync::Arc<tokio::sync::Notify>,
    started: std::sync::Arc<tokio::sync::Notify>,
}

/// Notifies when dropped.
struct OnDrop(std::sync::Arc<tokio::sync::Notify>);

impl Drop for OnDrop {
    fn drop(&mut self) {
        self.0.notify_one();
    }
}

impl closer::worker::JobRunner for RunsUntilDropped {
    fn run<'a>(&'a self, _job: &'a jobs::LeasedJob) -> closer::worker::JobFuture<'a> {
        let guard = OnDrop(self.dropped.clone());
        self.started.notify_one();
        Box::pin(async move {
            let _guard = guard;
            tokio::time::sleep(Duration::from_secs(600)).await;
            Ok(())
        })
    }
}

/// The database refuses every heartbeat (it is unreachable, say, from this
/// replica only): the worker gives the job up before its lease runs out,
/// so another replica that claims it then never runs it at the same time.
/// Before, a failed heartbeat was only logged and the step ran on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_whose_heartbeats_fail_gives_the_job_up_before_its_lease_runs_out() {
    let db = TestDb::new("queue_no_beat").await;
    let store = db.store().await;
    if store.backend() != closer::store::Backend::Sqlite {
        eprintln!("SKIPPED on PostgreSQL: the refusal is a SQLite trigger");
        return;
    }
    // Heartbeats (a leased job's lease moved on) fail; claims do not.
    sqlx::query(
        "CREATE TRIGGER no_heartbeat BEFORE UPDATE OF lease_expires_at ON jobs \
         WHEN OLD.state = 'leased' AND NEW.state = 'leased' \
         BEGIN SELECT RAISE(ABORT, 'the database is unreachable'); END",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let now = store.now_ms();
    let mut one = job("k-no-beat", 5);
    one.run_at = now;
    jobs::enqueue(store.pool(), &one, now).await.unwrap();
    let runner = std::sync::Arc::new(RunsUntilDropped {
        dropped: Default::default(),
        started: Default::default(),
    });
    let lease = Duration::from_secs(3);
    let settings = closer::worker::WorkerSettings {
        lease,
        poll_interval: Duration::from_millis(20),
        ..closer::worker::WorkerSettings::default()
    };
    let (_settled, stop, workers) = workers(&store, runner.clone(), "no-beat", 1, settings);
    runner.started.notified().await;
    let started = std::time::Instant::now();
    tokio::time::timeout(lease, runner.dropped.notified())
        .await
        .expect("the job was given up within its lease");
    assert!(started.elapsed() < lease, "{:?}", started.elapsed());
    let _ = stop.send(true);
    for w in workers {
        w.await.unwrap();
    }
}

/// Reconciliation on several replicas may queue a run's missing step at
/// the same moment: `enqueue_unless_live` adds one job per key however
/// many ask at once (here 8 at a time over the pool's connections, for 20
/// keys), and none while one is queued or leased; a finished job does not
/// count.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_step_queued_unless_live_is_queued_once_however_many_ask_at_once() {
    let (_db, _clock, store) = setup("q_unless_live").await;
    for k in 0..20 {
        let key = format!("run:r{k}");
        let mut asks = tokio::task::JoinSet::new();
        for _ in 0..8 {
            let (store, job) = (store.clone(), job(&key, 3));
            asks.spawn(async move {
                jobs::enqueue_unless_live(store.pool(), store.backend(), &job, T0)
                    .await
                    .unwrap()
            });
        }
        let added = asks.join_all().await.into_iter().filter(|a| *a).count();
        assert_eq!(added, 1, "key {key}");
    }
    let leased = claim(&store, "w1").await.expect("a job");
    let same = job(&leased.key, 3);
    let ask = || jobs::enqueue_unless_live(store.pool(), store.backend(), &same, T0);
    assert!(!ask().await.unwrap(), "one is leased");
    assert!(
        jobs::complete(store.pool(), leased.id, "w1", T0)
            .await
            .unwrap()
    );
    assert!(ask().await.unwrap(), "the leased one finished");
}

/// The deliveries of one issue are acted on in the order they came: one
/// waiting out its backoff holds back the newer ones of the same key
/// (before, an `unlabeled` could be acted on before the `labeled` that
/// came first). Another key's deliveries, and a run's steps, are not held.
#[tokio::test]
async fn a_delivery_in_backoff_holds_back_the_newer_ones_of_its_thread() {
    let (_db, clock, store) = setup("q_fifo").await;
    let delivery = |key: &str| NewJob {
        kind: JobKind::Delivery,
        ..job(key, 3)
    };
    jobs::enqueue(store.pool(), &delivery("thread:o/r#1"), T0)
        .await
        .unwrap();
    jobs::enqueue(store.pool(), &delivery("thread:o/r#1"), T0)
        .await
        .unwrap();
    let first = claim(&store, "w").await.expect("the first delivery");
    let minute = Some(Duration::from_secs(60));
    jobs::fail(store.pool(), &first, "w", T0, "502", minute)
        .await
        .unwrap();
    assert!(claim(&store, "w").await.is_none(), "the newer one waits");

    // Other keys go on: another thread's delivery, and a run's steps.
    jobs::enqueue(store.pool(), &delivery("thread:o/r#2"), T0)
        .await
        .unwrap();
    let other = claim(&store, "w").await.expect("another thread");
    assert_eq!(other.key, "thread:o/r#2");
    assert!(
        jobs::complete(store.pool(), other.id, "w", T0)
            .await
            .unwrap()
    );
    let later_step = NewJob {
        run_at: T0 + 60_000,
        ..job("run:r1", 3)
    };
    jobs::enqueue(store.pool(), &later_step, T0).await.unwrap();
    jobs::enqueue(store.pool(), &job("run:r1", 3), T0)
        .await
        .unwrap();
    let step = claim(&store, "w")
        .await
        .expect("a step queued behind a later one");
    assert_eq!(step.key, "run:r1");
    assert!(
        jobs::complete(store.pool(), step.id, "w", T0)
            .await
            .unwrap()
    );

    clock.advance(Duration::from_secs(60));
    let again = claim(&store, "w").await.expect("due again");
    assert_eq!(again.id, first.id, "the first delivery, first");
}

/// A delivery leased before an older one of its key was queued again (a
/// dead delivery requeued by hand, or on PostgreSQL an id committed out of
/// order) keeps its turn when its lease runs out: the two never wait for
/// each other for ever.
#[tokio::test]
async fn a_delivery_whose_lease_ran_out_is_not_held_back_by_an_older_one() {
    let (_db, clock, store) = setup("q_fifo_lease").await;
    let delivery = NewJob {
        kind: JobKind::Delivery,
        ..job("thread:o/r#1", 3)
    };
    let older = jobs::enqueue(store.pool(), &delivery, T0).await.unwrap();
    let newer = jobs::enqueue(store.pool(), &delivery, T0).await.unwrap();
    // The newer one was leased by a worker that died; the older waits.
    sqlx::query(
        "UPDATE jobs SET state = 'leased', lease_owner = 'gone', lease_expires_at = $1, \
         attempts = 1 WHERE id = $2",
    )
    .bind(T0 + 1_000)
    .bind(newer)
    .execute(store.pool())
    .await
    .unwrap();
    assert!(claim(&store, "w").await.is_none(), "the lease still holds");
    clock.advance(Duration::from_secs(2));
    let first = claim(&store, "w")
        .await
        .expect("the expired lease is taken again");
    assert_eq!(first.id, newer);
    assert!(
        jobs::complete(store.pool(), first.id, "w", store.now_ms())
            .await
            .unwrap()
    );
    let second = claim(&store, "w").await.expect("then the older one");
    assert_eq!(second.id, older);
}

/// The oldest runnable job goes first, whether it is queued or its lease
/// ran out: the claim finds one candidate of each and takes the older.
#[tokio::test]
async fn the_oldest_runnable_job_goes_first_queued_or_expired() {
    let (_db, clock, store) = setup("q_oldest").await;
    let at = |key: &str, run_at: i64| NewJob {
        run_at,
        ..job(key, 3)
    };
    let expired = jobs::enqueue(store.pool(), &at("a", T0), T0).await.unwrap();
    claim(&store, "gone")
        .await
        .expect("leased by a worker that dies");
    let queued_later = jobs::enqueue(store.pool(), &at("b", T0 + 1), T0)
        .await
        .unwrap();
    clock.advance(LEASE + Duration::from_secs(1));
    let queued_earlier = jobs::enqueue(store.pool(), &at("c", T0 - 1), T0)
        .await
        .unwrap();

    let mut order = Vec::new();
    while let Some(leased) = claim(&store, "w").await {
        order.push(leased.id);
    }
    assert_eq!(order, [queued_earlier, expired, queued_later]);
}

/// A claim walks the claimable index in order and stops at the first job
/// that may run, instead of collecting and sorting every runnable job
/// (0.3 s per claim behind 100,000 jobs: docs/benchmarks.md, run 11).
/// SQLite's plan for the statement as shipped; PostgreSQL's depends on its
/// statistics, and run 11 measures both.
#[tokio::test]
async fn a_claim_walks_the_queue_in_order_instead_of_sorting_it() {
    let (_db, _clock, store) = setup("q_plan").await;
    if store.backend() != Backend::Sqlite {
        eprintln!("SKIPPED: the plan checked is SQLite's");
        return;
    }
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "EXPLAIN QUERY PLAN {}",
        jobs::claim_statement(Backend::Sqlite)
    )))
    .bind("w")
    .bind(T0)
    .bind(T0)
    .fetch_all(store.pool())
    .await
    .unwrap();
    let plan: Vec<String> = rows
        .iter()
        .map(|row| sqlx::Row::try_get::<String, _>(row, "detail").unwrap())
        .collect();
    let has = |step: &str| plan.iter().any(|line| line.contains(step));
    assert!(
        has("SEARCH j USING INDEX jobs_claimable (state=? AND run_at<?)"),
        "the queued jobs are walked in order: {plan:#?}"
    );
    assert!(
        !has("MULTI-INDEX OR") && !has("SCAN j"),
        "no runnable job is collected to be sorted: {plan:#?}"
    );
}
