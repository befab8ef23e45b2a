//! The intake writer: one writer that owns the write path for deliveries.
//!
//! Requests hand their verified delivery to the writer and wait. The writer
//! takes every delivery queued at that moment (up to [`MAX_BATCH`]), writes
//! them and their jobs in one transaction, commits, and only then answers each
//! request. One commit per batch instead of per request is what lets SQLite
//! take thousands of deliveries a second, and with `fsync` durability it is
//! one fsync per batch.
//!
//! A delivery triage keeps only while closer has work on its issue or pull
//! request (`NewDelivery::only_with_work`) is checked inside that same
//! transaction (`store::open_work`), after the batch's earlier deliveries:
//! with work, it is written with its job; without, as `ignored` with no job
//! ([`WriteOutcome::Ignored`]). A pool of writers would only contend for SQLite's
//! single write lock.
//!
//! Two implementations share that contract:
//! - [`sqlite`]: on SQLite, a dedicated thread with its own connection and
//!   prepared statements. It skips sqlx's `Any` layer and its hop to a
//!   connection thread per statement, which cost a third of the intake's CPU
//!   (docs/benchmarks.md).
//! - [`pool`]: on PostgreSQL, an async task with multi-row inserts through the
//!   shared pool.

mod pool;
mod sqlite;

use tokio::sync::{mpsc, oneshot};

use super::deliveries::NewDelivery;
use super::{Backend, Store, StoreError};

/// The most deliveries one transaction takes.
pub const MAX_BATCH: usize = 256;

/// What became of a submitted delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Written now, with its job (if it has one).
    Stored,
    /// Written now as `ignored`, without its job: it was wanted only while
    /// closer has work on its issue or pull request, and there is none.
    Ignored,
    /// That delivery id was already stored; nothing written.
    Duplicate,
}

/// Why a delivery could not be written.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WriteError {
    #[error("the intake writer has stopped")]
    Closed,
    #[error("database error while storing the delivery: {0}")]
    Database(String),
}

struct Pending {
    delivery: NewDelivery,
    reply: oneshot::Sender<Result<WriteOutcome, WriteError>>,
}

/// The handle requests use; cheap to clone.
#[derive(Clone, Debug)]
pub struct IntakeWriter {
    tx: mpsc::Sender<Pending>,
}

impl IntakeWriter {
    /// Starts the writer for the store's backend, with room for `queue`
    /// waiting deliveries. It stops once every handle is dropped and the queue
    /// is drained; the returned task ends then.
    pub fn spawn(
        store: Store,
        queue: usize,
    ) -> Result<(IntakeWriter, tokio::task::JoinHandle<()>), StoreError> {
        let (tx, rx) = mpsc::channel(queue);
        let task = match store.backend() {
            Backend::Sqlite => {
                let writer = sqlite::SqliteWriter::open(&store)?;
                tokio::task::spawn_blocking(move || writer.run(rx))
            }
            Backend::Postgres => tokio::spawn(pool::run(store, rx)),
        };
        Ok((IntakeWriter { tx }, task))
    }

    /// Writes a delivery (and its job) durably; returns after the commit.
    pub async fn submit(&self, delivery: NewDelivery) -> Result<WriteOutcome, WriteError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(Pending { delivery, reply })
            .await
            .map_err(|_| WriteError::Closed)?;
        answer.await.map_err(|_| WriteError::Closed)?
    }
}

/// What each delivery of a batch became, in the batch's order.
type Outcomes = Vec<Result<WriteOutcome, WriteError>>;

/// Answers every request of a batch and empties it.
fn answer(batch: &mut Vec<Pending>, outcomes: Outcomes) {
    metrics::histogram!("closer_intake_batch_size").record(batch.len() as f64);
    for (pending, outcome) in batch.drain(..).zip(outcomes) {
        let _ = pending.reply.send(outcome);
    }
}

/// The outcomes of a batch its one transaction wrote.
fn written(outcomes: Vec<WriteOutcome>) -> Outcomes {
    outcomes.into_iter().map(Ok).collect()
}

/// Logs a batch whose transaction failed because of one of its deliveries
/// (a constraint, a value the database refuses). The writers then write each
/// of its deliveries again in a transaction of its own: the delivery the
/// database refuses fails alone instead of taking its whole batch with it
/// (GitHub does not redeliver by itself).
fn batch_failed(e: &impl std::fmt::Display, size: usize) {
    tracing::warn!(error = %e, size, "intake batch failed; writing its deliveries one by one");
}

/// A batch whose transaction failed for a reason no single delivery causes
/// (the database is locked past its timeout, full, unreachable): writing each
/// delivery again would only wait once per delivery. Every request is
/// answered 503.
fn all_failed(batch: &[Pending], e: impl std::fmt::Display) -> Outcomes {
    tracing::error!(error = %e, size = batch.len(), "intake batch not stored");
    let e = WriteError::Database(e.to_string());
    batch.iter().map(|_| Err(e.clone())).collect()
}

/// The answer to a delivery that could not be written on its own either.
fn failed(pending: &Pending, e: impl std::fmt::Display) -> WriteError {
    tracing::error!(delivery = %pending.delivery.delivery_id, error = %e, "delivery not stored");
    WriteError::Database(e.to_string())
}
