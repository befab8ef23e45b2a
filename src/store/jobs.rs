//! The durable job queue: a lease table in the same database as everything
//! else, so enqueueing shares the caller's transaction.
//!
//! A job is `queued`, `leased` (owner + expiry), `done` or `dead`. Claiming is
//! one statement: it picks the oldest runnable job whose key has no other
//! leased job (and, for a delivery, no older delivery still queued), and
//! leases it. A partial unique index (`one leased job per
//! key`) makes that exclusivity a database guarantee, also on PostgreSQL where
//! concurrent claimers use `FOR UPDATE SKIP LOCKED`: the loser of a race on
//! the same key gets a unique violation, which reads as "nothing claimed".
//! A lease that expires (its worker died) makes the job claimable again.
//! A deferred job (what it depends on is down) is queued again without
//! its attempt counting, for up to [`OUTAGE_PATIENCE`].

use std::time::Duration;

use sqlx::{Any, AnyPool, Executor, Row};

use super::{Backend, StoreError};
use crate::clock::Millis;
use crate::model::{JobKind, JobState, Named};

/// A job to enqueue.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// Which handler runs it.
    pub kind: JobKind,
    /// At most one job per key is leased at a time (e.g. the run it belongs to).
    pub key: String,
    /// JSON the handler reads.
    pub payload: String,
    pub max_attempts: i64,
    /// Not before this time.
    pub run_at: Millis,
}

/// A job this worker holds the lease of.
#[derive(Debug, Clone, PartialEq)]
pub struct LeasedJob {
    pub id: i64,
    pub kind: String,
    pub key: String,
    pub payload: String,
    /// Including this one.
    pub attempts: i64,
    pub max_attempts: i64,
    pub lease_expires_at: Millis,
    /// When it became runnable (for queue-wait latency).
    pub run_at: Millis,
}

/// What became of a failed job.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOutcome {
    /// Queued again, runnable from this time.
    Retrying { run_at: Millis },
    /// Out of attempts; kept with its last error.
    Dead,
    /// This worker no longer held the lease; nothing changed.
    LeaseLost,
}

/// Exponential backoff with jitter for retries.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub max: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(2),
            max: Duration::from_secs(600),
        }
    }
}

impl Backoff {
    /// The delay after the `attempts`-th failure; `jitter` in `[0, 1)` spreads
    /// it over ±20%.
    pub fn delay(&self, attempts: i64, jitter: f64) -> Duration {
        let exp = attempts.clamp(1, 30) as u32 - 1;
        let raw = self
            .base
            .saturating_mul(2u32.saturating_pow(exp))
            .min(self.max);
        let factor = 0.8 + 0.4 * jitter.clamp(0.0, 1.0);
        raw.mul_f64(factor)
    }
}

/// Adds a job; runs inside the caller's transaction when given one.
pub async fn enqueue<'e, E>(executor: E, job: &NewJob, now: Millis) -> Result<i64, StoreError>
where
    E: Executor<'e, Database = Any>,
{
    let row = bind_new(
        sqlx::query(
            "INSERT INTO jobs (kind, job_key, payload, state, attempts, max_attempts, run_at, \
             created_at, updated_at) VALUES ($1, $2, $3, 'queued', 0, $4, $5, $6, $6) RETURNING id",
        ),
        job,
        now,
    )
    .fetch_one(executor)
    .await?;
    Ok(row.try_get("id")?)
}

/// Binds a new job's columns as `$1`–`$6` (kind, key, payload, attempts
/// allowed, due time, now).
fn bind_new<'q>(
    query: sqlx::query::Query<'q, Any, sqlx::any::AnyArguments>,
    job: &'q NewJob,
    now: Millis,
) -> sqlx::query::Query<'q, Any, sqlx::any::AnyArguments> {
    query
        .bind(job.kind.as_str())
        .bind(&job.key)
        .bind(&job.payload)
        .bind(job.max_attempts)
        .bind(job.run_at)
        .bind(now)
}

