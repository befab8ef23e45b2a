//! Workers: claim a job, run its runner while a heartbeat (a task of its
//! own) keeps the lease, then complete it or record the failure (retry with
//! backoff, dead after the last attempt). Any number of workers, in any
//! number of processes, share one queue; the database decides who holds
//! what.
//!
//! A worker never holds a job it lost: when a heartbeat finds the lease gone
//! (it expired and another worker took it), the runner is abandoned. A
//! runner that panics fails its job permanently, with the message recorded;
//! the worker goes on with the next job. An outcome the database refuses
//! to record is tried again a few times before the lease is left to expire.
//! A job deferred because something it depends on is down (GitHub, the LLM)
//! waits with the usual backoff but keeps its attempts: an outage the job
//! waits out never dead-letters it (for up to [`jobs::OUTAGE_PATIENCE`]
//! after it was queued). A job postponed because a limit it shares is
//! booked is queued again for the time it names, no attempt counted.
//! A worker that dies all the same (a panic outside the job's guard, e.g.
//! while a runner's future is dropped) is restarted by its supervisor;
//! [`WorkerHealth`] counts the live ones for `/readyz`.

pub mod delivery;

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, broadcast, watch};

use crate::model::{JobKind, Named};
use crate::panic::Caught;
use crate::store::jobs::{self, Backoff, FailOutcome, LeasedJob};
use crate::store::{Store, StoreError};

/// How many times a worker tries to record a job's outcome before leaving
/// the job to its lease (fewer when a third of the lease runs out first).
const SETTLE_ATTEMPTS: u32 = 5;

/// The wait after the first failed try to record an outcome; it doubles.
const SETTLE_FIRST_WAIT: Duration = Duration::from_millis(250);

/// A task aborted when this handle is dropped: a worker's, when its
/// supervisor is; a job's heartbeat, when the job ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// How a runner failed.
#[derive(Debug, Clone, PartialEq)]
pub enum JobError {
    /// Worth another attempt, after the usual backoff.
    Retry(String),
    /// Worth another attempt, not before this long (e.g. a rate limit).
    RetryAfter(String, Duration),
    /// Will never succeed; dead-letter it now.
    Permanent(String),
    /// Something the job depends on is down (GitHub answers 5xx, the LLM
    /// is unreachable): try again after the usual backoff, at least this
    /// long, without counting the attempt against the job.
    Defer(String, Duration),
    /// Not a failure: a limit the job shares is booked (its installation's
    /// status-comment writes). Queued again to run after this long, its
    /// attempt not counted, with no backoff and no error recorded.
    Postpone(Duration),
}

/// The future a runner returns.
pub type JobFuture<'a> = Pin<Box<dyn Future<Output = Result<(), JobError>> + Send + 'a>>;

/// Runs jobs of one kind.
pub trait JobRunner: Send + Sync {
    fn run<'a>(&'a self, job: &'a LeasedJob) -> JobFuture<'a>;
}

/// Settings shared by a process's workers.
#[derive(Clone)]
pub struct WorkerSettings {
    pub lease: Duration,
    pub backoff: Backoff,
    /// Longest idle wait before polling the queue again (jobs enqueued by
    /// other processes or becoming due after a backoff).
    pub poll_interval: Duration,
    /// How long shutdown waits for an in-flight job before giving its lease back.
    pub shutdown_grace: Duration,
    /// How long a dead worker's supervisor waits before starting it again.
    pub restart_delay: Duration,
}

impl Default for WorkerSettings {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(300),
            backoff: Backoff::default(),
            poll_interval: Duration::from_millis(500),
            shutdown_grace: Duration::from_secs(30),
            restart_delay: Duration::from_secs(1),
        }
    }
}

/// The permanent error of a job whose runner panicked, with the message.
fn panicked(message: String) -> JobError {
    tracing::error!(%message, "a job runner panicked");
    JobError::Permanent(format!("the job panicked: {message}"))
}

/// What became of a job a worker ran; broadcast to whoever listens (tests,
/// the dashboard) so they can wait for work instead of polling.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSettled {
    pub id: i64,
    pub kind: String,
    pub key: String,
    pub outcome: Settled,
}

/// How a worker let go of a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// Completed.
    Done,
    /// Failed; queued again after its backoff.
    Retry,
    /// Deferred (a dependency is down); queued again, the attempt not counted.
    Deferred,
    /// Postponed (a shared limit is booked); queued again for later, the
    /// attempt not counted.
    Postponed,
    /// Failed for the last time (or permanently).
    Dead,
    /// Another worker holds it now (our lease expired).
    LeaseLost,
    /// Given back unfinished at shutdown.
    Abandoned,
}

