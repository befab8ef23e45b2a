//! Comments GitHub said were deleted (`issue_comment.deleted`), kept as
//! tombstones: a reply is stored, then looked for here, so a `created`
//! handled after its `deleted` drops what it stored, in whichever order two
//! workers take the two deliveries. Kept like the commands acted on, not
//! pruned: one small row per deleted comment closer was told of.

use sqlx::{AnyPool, Row};

use super::StoreError;
use crate::clock::Millis;

/// Records that comment `comment_id` was deleted (again: a no-op).
pub async fn record(pool: &AnyPool, comment_id: i64, now: Millis) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO deleted_comments (comment_id, deleted_at) VALUES ($1, $2) \
         ON CONFLICT (comment_id) DO NOTHING",
    )
    .bind(comment_id)
    .bind(now)
    .execute(pool)
    .await?;
    Ok(())
}

/// Whether comment `comment_id` was deleted.
pub async fn is_deleted(pool: &AnyPool, comment_id: i64) -> Result<bool, StoreError> {
    let row = sqlx::query("SELECT COUNT(*) AS n FROM deleted_comments WHERE comment_id = $1")
        .bind(comment_id)
        .fetch_one(pool)
        .await?;
    Ok(row.try_get::<i64, _>("n")? > 0)
}
