//! Issue events acted on, by a key a replay shares and a new event does
//! not (the engine builds it from the issue's `updated_at`): an assignment
//! delivery captured and replayed under a new delivery id starts nothing.

use sqlx::{AnyPool, Row};

use super::StoreError;
use crate::clock::Millis;

/// Whether the event with this key was acted on already.
pub async fn handled(pool: &AnyPool, key: &str) -> Result<bool, StoreError> {
    let row = sqlx::query("SELECT COUNT(*) AS n FROM handled_events WHERE event_key = $1")
        .bind(key)
        .fetch_one(pool)
        .await?;
    Ok(row.try_get::<i64, _>("n")? > 0)
}

/// Records that the event with this key was acted on.
pub async fn mark_handled(pool: &AnyPool, key: &str, now: Millis) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO handled_events (event_key, handled_at) VALUES ($1, $2) \
         ON CONFLICT (event_key) DO NOTHING",
    )
    .bind(key)
    .bind(now)
    .execute(pool)
    .await?;
    Ok(())
}
