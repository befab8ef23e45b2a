//! The intake writer on SQLite: a thread of its own with its own connection
//! to the database file and its statements prepared once.
//!
//! SQLite is an in-process library, so the fastest writer is the one that
//! calls it directly: no async layer, no per-statement hop to a connection
//! thread, no argument conversion through sqlx's `Any` types. Each batch is
//! one `BEGIN IMMEDIATE … COMMIT` around one prepared insert per delivery
//! (and per job); a delivery whose id is already stored changes no row and is
//! answered as a duplicate, also when the same id comes twice in one batch.
//! The rest of closer reaches the same file through the sqlx pool; WAL and
//! waiting for the write lock (the pool: `busy_timeout`; the writer: its own
//! busy handler, in short steps) let the two share it.

use std::cell::Cell;
use std::time::{Duration, Instant};

use rusqlite::{Connection, Statement, Transaction, TransactionBehavior, params};
use tokio::sync::mpsc;

use super::{
    MAX_BATCH, Outcomes, Pending, WriteOutcome, all_failed, answer, batch_failed, failed, written,
};
use crate::clock::SharedClock;
use crate::model::{DeliveryStatus, Named};
use crate::store::deliveries::{IGNORED_NO_WORK, NewDelivery, Thread};
use crate::store::{Store, StoreError, WRITER_CACHE_KIB, open_work, sqlite_pragmas};

const INSERT_DELIVERY: &str = "INSERT INTO deliveries (delivery_id, event, action, \
    installation_id, repository, payload, payload_encoding, received_at, status, outcome) \
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (delivery_id) DO NOTHING";

const INSERT_JOB: &str = "INSERT INTO jobs (kind, job_key, payload, max_attempts, run_at, \
    created_at, updated_at, state, attempts) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, 'queued', 0)";

/// The writer's connection, opened before its thread starts so that a
/// database it cannot use is an error at start, not on the first delivery.
pub(super) struct SqliteWriter {
    conn: Connection,
    clock: SharedClock,
}

struct Statements<'c> {
    delivery: Statement<'c>,
    job: Statement<'c>,
    /// Whether closer has work on a thread (`store::open_work`).
    open_work: Statement<'c>,
}

fn open_work_sql() -> String {
    format!("SELECT {}", open_work::condition("?1", "?2", "?3"))
}

impl SqliteWriter {
    pub(super) fn open(store: &Store) -> Result<SqliteWriter, StoreError> {
        let Some(file) = store.sqlite_file() else {
            return Err(StoreError::UnsupportedUrl);
        };
        let conn = Connection::open(file)?;
        // A URL the in-memory check let through (e.g. a `file:` URI with
        // `mode=memory`) still opens no file: refuse it here.
        if conn.path().is_none_or(str::is_empty) {
            return Err(StoreError::InMemorySqlite);
        }
        conn.execute_batch(&sqlite_pragmas(store.durability(), WRITER_CACHE_KIB))?;
        // Replaces the handler the pragmas' `busy_timeout` installed.
        conn.busy_handler(Some(wait_for_the_lock))?;
        // Fails here, at start, when the schema is not there.
        conn.prepare(INSERT_DELIVERY)?;
        conn.prepare(INSERT_JOB)?;
        conn.prepare(&open_work_sql())?;
        Ok(SqliteWriter {
            conn,
            clock: store.clock().clone(),
        })
    }

    /// The writer thread's loop; returns once every sender is gone and the
    /// queue is empty.
    pub(super) fn run(self, mut rx: mpsc::Receiver<Pending>) {
        let mut statements = self.statements();
        let mut batch = Vec::with_capacity(MAX_BATCH);
        while rx.blocking_recv_many(&mut batch, MAX_BATCH) > 0 {
            let outcomes = match &mut statements {
                Ok(statements) => match self.write_batch(statements, &batch) {
                    Ok(outcomes) => written(outcomes),
                    Err(e) if !concerns_one_delivery(&e) => all_failed(&batch, e),
                    Err(e) => {
                        batch_failed(&e, batch.len());
                        one_by_one(&batch, |one| self.write_batch(statements, one))
                    }
                },
                Err(e) => all_failed(&batch, format!("cannot prepare the statements: {e}")),
            };
            answer(&mut batch, outcomes);
        }
    }