/// The claim statement; `$lock` is empty on SQLite (one writer at a time) and
/// `FOR UPDATE SKIP LOCKED` on PostgreSQL. One job of a key at a time; and
/// the deliveries of one key (one issue's or pull request's) in the order
/// they came, so a delivery waiting out its backoff holds back the newer
/// ones (an `unlabeled` must not be acted on before the `labeled` that
/// came first). A job leased once keeps its turn when its lease runs out,
/// or an older queued job and it would wait for each other for ever. A
/// run's steps are not held back so: some are queued for later on purpose
/// (`ShowStop`), and each checks the run's state. (Delivery keys are never
/// a run's.)
///
/// The oldest runnable job is the older of two candidates, each found by
/// walking `jobs_claimable` in order and stopping at the first that may
/// run: the oldest queued job, and the oldest whose lease ran out (the one
/// leased job of its key, by `jobs_one_leased_per_key`). Asked
/// as one `WHERE` with an `OR` of the two states, both databases collected
/// and sorted every runnable job on each claim: 0.3 s per claim behind a
/// backlog of 100,000 jobs, on SQLite while holding the write lock
/// (docs/benchmarks.md, run 11). The hold-backs stay index lookups too
/// (the older queued delivery through `jobs_queued_by_key`, migration 10):
/// folded into one with an `OR`, SQLite read every job of the key for each
/// candidate (run 10).
macro_rules! claim_sql {
    ($lock:literal) => {
        concat!(
            "UPDATE jobs SET state = 'leased', lease_owner = $1, ",
            "lease_expires_at = $2, attempts = attempts + 1, updated_at = $3 ",
            "WHERE id = (WITH queued AS (SELECT j.id, j.run_at FROM jobs j ",
            "WHERE j.state = 'queued' AND j.run_at <= $3 ",
            "AND NOT EXISTS (SELECT 1 FROM jobs k WHERE k.job_key = j.job_key AND k.state = 'leased') ",
            "AND NOT (j.kind = 'delivery' AND EXISTS (SELECT 1 FROM jobs k ",
            "WHERE k.job_key = j.job_key AND k.state = 'queued' AND k.id < j.id)) ",
            "ORDER BY j.run_at, j.id LIMIT 1 ",
            $lock,
            "), expired AS (SELECT j.id, j.run_at FROM jobs j ",
            "WHERE j.state = 'leased' AND j.lease_expires_at <= $3 AND j.attempts < j.max_attempts ",
            "ORDER BY j.run_at, j.id LIMIT 1 ",
            $lock,
            ") SELECT id FROM (SELECT id, run_at FROM queued UNION ALL SELECT id, run_at FROM expired) AS c ",
            "ORDER BY run_at, id LIMIT 1",
            ") RETURNING id, kind, job_key, payload, attempts, max_attempts, lease_expires_at, run_at"
        )
    };
}

const CLAIM_SQLITE: &str = claim_sql!("");
const CLAIM_POSTGRES: &str = claim_sql!("FOR UPDATE SKIP LOCKED");

/// The statement [`claim`] runs on `backend`: `$1` the worker, `$2` the
/// lease's end, `$3` now. Public so its query plan can be checked.
pub fn claim_statement(backend: Backend) -> &'static str {
    match backend {
        Backend::Sqlite => CLAIM_SQLITE,
        Backend::Postgres => CLAIM_POSTGRES,
    }
}

