//! The intake writer: one task that owns the write path for deliveries.
//!
//! Requests hand their verified delivery to this task and wait. The task takes
//! every delivery queued at that moment (up to [`MAX_BATCH`]), writes them and
//! their jobs in one transaction with multi-row inserts, commits, and only then
//! answers each request. One commit per batch instead of per request is what
//! lets SQLite take thousands of deliveries a second, and with `fsync`
//! durability it is one fsync per batch. A pool of writers would only contend
//! for SQLite's single write lock.

use std::collections::HashMap;

use sqlx::{Any, Row, Transaction};
use tokio::sync::{mpsc, oneshot};

use super::deliveries::NewDelivery;
use super::{Store, StoreError};

/// The most deliveries one transaction takes (9 bind parameters each).
pub const MAX_BATCH: usize = 256;

/// What became of a submitted delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Written now, with its job.
    Stored,
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
    /// Starts the writer task. It stops once every handle is dropped and the
    /// queue is drained.
    pub fn spawn(store: Store, queue: usize) -> (IntakeWriter, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(queue);
        let task = tokio::spawn(run(store, rx));
        (IntakeWriter { tx }, task)
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

async fn run(store: Store, mut rx: mpsc::Receiver<Pending>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let size = batch.len();
        let result = write_batch(&store, &batch).await;
        metrics::histogram!("closer_intake_batch_size").record(size as f64);
        match result {
            Ok(outcomes) => {
                for (pending, outcome) in batch.drain(..).zip(outcomes) {
                    let _ = pending.reply.send(Ok(outcome));
                }
            }
            Err(e) => {
                tracing::error!(error = %e, size, "intake batch could not be stored");
                let e = WriteError::Database(e.to_string());
                for pending in batch.drain(..) {
                    let _ = pending.reply.send(Err(e.clone()));
                }
            }
        }
    }
}

/// Writes one batch; the outcomes are in the batch's order.
async fn write_batch(store: &Store, batch: &[Pending]) -> Result<Vec<WriteOutcome>, StoreError> {
    // The same id twice in one batch (GitHub and a redelivery racing): the
    // first is the one written, the others are duplicates.
    let mut first_of: HashMap<&str, usize> = HashMap::with_capacity(batch.len());
    let mut unique = Vec::with_capacity(batch.len());
    for (i, p) in batch.iter().enumerate() {
        first_of
            .entry(p.delivery.delivery_id.as_str())
            .or_insert_with(|| {
                unique.push(&p.delivery);
                i
            });
    }
    let mut tx = store.pool().begin().await?;
    let inserted = insert_deliveries(&mut tx, &unique).await?;
    let jobs: Vec<_> = unique
        .iter()
        .filter(|d| inserted.contains_key(d.delivery_id.as_str()))
        .filter_map(|d| d.job.as_ref())
        .collect();
    insert_jobs(&mut tx, &jobs, store.now_ms()).await?;
    tx.commit().await?;
    Ok(batch
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let id = p.delivery.delivery_id.as_str();
            if first_of[id] == i && inserted.contains_key(id) {
                WriteOutcome::Stored
            } else {
                WriteOutcome::Duplicate
            }
        })
        .collect())
}

async fn insert_deliveries(
    tx: &mut Transaction<'static, Any>,
    deliveries: &[&NewDelivery],
) -> Result<HashMap<String, ()>, StoreError> {
    if deliveries.is_empty() {
        return Ok(HashMap::new());
    }
    let mut sql = String::from(
        "INSERT INTO deliveries (delivery_id, event, action, installation_id, repository, \
         payload, payload_encoding, received_at, status) VALUES ",
    );
    push_placeholders(&mut sql, deliveries.len(), 9, "");
    sql.push_str(" ON CONFLICT (delivery_id) DO NOTHING RETURNING delivery_id");
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for d in deliveries {
        query = query
            .bind(d.delivery_id.as_str())
            .bind(d.event.as_str())
            .bind(d.action.as_deref())
            .bind(d.installation_id)
            .bind(d.repository.as_deref())
            .bind(d.payload.as_slice())
            .bind(d.encoding.as_str())
            .bind(d.received_at)
            .bind(d.status);
    }
    let rows = query.fetch_all(&mut **tx).await?;
    rows.iter()
        .map(|r| Ok((r.try_get::<String, _>("delivery_id")?, ())))
        .collect()
}

async fn insert_jobs(
    tx: &mut Transaction<'static, Any>,
    jobs: &[&super::jobs::NewJob],
    now: i64,
) -> Result<(), StoreError> {
    if jobs.is_empty() {
        return Ok(());
    }
    let mut sql = String::from(
        "INSERT INTO jobs (kind, job_key, payload, max_attempts, run_at, created_at, \
         updated_at, state, attempts) VALUES ",
    );
    push_placeholders(&mut sql, jobs.len(), 7, ", 'queued', 0");
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for job in jobs {
        query = query
            .bind(job.kind.as_str())
            .bind(job.key.as_str())
            .bind(job.payload.as_str())
            .bind(job.max_attempts)
            .bind(job.run_at)
            .bind(now)
            .bind(now);
    }
    query.execute(&mut **tx).await?;
    Ok(())
}

/// Appends `($1, …, $cols<tail>), (…)` for `rows` rows; `tail` holds
/// constants every row shares.
fn push_placeholders(sql: &mut String, rows: usize, cols: usize, tail: &str) {
    use std::fmt::Write;
    for r in 0..rows {
        if r > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for c in 0..cols {
            if c > 0 {
                sql.push_str(", ");
            }
            let _ = write!(sql, "${}", r * cols + c + 1);
        }
        sql.push_str(tail);
        sql.push(')');
    }
}

#[cfg(test)]
mod tests {
    use super::push_placeholders;

    #[test]
    fn placeholders_number_rows_then_columns() {
        let mut sql = String::new();
        push_placeholders(&mut sql, 2, 3, ", 0");
        assert_eq!(sql, "($1, $2, $3, 0), ($4, $5, $6, 0)");
    }
}
