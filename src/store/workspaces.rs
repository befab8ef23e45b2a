//! The workspaces (data directories) live closer processes work in. A
//! process with workers says it is alive every [`BEAT`]; one not heard
//! from for [`ALIVE_WITHIN`] is taken for gone. A run's worktree, with the
//! agent's commits not yet pushed, lives in one workspace: its steps wait
//! for that one while it is alive, and any other takes them over once it
//! is gone (decision 254).

use std::time::Duration;

use sqlx::{AnyPool, Row};

use super::StoreError;
use crate::clock::Millis;

/// How often a process says its workspace is alive.
pub const BEAT: Duration = Duration::from_secs(20);

/// How long a workspace counts as alive after it was last heard from:
/// several beats, so one slow write does not hand its runs over.
pub const ALIVE_WITHIN: Duration = Duration::from_secs(75);

/// How long a workspace not heard from is remembered at all.
const FORGOTTEN_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Records that `process` works in workspace `id` at `now`, and forgets
/// rows not heard from for a day (each new pod's data directory is a new
/// one).
pub async fn beat(pool: &AnyPool, id: &str, process: &str, now: Millis) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO workspaces (id, process, seen_at) VALUES ($1, $2, $3) \
         ON CONFLICT (id, process) DO UPDATE SET seen_at = excluded.seen_at",
    )
    .bind(id)
    .bind(process)
    .bind(now)
    .execute(pool)
    .await?;
    sqlx::query("DELETE FROM workspaces WHERE seen_at < $1")
        .bind(now.saturating_sub(FORGOTTEN_AFTER.as_millis() as Millis))
        .execute(pool)
        .await?;
    Ok(())
}

/// Whether any process in workspace `id` was heard from within
/// [`ALIVE_WITHIN`] of `now` (by the clocks of the processes: like the
/// queue's leases, this needs them to agree to well within a minute).
pub async fn alive(pool: &AnyPool, id: &str, now: Millis) -> Result<bool, StoreError> {
    let since = now.saturating_sub(ALIVE_WITHIN.as_millis() as Millis);
    let row = sqlx::query("SELECT COUNT(*) AS n FROM workspaces WHERE id = $1 AND seen_at >= $2")
        .bind(id)
        .bind(since)
        .fetch_one(pool)
        .await?;
    Ok(row.try_get::<i64, _>("n")? > 0)
}

/// `process` leaves workspace `id` (it stops): once no process is left
/// there, its runs are taken over at once rather than after
/// [`ALIVE_WITHIN`].
pub async fn leave(pool: &AnyPool, id: &str, process: &str) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM workspaces WHERE id = $1 AND process = $2")
        .bind(id)
        .bind(process)
        .execute(pool)
        .await?;
    Ok(())
}