impl Settled {
    /// The metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            Settled::Done => "done",
            Settled::Retry => "retry",
            Settled::Deferred => "deferred",
            Settled::Postponed => "postponed",
            Settled::Dead => "dead",
            Settled::LeaseLost => "lease_lost",
            Settled::Abandoned => "abandoned",
        }
    }
}

/// How many of a process's workers run, against how many were started.
#[derive(Debug, Clone, Default)]
pub struct WorkerHealth {
    configured: Arc<AtomicUsize>,
    live: Arc<AtomicUsize>,
}

impl WorkerHealth {
    /// Workers this process was asked to run.
    pub fn configured(&self) -> usize {
        self.configured.load(Ordering::SeqCst)
    }

    /// Workers running now (a dead one waiting for its restart is not).
    pub fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }

    /// Every worker asked for is running.
    pub fn all_running(&self) -> bool {
        self.live() >= self.configured()
    }
}

/// A process's workers and their job runners.
#[derive(Clone)]
pub struct WorkerPool {
    store: Store,
    runners: Arc<HashMap<JobKind, Arc<dyn JobRunner>>>,
    settings: WorkerSettings,
    ready: Arc<Notify>,
    settled: broadcast::Sender<JobSettled>,
    health: WorkerHealth,
}

impl WorkerPool {
    pub fn new(
        store: Store,
        runners: HashMap<JobKind, Arc<dyn JobRunner>>,
        settings: WorkerSettings,
        ready: Arc<Notify>,
    ) -> Self {
        Self {
            store,
            runners: Arc::new(runners),
            settings,
            ready,
            settled: broadcast::channel(1024).0,
            health: WorkerHealth::default(),
        }
    }

    /// The live and configured worker counts, for `/readyz`.
    pub fn health(&self) -> WorkerHealth {
        self.health.clone()
    }

