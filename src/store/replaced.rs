//! Runs whose repository's name passed to another repository.
//!
//! A run is found by its repository's name, and a name can change hands: an
//! owner renames or deletes their account (or the repository) and somebody,
//! perhaps a stranger, creates a repository under the freed name. GitHub's
//! repository id stays with the repository, so a run stored with one id is
//! not the run of a repository that now holds the name with another. Such
//! runs are set aside: renamed to a name no event carries
//! (`owner/name~<run id>`, never a GitHub name), and stopped if they had
//! not ended, with nothing written to GitHub (the repository they worked
//! for is not at that name any more). Their rows stay for retention to
//! prune with the other ended runs. A run stored without an id (before
//! closer kept it) takes the id of the repository that starts it again
//! ([`adopt_id`]).

use sqlx::{AnyPool, Row};

use super::StoreError;
use super::runs::ended_states_sql;
use crate::clock::Millis;
use crate::model::{Outcome, RepoName, RepositoryId, RunId};

/// Why a run set aside while it was open was stopped.
pub const SET_ASIDE: &str = "its repository's name now belongs to another repository";

/// Sets aside the runs stored under `name` (whatever its case) for a
/// repository other than `id`; answers the runs set aside.
pub async fn set_aside(
    pool: &AnyPool,
    name: &RepoName,
    id: RepositoryId,
    now: Millis,
) -> Result<Vec<RunId>, StoreError> {
    let rows = sqlx::query(
        "SELECT id FROM runs WHERE LOWER(repository) = LOWER($1) \
         AND repository_id IS NOT NULL AND repository_id <> $2",
    )
    .bind(name.to_string())
    .bind(id.0)
    .fetch_all(pool)
    .await?;
    let ended = ended_states_sql();
    let sql = format!(
        "UPDATE runs SET repository = $1, \
         outcome = CASE WHEN state IN ({ended}) THEN outcome ELSE $2 END, \
         state = CASE WHEN state IN ({ended}) THEN state ELSE 'stopped' END, \
         updated_at = $3 WHERE id = $4 AND repository_id <> $5"
    );
    let stopped = Outcome::Stopped(SET_ASIDE.to_owned()).to_string();
    let mut set_aside = Vec::with_capacity(rows.len());
    for row in rows {
        let run = RunId::from_stored(row.try_get::<String, _>("id")?);
        let aside = format!("{name}~{run}");
        sqlx::query(sqlx::AssertSqlSafe(sql.as_str()))
            .bind(aside)
            .bind(&stopped)
            .bind(now)
            .bind(run.as_str())
            .bind(id.0)
            .execute(pool)
            .await?;
        set_aside.push(run);
    }
    Ok(set_aside)
}

/// Gives a run stored without a repository id the id `id`; a run that has
/// one keeps it.
pub async fn adopt_id(pool: &AnyPool, run: &RunId, id: RepositoryId) -> Result<(), StoreError> {
    sqlx::query("UPDATE runs SET repository_id = $1 WHERE id = $2 AND repository_id IS NULL")
        .bind(id.0)
        .bind(run.as_str())
        .execute(pool)
        .await?;
    Ok(())
}
