//! The intake writer on PostgreSQL: an async task writing each batch through
//! the shared pool with two multi-row inserts (deliveries, then their jobs),
//! so a batch costs a handful of round trips whatever its size.

use std::collections::HashSet;

use sqlx::{Any, Row, Transaction};

use crate::model::Named;
use tokio::sync::mpsc;

use super::{MAX_BATCH, Pending, WriteOutcome, all_failed, answer, batch_failed, failed, written};
use crate::store::deliveries::NewDelivery;
use crate::store::jobs::NewJob;
use crate::store::{Store, StoreError};

pub(super) async fn run(store: Store, mut rx: mpsc::Receiver<Pending>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut batch, MAX_BATCH).await > 0 {
        let outcomes = match write_batch(&store, &batch).await {
            Ok(outcomes) => written(outcomes),
            Err(e) if !concerns_one_delivery(&e) => all_failed(&batch, e),
            Err(e) => {
                batch_failed(&e, batch.len());
                // As on SQLite: once one fails for a reason that is not its
                // own, the rest are answered with that error.
                let mut outcomes = Vec::with_capacity(batch.len());
                for (i, one) in batch.chunks(1).enumerate() {
                    match write_batch(&store, one).await {
                        Ok(written) => outcomes.push(Ok(written[0])),
                        Err(e) if concerns_one_delivery(&e) => {
                            outcomes.push(Err(failed(&one[0], e)));
                        }
                        Err(e) => {
                            outcomes.extend(all_failed(&batch[i..], e));
                            break;
                        }
                    }
                }
                outcomes
            }
        };
        answer(&mut batch, outcomes);
    }
}

/// Writes one batch; the outcomes are in the batch's order.
async fn write_batch(store: &Store, batch: &[Pending]) -> Result<Vec<WriteOutcome>, StoreError> {
    // The same id twice in one batch (GitHub and a redelivery racing): the
    // first is the one written, the others are duplicates.
    let mut seen = HashSet::with_capacity(batch.len());
    let firsts: Vec<bool> = batch
        .iter()
        .map(|p| seen.insert(p.delivery.delivery_id.as_str()))
        .collect();
    let unique: Vec<&NewDelivery> = batch
        .iter()
        .zip(&firsts)
        .filter(|(_, first)| **first)
        .map(|(p, _)| &p.delivery)
        .collect();
    let mut tx = store.pool().begin().await?;
    let inserted = insert_deliveries(&mut tx, &unique).await?;
    let jobs: Vec<_> = unique
        .iter()
        .filter(|d| inserted.contains(d.delivery_id.as_str()))
        .filter_map(|d| d.job.as_ref())
        .collect();
    insert_jobs(&mut tx, &jobs, store.now_ms()).await?;
    tx.commit().await?;
    Ok(batch
        .iter()
        .zip(firsts)
        .map(|(p, first)| {
            if first && inserted.contains(p.delivery.delivery_id.as_str()) {
                WriteOutcome::Stored
            } else {
                WriteOutcome::Duplicate
            }
        })
        .collect())
}

/// Inserts the deliveries whose id is new; returns those ids.
async fn insert_deliveries(
    tx: &mut Transaction<'static, Any>,
    deliveries: &[&NewDelivery],
) -> Result<HashSet<String>, StoreError> {
    if deliveries.is_empty() {
        return Ok(HashSet::new());
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
            .bind(d.status.as_str());
    }
    let rows = query.fetch_all(&mut **tx).await?;
    rows.iter()
        .map(|r| Ok(r.try_get::<String, _>("delivery_id")?))
        .collect()
}

async fn insert_jobs(
    tx: &mut Transaction<'static, Any>,
    jobs: &[&NewJob],
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

/// Whether an error can be caused by one delivery of a batch: PostgreSQL
/// refused a value (SQLSTATE class 22), a constraint (23) or a trigger raised
/// an exception (P0001). Not a timeout, a deadlock, a lost connection, a
/// read-only or full database, which every delivery would meet again.
fn concerns_one_delivery(e: &StoreError) -> bool {
    let StoreError::Sqlx(sqlx::Error::Database(db)) = e else {
        return false;
    };
    db.code()
        .is_some_and(|code| code.starts_with("22") || code.starts_with("23") || code == "P0001")
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
    fn connection_trouble_is_not_retried_one_by_one() {
        use super::{StoreError, concerns_one_delivery};
        assert!(!concerns_one_delivery(&StoreError::Sqlx(
            sqlx::Error::PoolTimedOut
        )));
        assert!(!concerns_one_delivery(&StoreError::Sqlx(sqlx::Error::Io(
            std::io::Error::other("connection reset")
        ))));
    }

    #[test]
    fn placeholders_number_rows_then_columns() {
        let mut sql = String::new();
        push_placeholders(&mut sql, 2, 3, ", 0");
        assert_eq!(sql, "($1, $2, $3, 0), ($4, $5, $6, 0)");
    }
}
