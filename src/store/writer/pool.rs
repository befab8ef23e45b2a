//! The intake writer on PostgreSQL: an async task writing each batch through
//! the shared pool with two multi-row inserts (deliveries, then their jobs),
//! so a batch costs a handful of round trips whatever its size.

use std::collections::HashSet;

use sqlx::{Any, Row, Transaction};

use crate::model::{DeliveryStatus, Named};
use tokio::sync::mpsc;

use super::{MAX_BATCH, Pending, WriteOutcome, all_failed, answer, batch_failed, failed, written};
use crate::store::deliveries::{IGNORED_NO_WORK, NewDelivery, Thread};
use crate::store::jobs::NewJob;
use crate::store::{Store, StoreError, open_work};

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
    let wanted = jobs_wanted(&mut tx, &unique).await?;
    let inserted = insert_deliveries(&mut tx, &unique, &wanted).await?;
    let jobs: Vec<_> = unique
        .iter()
        .zip(&wanted)
        .filter(|(d, wanted)| **wanted && inserted.contains(d.delivery_id.as_str()))
        .filter_map(|(d, _)| d.job.as_ref())
        .collect();
    let ignored: HashSet<&str> = unique
        .iter()
        .zip(&wanted)
        .filter(|(d, wanted)| d.job.is_some() && !**wanted)
        .map(|(d, _)| d.delivery_id.as_str())
        .collect();
    insert_jobs(&mut tx, &jobs, store.now_ms()).await?;
    tx.commit().await?;
    Ok(batch
        .iter()
        .zip(firsts)
        .map(|(p, first)| {
            let d = &p.delivery;
            match first && inserted.contains(d.delivery_id.as_str()) {
                false => WriteOutcome::Duplicate,
                true if ignored.contains(d.delivery_id.as_str()) => WriteOutcome::Ignored,
                true => WriteOutcome::Stored,
            }
        })
        .collect())
}

/// Whether each delivery of `unique` gets its job: one without a condition
/// does; one kept only while closer has work on its thread does when the
/// database says so (one statement for the batch, `store::open_work`) or an
/// earlier delivery of this batch about the same thread gets a job.
async fn jobs_wanted(
    tx: &mut Transaction<'static, Any>,
    unique: &[&NewDelivery],
) -> Result<Vec<bool>, StoreError> {
    let with_work = threads_with_work(tx, unique).await?;
    let mut keys = HashSet::new();
    Ok(unique
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let Some(job) = &d.job else { return false };
            let wanted = d.only_with_work.is_none()
                || with_work.contains(&(i as i64))
                || keys.contains(job.key.as_str());
            if wanted {
                keys.insert(job.key.as_str());
            }
            wanted
        })
        .collect())
}

/// The positions in `unique` of the conditional deliveries whose thread has
/// work in the database.
async fn threads_with_work(
    tx: &mut Transaction<'static, Any>,
    unique: &[&NewDelivery],
) -> Result<HashSet<i64>, StoreError> {
    let conditional: Vec<(i64, &str, &Thread)> = unique
        .iter()
        .enumerate()
        .filter_map(|(i, d)| {
            Some((
                i as i64,
                d.job.as_ref()?.key.as_str(),
                d.only_with_work.as_ref()?,
            ))
        })
        .collect();
    if conditional.is_empty() {
        return Ok(HashSet::new());
    }
    let mut sql = String::from("SELECT t.i FROM (VALUES ");
    for r in 0..conditional.len() {
        let p = r * 4;
        let sep = if r > 0 { ", " } else { "" };
        sql.push_str(&format!(
            "{sep}(${}::BIGINT, ${}::TEXT, ${}::TEXT, ${}::BIGINT)",
            p + 1,
            p + 2,
            p + 3,
            p + 4
        ));
    }
    sql.push_str(") AS t (i, k, repo, n) WHERE ");
    sql.push_str(&open_work::condition("t.k", "t.repo", "t.n"));
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for (i, key, thread) in &conditional {
        query = query
            .bind(*i)
            .bind(*key)
            .bind(thread.repository.as_str())
            .bind(thread.number);
    }
    let rows = query.fetch_all(&mut **tx).await?;
    rows.iter().map(|r| Ok(r.try_get::<i64, _>("i")?)).collect()
}

/// Inserts the deliveries whose id is new; returns those ids.
async fn insert_deliveries(
    tx: &mut Transaction<'static, Any>,
    deliveries: &[&NewDelivery],
    wanted: &[bool],
) -> Result<HashSet<String>, StoreError> {
    if deliveries.is_empty() {
        return Ok(HashSet::new());
    }
    let mut sql = String::from(
        "INSERT INTO deliveries (delivery_id, event, action, installation_id, repository, \
         payload, payload_encoding, received_at, status, outcome) VALUES ",
    );
    push_placeholders(&mut sql, deliveries.len(), 10, "");
    sql.push_str(" ON CONFLICT (delivery_id) DO NOTHING RETURNING delivery_id");
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for (d, wanted) in deliveries.iter().zip(wanted) {
        let (status, outcome) = match (&d.job, wanted) {
            (Some(_), false) => (DeliveryStatus::Ignored, Some(IGNORED_NO_WORK)),
            _ => (d.status, None),
        };
        let (payload, encoding) = d.stored_payload(*wanted);
        query = query
            .bind(d.delivery_id.as_str())
            .bind(d.event.as_str())
            .bind(d.action.as_deref())
            .bind(d.installation_id)
            .bind(d.repository.as_deref())
            .bind(payload)
            .bind(encoding.as_str())
            .bind(d.received_at)
            .bind(status.as_str())
            .bind(outcome);
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