/// Leases the oldest runnable job, if any. Jobs whose lease expired after
/// their last allowed attempt are dead-lettered first.
pub async fn claim(
    pool: &AnyPool,
    backend: Backend,
    owner: &str,
    now: Millis,
    lease: Duration,
) -> Result<Option<LeasedJob>, StoreError> {
    reap_expired(pool, now).await?;
    let result = sqlx::query(claim_statement(backend))
        .bind(owner)
        .bind(now + lease.as_millis() as Millis)
        .bind(now)
        .fetch_optional(pool)
        .await;
    let row = match result {
        Ok(row) => row,
        // Another worker leased a job of the same key between our snapshot
        // and our update: the unique index refused ours. Nothing claimed.
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    row.map(|row| {
        Ok(LeasedJob {
            id: row.try_get("id")?,
            kind: row.try_get("kind")?,
            key: row.try_get("job_key")?,
            payload: row.try_get("payload")?,
            attempts: row.try_get("attempts")?,
            max_attempts: row.try_get("max_attempts")?,
            lease_expires_at: row.try_get("lease_expires_at")?,
            run_at: row.try_get("run_at")?,
        })
    })
    .transpose()
}

/// Dead-letters leased jobs whose lease expired on their last attempt.
async fn reap_expired(pool: &AnyPool, now: Millis) -> Result<u64, StoreError> {
    // A read first: idle workers poll often, and an UPDATE would take
    // SQLite's write lock (contending with the intake writer) every time.
    let expired = sqlx::query(
        "SELECT 1 AS one FROM jobs WHERE state = 'leased' AND lease_expires_at <= $1 \
         AND attempts >= max_attempts LIMIT 1",
    )
    .bind(now)
    .fetch_optional(pool)
    .await?;
    if expired.is_none() {
        return Ok(0);
    }
    let done = sqlx::query(
        "UPDATE jobs SET state = 'dead', lease_owner = NULL, finished_at = $1, updated_at = $1, \
         last_error = COALESCE(last_error, 'lease expired on the last attempt (worker died?)') \
         WHERE state = 'leased' AND lease_expires_at <= $1 AND attempts >= max_attempts",
    )
    .bind(now)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

/// Extends a lease. `false` when the lease is no longer this owner's.
pub async fn heartbeat(
    pool: &AnyPool,
    id: i64,
    owner: &str,
    now: Millis,
    lease: Duration,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE jobs SET lease_expires_at = $1, updated_at = $2 \
         WHERE id = $3 AND state = 'leased' AND lease_owner = $4",
    )
    .bind(now + lease.as_millis() as Millis)
    .bind(now)
    .bind(id)
    .bind(owner)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Marks a leased job done. `false` when the lease was lost meanwhile.
pub async fn complete(
    pool: &AnyPool,
    id: i64,
    owner: &str,
    now: Millis,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE jobs SET state = 'done', lease_owner = NULL, lease_expires_at = NULL, \
         finished_at = $1, updated_at = $1 WHERE id = $2 AND state = 'leased' AND lease_owner = $3",
    )
    .bind(now)
    .bind(id)
    .bind(owner)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Records a failure: queued again after `retry_after`, or dead when out of
/// attempts (or when `permanent`). The error text is kept either way.
pub async fn fail(
    pool: &AnyPool,
    job: &LeasedJob,
    owner: &str,
    now: Millis,
    error: &str,
    retry_after: Option<Duration>,
) -> Result<FailOutcome, StoreError> {
    let error = truncate(error, 4000);
    let (state, run_at, outcome) = match retry_after {
        Some(delay) if job.attempts < job.max_attempts => {
            let run_at = now + delay.as_millis() as Millis;
            (JobState::Queued, run_at, FailOutcome::Retrying { run_at })
        }
        _ => (JobState::Dead, now, FailOutcome::Dead),
    };
    let done = sqlx::query(
        "UPDATE jobs SET state = $1, run_at = $2, last_error = $3, lease_owner = NULL, \
         lease_expires_at = NULL, updated_at = $4, \
         finished_at = CASE WHEN $1 = 'dead' THEN $4 ELSE NULL END \
         WHERE id = $5 AND state = 'leased' AND lease_owner = $6",
    )
    .bind(state.as_str())
    .bind(run_at)
    .bind(error)
    .bind(now)
    .bind(job.id)
    .bind(owner)
    .execute(pool)
    .await?;
    Ok(if done.rows_affected() == 1 {
        outcome
    } else {
        FailOutcome::LeaseLost
    })
}

/// How long after it was queued a job may wait out an outage without its
/// attempts counting: a day. Past it, a deferral is an ordinary failure, so
/// a request GitHub refuses with a 5xx forever ends in the dead letters.
pub const OUTAGE_PATIENCE: Duration = Duration::from_secs(24 * 3600);

/// Queues a job again after `delay` without counting the attempt (its
/// `max_attempts` grows by one, so `attempts` still drives the backoff).
/// `None` when the job is older than [`OUTAGE_PATIENCE`]: nothing was
/// changed, the caller records an ordinary failure instead.
pub async fn defer(
    pool: &AnyPool,
    job: &LeasedJob,
    owner: &str,
    now: Millis,
    error: &str,
    delay: Duration,
) -> Result<Option<FailOutcome>, StoreError> {
    let run_at = now + delay.as_millis() as Millis;
    let cutoff = now - OUTAGE_PATIENCE.as_millis() as Millis;
    let done = sqlx::query(
        "UPDATE jobs SET state = 'queued', run_at = $1, last_error = $2, \
         max_attempts = max_attempts + 1, lease_owner = NULL, lease_expires_at = NULL, \
         updated_at = $3 WHERE id = $4 AND state = 'leased' AND lease_owner = $5 \
         AND created_at > $6",
    )
    .bind(run_at)
    .bind(truncate(error, 4000))
    .bind(now)
    .bind(job.id)
    .bind(owner)
    .bind(cutoff)
    .execute(pool)
    .await?;
    if done.rows_affected() == 1 {
        return Ok(Some(FailOutcome::Retrying { run_at }));
    }
    let held = get(pool, job.id).await?.is_some_and(|row| {
        row.state == JobState::Leased && row.lease_owner.as_deref() == Some(owner)
    });
    Ok((!held).then_some(FailOutcome::LeaseLost))
}

/// Gives a lease back without counting the attempt (graceful shutdown).
pub async fn release(
    pool: &AnyPool,
    id: i64,
    owner: &str,
    now: Millis,
) -> Result<bool, StoreError> {
    postpone(pool, id, owner, now, now).await
}

/// Gives a lease back without counting the attempt, the job due again at
/// `run_at` (a limit it shares is booked until then). `false` when the
/// lease was no longer ours.
pub async fn postpone(
    pool: &AnyPool,
    id: i64,
    owner: &str,
    now: Millis,
    run_at: Millis,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE jobs SET state = 'queued', attempts = attempts - 1, lease_owner = NULL, \
         lease_expires_at = NULL, run_at = $1, updated_at = $2 \
         WHERE id = $3 AND state = 'leased' AND lease_owner = $4",
    )
    .bind(run_at)
    .bind(now)
    .bind(id)
    .bind(owner)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// One job's stored row, for tests, the dashboard and the runbook.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    pub id: i64,
    pub kind: String,
    pub key: String,
    pub payload: String,
    pub state: JobState,
    pub attempts: i64,
    pub max_attempts: i64,
    pub run_at: Millis,
    pub lease_owner: Option<String>,
    pub last_error: Option<String>,
}

pub async fn get(pool: &AnyPool, id: i64) -> Result<Option<JobRow>, StoreError> {
    let row = sqlx::query(
        "SELECT id, kind, job_key, payload, state, attempts, max_attempts, run_at, lease_owner, \
         last_error FROM jobs WHERE id = $1",
    )
    .bind(id)
    .fetch_optional(pool)
    .await?;
    row.map(|row| {
        Ok(JobRow {
            id: row.try_get("id")?,
            kind: row.try_get("kind")?,
            key: row.try_get("job_key")?,
            payload: row.try_get("payload")?,
            state: JobState::read("jobs.state", &row.try_get::<String, _>("state")?)?,
            attempts: row.try_get("attempts")?,
            max_attempts: row.try_get("max_attempts")?,
            run_at: row.try_get("run_at")?,
            lease_owner: row.try_get("lease_owner")?,
            last_error: row.try_get("last_error")?,
        })
    })
    .transpose()
}

/// Adds `job` unless a job with its key is queued or leased; `true` when
/// it was added. One statement on SQLite (a write holds the database from
/// its start); on PostgreSQL two replicas' statements would not see each
/// other's uncommitted job, so a transaction-scoped advisory lock on the
/// key makes them take turns.
pub async fn enqueue_unless_live(
    pool: &AnyPool,
    backend: Backend,
    job: &NewJob,
    now: Millis,
) -> Result<bool, StoreError> {
    let mut tx = pool.begin().await?;
    if backend == Backend::Postgres {
        sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))")
            .bind(&job.key)
            .execute(&mut *tx)
            .await?;
    }
    let done = bind_new(
        sqlx::query(
            "INSERT INTO jobs (kind, job_key, payload, state, attempts, max_attempts, run_at, \
             created_at, updated_at) SELECT $1, $2, $3, 'queued', 0, $4, $5, $6, $6 \
             WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE job_key = $2 \
             AND (state = 'queued' OR state = 'leased'))",
        ),
        job,
        now,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(done.rows_affected() == 1)
}