    fn statements(&self) -> Result<Statements<'_>, String> {
        let prepare = |sql| self.conn.prepare(sql).map_err(|e| e.to_string());
        Ok(Statements {
            delivery: prepare(INSERT_DELIVERY)?,
            job: prepare(INSERT_JOB)?,
            open_work: prepare(&open_work_sql())?,
        })
    }

    /// Writes one batch in one transaction; the outcomes are in the batch's
    /// order. On an error nothing of the batch is kept.
    fn write_batch(
        &self,
        statements: &mut Statements<'_>,
        batch: &[Pending],
    ) -> rusqlite::Result<Vec<WriteOutcome>> {
        let now = self.clock.now_ms();
        // Rolled back when dropped without the commit below.
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
        let mut outcomes = Vec::with_capacity(batch.len());
        for Pending { delivery: d, .. } in batch {
            // Jobs written earlier in this transaction count: this
            // connection reads its own writes.
            let job = match &d.only_with_work {
                Some(thread) if !has_work(&mut statements.open_work, d, thread)? => None,
                _ => d.job.as_ref(),
            };
            let (status, outcome) = match (&d.job, job) {
                (Some(_), None) => (DeliveryStatus::Ignored, Some(IGNORED_NO_WORK)),
                _ => (d.status, None),
            };
            let (payload, encoding) = d.stored_payload(job.is_some());
            let inserted = statements.delivery.execute(params![
                d.delivery_id,
                d.event,
                d.action,
                d.installation_id,
                d.repository,
                payload,
                encoding.as_str(),
                d.received_at,
                status.as_str(),
                outcome,
            ])? == 1;
            if inserted && let Some(job) = job {
                statements.job.execute(params![
                    job.kind.as_str(),
                    job.key,
                    job.payload,
                    job.max_attempts,
                    job.run_at,
                    now,
                ])?;
            }
            outcomes.push(match (inserted, outcome) {
                (false, _) => WriteOutcome::Duplicate,
                (true, Some(_)) => WriteOutcome::Ignored,
                (true, None) => WriteOutcome::Stored,
            });
        }
        tx.commit()?;
        Ok(outcomes)
    }
}

/// How long the writer waits for another connection's write lock before the
/// batch fails (answered 503): as long as the pool's `busy_timeout`.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// The writer's busy handler (SQLite calls it with 0, 1, 2… while the lock
/// is held elsewhere): waits in steps of [`LOCK_STEP`] until [`LOCK_WAIT`]
/// has passed since the first call. SQLite's own handler sleeps 1, 2, 5, 10,
/// 15, 20, 25… ms between tries, so a worker's transaction of a millisecond
/// held every request of the batch behind it for several: with workers on,
/// intake's p99 went from 33 to 7 ms (docs/benchmarks.md, run 4).
fn wait_for_the_lock(attempt: i32) -> bool {
    thread_local! {
        static SINCE: Cell<Instant> = Cell::new(Instant::now());
    }
    let now = Instant::now();
    if attempt == 0 {
        SINCE.set(now);
    }
    if now.saturating_duration_since(SINCE.get()) >= LOCK_WAIT {
        return false;
    }
    std::thread::sleep(LOCK_STEP);
    true
}

/// One step of [`wait_for_the_lock`]: short against a worker's transaction.
const LOCK_STEP: Duration = Duration::from_micros(100);

/// Whether closer has work on the delivery's thread.
fn has_work(
    statement: &mut Statement<'_>,
    delivery: &NewDelivery,
    thread: &Thread,
) -> rusqlite::Result<bool> {
    let key = delivery.job.as_ref().map_or("", |j| j.key.as_str());
    statement.query_row(params![key, thread.repository, thread.number], |row| {
        row.get::<_, bool>(0)
    })
}

/// Writes each delivery of a failed batch in a transaction of its own. Once
/// one fails for a reason that is not its own (the database locked, full),
/// the rest are answered with that error instead of waiting again each.
fn one_by_one(
    batch: &[Pending],
    mut write: impl FnMut(&[Pending]) -> rusqlite::Result<Vec<WriteOutcome>>,
) -> Outcomes {
    let mut outcomes = Vec::with_capacity(batch.len());
    for (i, one) in batch.chunks(1).enumerate() {
        match write(one) {
            Ok(written) => outcomes.push(Ok(written[0])),
            Err(e) if concerns_one_delivery(&e) => outcomes.push(Err(failed(&one[0], e))),
            Err(e) => {
                outcomes.extend(all_failed(&batch[i..], e));
                break;
            }
        }
    }
    outcomes
}

/// Whether an error can be caused by one delivery of a batch (a constraint,
/// a trigger, a value too big), so that writing the deliveries one by one
/// isolates it; not for a locked, full or broken database.
fn concerns_one_delivery(e: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode;
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::ConstraintViolation | ErrorCode::TooBig | ErrorCode::TypeMismatch)
    )
}

#[cfg(test)]
mod tests {
    use rusqlite::ffi;

    use super::concerns_one_delivery;

    fn sqlite_error(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(ffi::Error::new(code), None)
    }

    #[test]
    fn only_errors_one_delivery_can_cause_are_retried_one_by_one() {
        for code in [
            ffi::SQLITE_CONSTRAINT_TRIGGER,
            ffi::SQLITE_CONSTRAINT_NOTNULL,
            ffi::SQLITE_TOOBIG,
            ffi::SQLITE_MISMATCH,
        ] {
            assert!(concerns_one_delivery(&sqlite_error(code)), "{code}");
        }
        for code in [
            ffi::SQLITE_BUSY,
            ffi::SQLITE_LOCKED,
            ffi::SQLITE_FULL,
            ffi::SQLITE_IOERR,
            ffi::SQLITE_READONLY,
            ffi::SQLITE_CORRUPT,
        ] {
            assert!(!concerns_one_delivery(&sqlite_error(code)), "{code}");
        }
    }
}
