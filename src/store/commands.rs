//! Commands acted on, by comment id and a digest of the comment's text: a
//! command comment is acted on at most once, whatever delivery carries it
//! (a redelivery, or a captured delivery replayed under a new delivery id).
//! An edit is a new text, so the commands it adds are acted on.

use sqlx::{AnyPool, Row};

use super::StoreError;
use crate::clock::Millis;

/// Whether the commands of this comment text were acted on already.
pub async fn handled(pool: &AnyPool, comment_id: i64, digest: &str) -> Result<bool, StoreError> {
    let row = sqlx::query(
        "SELECT COUNT(*) AS n FROM handled_commands WHERE comment_id = $1 AND digest = $2",
    )
    .bind(comment_id)
    .bind(digest)
    .fetch_one(pool)
    .await?;
    Ok(row.try_get::<i64, _>("n")? > 0)
}

/// Records that the commands of this comment text were acted on.
pub async fn mark_handled(
    pool: &AnyPool,
    comment_id: i64,
    digest: &str,
    now: Millis,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO handled_commands (comment_id, digest, handled_at) VALUES ($1, $2, $3) \
         ON CONFLICT (comment_id, digest) DO NOTHING",
    )
    .bind(comment_id)
    .bind(digest)
    .bind(now)
    .execute(pool)
    .await?;
    Ok(())
}
