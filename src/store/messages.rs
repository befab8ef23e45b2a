//! The replies a run's prompts carry: the author answering closer's
//! question, and the words of users with the permission to steer (issue
//! comments, pull request reviews and comments), each stored once per
//! comment with the standing it was let in with, and marked with the
//! iteration whose prompt carried it.

use serde::{Deserialize, Serialize};
use sqlx::{AnyPool, Row};

use super::StoreError;
use super::runs::small;
use crate::clock::Millis;
use crate::model::{Named, RunId};

/// A reply stored for the run's prompts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageRow {
    pub comment_id: i64,
    pub author: String,
    pub body: String,
    /// The iteration whose prompt carried it.
    pub used_in: Option<u32>,
    /// How it was let in; `None` for a reply stored before closer kept it.
    #[serde(default)]
    pub standing: Option<Standing>,
}

/// With what standing a reply was let in, decided by the event that
/// brought it (a login compared later may have changed hands).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// The author (their answer to closer's question, whatever
    /// their permission).
    Author,
    /// A user with the permission to steer the run.
    Steering,
}

impl Named for Standing {
    const ALL: &'static [Standing] = &[Standing::Author, Standing::Steering];

    fn as_str(self) -> &'static str {
        match self {
            Standing::Author => "author",
            Standing::Steering => "steering",
        }
    }
}

/// A reply to store: the comment it came in and who wrote it, with what
/// standing.
pub struct NewMessage<'a> {
    pub comment_id: i64,
    pub author: &'a str,
    pub standing: Standing,
    pub body: &'a str,
}

/// Stores a reply once per comment; `true` when it is new.
pub async fn add(
    pool: &AnyPool,
    run_id: &RunId,
    message: NewMessage<'_>,
    now: Millis,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO messages (run_id, comment_id, author, standing, body, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (run_id, comment_id) DO NOTHING",
    )
    .bind(run_id.as_str())
    .bind(message.comment_id)
    .bind(message.author)
    .bind(message.standing.as_str())
    .bind(message.body)
    .bind(now)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Removes the reply `comment_id` if no prompt carried it yet; `true`
/// when it did.
pub async fn drop_unused(
    pool: &AnyPool,
    run_id: &RunId,
    comment_id: i64,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "DELETE FROM messages WHERE run_id = $1 AND comment_id = $2 AND used_in IS NULL",
    )
    .bind(run_id.as_str())
    .bind(comment_id)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Removes the reply `comment_id` from whichever run stored it (an issue's
/// comment, or one on a run's pull request: GitHub numbers them in one
/// sequence, unique across repositories, so a rename the runs have not
/// followed yet changes nothing), if no prompt carried it yet; `true` when
/// it did.
pub async fn drop_unused_comment(pool: &AnyPool, comment_id: i64) -> Result<bool, StoreError> {
    let done = sqlx::query("DELETE FROM messages WHERE comment_id = $1 AND used_in IS NULL")
        .bind(comment_id)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() > 0)
}

/// Every reply of a run, oldest first.
pub async fn of_run(pool: &AnyPool, run_id: &RunId) -> Result<Vec<MessageRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT comment_id, author, body, used_in, standing FROM messages WHERE run_id = $1 \
         ORDER BY id",
    )
    .bind(run_id.as_str())
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(MessageRow {
                comment_id: r.try_get("comment_id")?,
                author: r.try_get("author")?,
                body: r.try_get("body")?,
                used_in: r
                    .try_get::<Option<i64>, _>("used_in")?
                    .map(|n| small("messages.used_in", n))
                    .transpose()?,
                standing: r
                    .try_get::<Option<String>, _>("standing")?
                    .map(|s| Standing::read("messages.standing", &s))
                    .transpose()?,
            })
        })
        .collect()
}

/// Marks the replies `comment_ids` (those a prompt carried) as used by
/// `iteration`; a reply stored meanwhile stays unused for the next prompt.
pub async fn mark_used_by_id(
    pool: &AnyPool,
    run_id: &RunId,
    comment_ids: &[i64],
    iteration: u32,
) -> Result<(), StoreError> {
    for comment_id in comment_ids {
        sqlx::query(
            "UPDATE messages SET used_in = $1 \
             WHERE run_id = $2 AND comment_id = $3 AND used_in IS NULL",
        )
        .bind(i64::from(iteration))
        .bind(run_id.as_str())
        .bind(*comment_id)
        .execute(pool)
        .await?;
    }
    Ok(())
}