    /// Every job this pool settles from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<JobSettled> {
        self.settled.subscribe()
    }

    /// Starts `count` supervised workers; they stop when `shutdown` turns
    /// true, and each handle completes when its worker has stopped.
    pub fn spawn(
        &self,
        count: usize,
        name: &str,
        shutdown: watch::Receiver<bool>,
    ) -> Vec<tokio::task::JoinHandle<()>> {
        self.health.configured.fetch_add(count, Ordering::SeqCst);
        (0..count)
            .map(|i| {
                let pool = self.clone();
                let owner = format!("{name}/{i}");
                let shutdown = shutdown.clone();
                tokio::spawn(async move { pool.supervise_worker(owner, shutdown).await })
            })
            .collect()
    }

    /// Runs one worker, and starts it again (after `restart_delay`) each
    /// time it dies before shutdown.
    async fn supervise_worker(self, owner: String, mut shutdown: watch::Receiver<bool>) {
        loop {
            self.health.live.fetch_add(1, Ordering::SeqCst);
            let mut worker = AbortOnDrop(tokio::spawn(
                self.clone().run(owner.clone(), shutdown.clone()),
            ));
            let ended = (&mut worker.0).await;
            self.health.live.fetch_sub(1, Ordering::SeqCst);
            let Err(death) = ended else { return };
            metrics::counter!("closer_worker_restarts_total").increment(1);
            tracing::error!(%owner, error = %death, "a worker died; restarting it");
            tokio::select! {
                _ = tokio::time::sleep(self.settings.restart_delay) => {}
                _ = shutdown.wait_for(|stop| *stop) => return,
            }
            if *shutdown.borrow() {
                return;
            }
        }
    }

    async fn run(self, owner: String, mut shutdown: watch::Receiver<bool>) {
        tracing::debug!(%owner, "worker started");
        while !*shutdown.borrow() {
            match self.run_one(&owner, &mut shutdown).await {
                Ok(true) => continue,
                Ok(false) => {}
                Err(e) => tracing::error!(%owner, error = %e, "queue error"),
            }
            tokio::select! {
                _ = self.ready.notified() => {}
                _ = tokio::time::sleep(self.settings.poll_interval) => {}
                changed = shutdown.changed() => {
                    if changed.is_err() {
                        break; // the sender is gone: nobody can stop us later
                    }
                }
            }
        }
        tracing::debug!(%owner, "worker stopped");
    }

    /// Claims and runs one job; `Ok(false)` when there was none.
    pub async fn run_one(
        &self,
        owner: &str,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<bool, StoreError> {
        let store = &self.store;
        let now = store.now_ms();
        let Some(job) = jobs::claim(
            store.pool(),
            store.backend(),
            owner,
            now,
            self.settings.lease,
        )
        .await?
        else {
            return Ok(false);
        };
        let waited = (now - job.run_at).max(0) as f64 / 1000.0;
        metrics::histogram!("closer_job_wait_seconds", "kind" => job.kind.clone()).record(waited);
        let started = Instant::now();
        let runner = JobKind::parse(&job.kind).and_then(|kind| self.runners.get(&kind));
        let result = match runner {
            Some(runner) => self.supervise(runner.as_ref(), &job, owner, shutdown).await,
            None => Some(Err(JobError::Permanent(format!(
                "no runner for job kind {:?}",
                job.kind
            )))),
        };
        let outcome = match result {
            Some(result) => {
                self.settle_persistently(&job, owner, result, shutdown)
                    .await?
            }
            None => Settled::Abandoned,
        };
        metrics::histogram!("closer_job_duration_seconds", "kind" => job.kind.clone(), "outcome" => outcome.as_str())
            .record(started.elapsed().as_secs_f64());
        let _ = self.settled.send(JobSettled {
            id: job.id,
            kind: job.kind,
            key: job.key,
            outcome,
        });
        Ok(true)
    }

    /// Runs the runner while heartbeating. `None` when the job was given up
    /// (lease lost, or shutdown outlasted the grace period).
    async fn supervise(
        &self,
        runner: &dyn JobRunner,
        job: &LeasedJob,
        owner: &str,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Option<Result<(), JobError>> {
        // A panic in a runner is the job's failure, not the worker's end.
        let work = match std::panic::catch_unwind(AssertUnwindSafe(|| runner.run(job))) {
            Ok(work) => Caught(work),
            Err(panic) => return Some(Err(panicked(crate::panic::message(panic.as_ref())))),
        };
        tokio::pin!(work);
        let (lost_tx, mut lost) = tokio::sync::oneshot::channel();
        let _beat = AbortOnDrop(tokio::spawn(self.clone().keep_lease(
            job.id,
            owner.to_owned(),
            lost_tx,
        )));
        // A task spawned from a runtime thread waits in that thread's LIFO
        // slot, which no other thread takes from: were the runner to hold
        // this thread right away, the heartbeat would wait with it. Yielding
        // once lets it start; its timer then wakes it on any thread.
        tokio::task::yield_now().await;
        let mut deadline: Option<tokio::time::Instant> = None;
        loop {
            tokio::select! {
                result = &mut work => return Some(result.unwrap_or_else(|m| Err(panicked(m)))),
                // Only a lease found gone counts: a heartbeat task that
                // ended otherwise (runtime shutting down) abandons nothing.
                Ok(()) = &mut lost => {
                    tracing::warn!(job = job.id, %owner, "lease lost; abandoning the job");
                    return None;
                }
                _ = shutdown.changed(), if deadline.is_none() => {
                    deadline = Some(tokio::time::Instant::now() + self.settings.shutdown_grace);
                }
                _ = tokio::time::sleep_until(deadline.unwrap_or_else(tokio::time::Instant::now)), if deadline.is_some() => {
                    let now = self.store.now_ms();
                    if let Err(e) = jobs::release(self.store.pool(), job.id, owner, now).await {
                        tracing::warn!(job = job.id, error = %e, "lease not released; it will expire");
                    }
                    tracing::info!(job = job.id, "shutdown: job given back to the queue");
                    return None;
                }
            }
        }
    }

    /// Extends the job's lease every third of a lease until it finds the
    /// lease gone (then says so on `lost`). A task of its own, so a runner
    /// that holds its thread for a moment (a fork, a large directory
    /// removed) does not lose its lease for it; aborted when the job ends.
    ///
    /// Heartbeats that fail (the database unreachable, a connection that
    /// hangs: each try is bounded by a beat) do not keep the lease: when
    /// none has landed by half a beat before the lease runs out, the job is
    /// given up too, before another worker may claim it, so that two
    /// workers never run one step at once.
    async fn keep_lease(self, id: i64, owner: String, lost: tokio::sync::oneshot::Sender<()>) {
        let lease = self.settings.lease;
        let beat = lease / 3;
        let margin = beat / 2;
        let start = tokio::time::Instant::now();
        // Claimed a moment ago, for a lease from then.
        let mut held_until = start + lease;
        let mut next_beat = start + beat;
        loop {
            let give_up_at = held_until.checked_sub(margin).unwrap_or(held_until);
            tokio::time::sleep_until(next_beat.min(give_up_at)).await;
            if tokio::time::Instant::now() >= give_up_at {
                tracing::warn!(
                    job = id,
                    "no heartbeat landed within the lease; giving the job up"
                );
                let _ = lost.send(());
                return;
            }
            next_beat += beat;
            let (tried, now) = (tokio::time::Instant::now(), self.store.now_ms());
            let beat_once = jobs::heartbeat(self.store.pool(), id, &owner, now, lease);
            match tokio::time::timeout(beat, beat_once).await {
                Ok(Ok(true)) => held_until = tried + lease,
                Ok(Ok(false)) => {
                    let _ = lost.send(());
                    return;
                }
                Ok(Err(e)) => tracing::warn!(job = id, error = %e, "heartbeat failed"),
                Err(_) => tracing::warn!(job = id, "heartbeat timed out"),
            }
        }
    }

    /// [`Self::settle`], tried again a few times when the database refuses
    /// the write (locked past its busy timeout, a connection lost): the
    /// job's work is done, and an outcome not recorded would leave the job
    /// leased until its lease expires and another worker runs it all again.
    /// No try starts later than a third of a lease after the first (no
    /// heartbeat runs meanwhile, and the last one left at least two
    /// thirds), nor once shutdown has begun: the process must exit within
    /// its grace, and the lease still hands the job on.
    async fn settle_persistently(
        &self,
        job: &LeasedJob,
        owner: &str,
        result: Result<(), JobError>,
        shutdown: &watch::Receiver<bool>,
    ) -> Result<Settled, StoreError> {
        let last_try = tokio::time::Instant::now() + self.settings.lease / 3;
        let mut shutdown = shutdown.clone();
        let mut wait = SETTLE_FIRST_WAIT;
        let mut attempt = 1;
        loop {
            let error = match self.settle(job, owner, result.clone()).await {
                Err(e) if e.is_transient() && attempt < SETTLE_ATTEMPTS => e,
                settled => return settled,
            };
            let next = tokio::time::Instant::now() + wait;
            if next > last_try || *shutdown.borrow() {
                return Err(error);
            }
            tracing::warn!(job = job.id, attempt, error = %error, "the job's outcome was not recorded; trying again");
            tokio::select! {
                () = tokio::time::sleep_until(next) => {}
                _ = shutdown.wait_for(|stop| *stop) => return Err(error),
            }
            wait *= 2;
            attempt += 1;
        }
    }

    async fn settle(
        &self,
        job: &LeasedJob,
        owner: &str,
        result: Result<(), JobError>,
    ) -> Result<Settled, StoreError> {
        let pool = self.store.pool();
        let now = self.store.now_ms();
        let (message, retry_after) = match result {
            Ok(()) => {
                if !jobs::complete(pool, job.id, owner, now).await? {
                    tracing::warn!(job = job.id, "completed after the lease was lost");
                }
                return Ok(Settled::Done);
            }
            Err(JobError::Retry(m)) => {
                let delay = self.settings.backoff.delay(job.attempts, fastrand::f64());
                (m, Some(delay))
            }
            Err(JobError::RetryAfter(m, delay)) => (m, Some(delay)),
            Err(JobError::Permanent(m)) => (m, None),
            Err(JobError::Defer(m, at_least)) => {
                let delay = self.settings.backoff.delay(job.attempts, fastrand::f64());
                return self.defer(job, owner, &m, delay.max(at_least)).await;
            }
            Err(JobError::Postpone(delay)) => {
                let run_at = now.saturating_add(delay.as_millis().min(i64::MAX as u128) as i64);
                let postponed = jobs::postpone(pool, job.id, owner, now, run_at).await?;
                return Ok(match postponed {
                    true => Settled::Postponed,
                    false => Settled::LeaseLost,
                });
            }
        };
        let outcome = jobs::fail(pool, job, owner, now, &message, retry_after).await?;
        match outcome {
            FailOutcome::Retrying { run_at } => {
                tracing::warn!(job = job.id, kind = %job.kind, attempt = job.attempts, error = %message, retry_in_ms = run_at - now, "job failed; will retry");
                Ok(Settled::Retry)
            }
            FailOutcome::Dead => {
                tracing::error!(job = job.id, kind = %job.kind, attempt = job.attempts, error = %message, "job dead-lettered");
                Ok(Settled::Dead)
            }
            FailOutcome::LeaseLost => Ok(Settled::LeaseLost),
        }
    }

    /// Queues a deferred job again after `delay`, its attempt not counted;
    /// past [`jobs::OUTAGE_PATIENCE`] a deferral counts like any failure.
    async fn defer(
        &self,
        job: &LeasedJob,
        owner: &str,
        message: &str,
        delay: Duration,
    ) -> Result<Settled, StoreError> {
        let (pool, now) = (self.store.pool(), self.store.now_ms());
        match jobs::defer(pool, job, owner, now, message, delay).await? {
            Some(FailOutcome::Retrying { run_at }) => {
                tracing::warn!(job = job.id, kind = %job.kind, error = %message, retry_in_ms = run_at - now, "job deferred: a dependency is down");
                Ok(Settled::Deferred)
            }
            Some(_) => Ok(Settled::LeaseLost),
            None => match jobs::fail(pool, job, owner, now, message, Some(delay)).await? {
                FailOutcome::Retrying { .. } => Ok(Settled::Retry),
                FailOutcome::Dead => Ok(Settled::Dead),
                FailOutcome::LeaseLost => Ok(Settled::LeaseLost),
            },
        }
    }
}