/// The id of the newest job queued so far (0 when none was): ids only
/// grow, so a job of a lower id was queued before this was read.
pub async fn newest_id(pool: &AnyPool) -> Result<i64, StoreError> {
    let row = sqlx::query("SELECT MAX(id) AS newest FROM jobs")
        .fetch_one(pool)
        .await?;
    Ok(row.try_get::<Option<i64>, _>("newest")?.unwrap_or(0))
}

/// Whether a job with this key is queued or leased (a run's next step is
/// on its way); used by reconciliation.
pub async fn has_live_job(pool: &AnyPool, key: &str) -> Result<bool, StoreError> {
    let row = sqlx::query(
        "SELECT COUNT(*) AS n FROM jobs WHERE job_key = $1 AND (state = 'queued' OR state = 'leased')",
    )
    .bind(key)
    .fetch_one(pool)
    .await?;
    Ok(row.try_get::<i64, _>("n")? > 0)
}

/// The jobs with this key that died after `since` and since the last one
/// that completed, and the newest one's error: how often in a row a run's
/// steps failed for good (reconciliation gives up on a run after a few).
/// [`prune_done`] keeps the completed job that ends such a streak while a
/// death before it is kept.
pub async fn dead_in_a_row(
    pool: &AnyPool,
    key: &str,
    since: Millis,
) -> Result<(u32, Option<String>), StoreError> {
    let rows = sqlx::query(
        "SELECT last_error FROM jobs WHERE job_key = $1 AND state = 'dead' AND finished_at > $2 \
         AND finished_at > COALESCE((SELECT MAX(finished_at) FROM jobs \
         WHERE job_key = $1 AND state = 'done'), 0) \
         ORDER BY finished_at DESC, id DESC",
    )
    .bind(key)
    .bind(since)
    .fetch_all(pool)
    .await?;
    let newest = match rows.first() {
        Some(row) => row.try_get::<Option<String>, _>("last_error")?,
        None => None,
    };
    Ok((u32::try_from(rows.len()).unwrap_or(u32::MAX), newest))
}

