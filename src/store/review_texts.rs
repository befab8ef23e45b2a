//! The words of review comments on closer's pull requests, kept from their
//! webhooks: what a person allowed to steer wrote (`created`), or changed
//! (`edited`, by such a person); and closer's own thread replies, as it
//! posted them (version `""`: never replaced, since no webhook of closer's
//! own comments is kept). A review thread's prompt reads its comments from
//! here rather than as GitHub shows them now: anyone who can edit a
//! comment (every writer of the repository) may have changed it since, and
//! GitHub's REST API does not say who did.

use std::collections::HashMap;

use sqlx::{AnyPool, Row};

use super::StoreError;
use crate::clock::Millis;
use crate::model::RunId;

/// One review comment's words, as kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptText {
    pub comment_id: i64,
    pub author: String,
    pub body: String,
    /// The comment's `updated_at` as GitHub sent it: a text is replaced
    /// only by one at least as new.
    pub version: String,
}

/// Keeps `text` for the comment, unless a newer text of it is kept
/// already (deliveries can arrive out of order). `true` when it was kept.
pub async fn keep(
    pool: &AnyPool,
    run_id: &RunId,
    text: &KeptText,
    now: Millis,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO review_texts (run_id, comment_id, author, body, version, kept_at) \
         VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (run_id, comment_id) DO UPDATE \
         SET author = excluded.author, body = excluded.body, \
             version = excluded.version, kept_at = excluded.kept_at \
         WHERE review_texts.version <= excluded.version",
    )
    .bind(run_id.as_str())
    .bind(text.comment_id)
    .bind(&text.author)
    .bind(&text.body)
    .bind(&text.version)
    .bind(now)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The kept words of a run's review comments, by comment id.
pub async fn of_run(pool: &AnyPool, run_id: &RunId) -> Result<HashMap<u64, String>, StoreError> {
    let rows = sqlx::query("SELECT comment_id, body FROM review_texts WHERE run_id = $1")
        .bind(run_id.as_str())
        .fetch_all(pool)
        .await?;
    let mut texts = HashMap::with_capacity(rows.len());
    for row in rows {
        let id: i64 = row.try_get("comment_id")?;
        // Review comment ids are positive; a negative one was never kept.
        if let Ok(id) = u64::try_from(id) {
            texts.insert(id, row.try_get("body")?);
        }
    }
    Ok(texts)
}
