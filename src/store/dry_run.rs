//! Where `closer serve --dry-run` keeps the GitHub writes it did not send, so
//! an operator can read what the bot would have done (`dry_run_writes`).
//!
//! The GitHub client's recorder hook is synchronous; the recorder hands each
//! write to a task that stores it, so a slow database never blocks a request.

use sqlx::{AnyPool, Row};
use tokio::sync::mpsc;

use super::{Store, StoreError};
use crate::github::{RecordedWrite, WriteRecorder};

/// Stores recorded writes in the database.
#[derive(Debug)]
pub struct DbRecorder {
    tx: mpsc::UnboundedSender<RecordedWrite>,
}

impl DbRecorder {
    /// Starts the storing task; it ends when the recorder is dropped.
    pub fn spawn(store: Store) -> (DbRecorder, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::unbounded_channel::<RecordedWrite>();
        let task = tokio::spawn(async move {
            while let Some(write) = rx.recv().await {
                if let Err(e) = insert(&store, &write).await {
                    tracing::warn!(error = %e, method = %write.method, path = %write.path, "dry-run write not recorded");
                }
            }
        });
        (DbRecorder { tx }, task)
    }
}

impl WriteRecorder for DbRecorder {
    fn record(&self, method: &str, path: &str, body: Option<&str>) {
        let _ = self.tx.send(RecordedWrite {
            method: method.to_owned(),
            path: path.to_owned(),
            body: body.map(str::to_owned),
        });
    }
}

async fn insert(store: &Store, write: &RecordedWrite) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO dry_run_writes (recorded_at, method, path, body) VALUES ($1, $2, $3, $4)",
    )
    .bind(store.now_ms())
    .bind(&write.method)
    .bind(&write.path)
    .bind(write.body.as_deref())
    .execute(store.pool())
    .await?;
    Ok(())
}

/// Every recorded write, oldest first.
pub async fn list(pool: &AnyPool) -> Result<Vec<RecordedWrite>, StoreError> {
    let rows = sqlx::query("SELECT method, path, body FROM dry_run_writes ORDER BY id")
        .fetch_all(pool)
        .await?;
    rows.iter()
        .map(|r| {
            Ok(RecordedWrite {
                method: r.try_get("method")?,
                path: r.try_get("path")?,
                body: r.try_get("body")?,
            })
        })
        .collect()
}

/// Deletes the writes recorded before `before`.
pub async fn prune(pool: &AnyPool, before: i64) -> Result<u64, StoreError> {
    let done = sqlx::query("DELETE FROM dry_run_writes WHERE recorded_at < $1")
        .bind(before)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::StoreOptions;

    #[tokio::test]
    async fn recorded_writes_land_in_the_database_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("t.db").display());
        let store = Store::open(&StoreOptions::new(url), crate::clock::system())
            .await
            .unwrap();
        let (recorder, task) = DbRecorder::spawn(store.clone());
        recorder.record(
            "POST",
            "/repos/o/r/issues/1/comments",
            Some("{\"body\":\"hi\"}"),
        );
        recorder.record("DELETE", "/repos/o/r/issues/1/labels/x", None);
        drop(recorder);
        task.await.unwrap();
        let writes = list(store.pool()).await.unwrap();
        assert_eq!(writes.len(), 2);
        assert_eq!(writes[0].method, "POST");
        assert_eq!(writes[0].body.as_deref(), Some("{\"body\":\"hi\"}"));
        assert_eq!(writes[1].path, "/repos/o/r/issues/1/labels/x");
    }
}