/// Number of jobs per state (for `/metrics`).
pub async fn depth_by_state(pool: &AnyPool) -> Result<Vec<(JobState, i64)>, StoreError> {
    let rows = sqlx::query("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state ORDER BY state")
        .fetch_all(pool)
        .await?;
    rows.iter()
        .map(|row| {
            let state = JobState::read("jobs.state", &row.try_get::<String, _>("state")?)?;
            Ok((state, row.try_get("n")?))
        })
        .collect()
}

/// Deletes dead-lettered jobs that died before `before` (kept until then
/// for the operator to inspect and requeue).
pub async fn prune_dead(pool: &AnyPool, before: Millis) -> Result<u64, StoreError> {
    let done = sqlx::query("DELETE FROM jobs WHERE state = 'dead' AND finished_at < $1")
        .bind(before)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

/// Deletes finished (`done`) jobs older than `before`, but for those that
/// completed after a job of the same key died that is still kept: they end
/// that job's streak of deaths ([`dead_in_a_row`]), and go with it.
pub async fn prune_done(pool: &AnyPool, before: Millis) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "DELETE FROM jobs WHERE state = 'done' AND finished_at < $1 AND NOT EXISTS \
         (SELECT 1 FROM jobs AS dead WHERE dead.job_key = jobs.job_key \
         AND dead.state = 'dead' AND dead.finished_at < jobs.finished_at)",
    )
    .bind(before)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
