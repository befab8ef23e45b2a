//! Runs whose repository's name passed to another repository.
//!
//! A run is found by its repository's name, and a name can change hands: an
//! owner renames or deletes their account (or the repository) and somebody,
//! perhaps a stranger, creates a repository under the freed name. GitHub's
//! repository id stays with the repository, so a run stored with one id is
//! not the run of a repository that now holds the name with another; nor
//! is a run created before that repository was. Such runs are set aside:
//! renamed to `owner/name~<run id>` (`~` is in no GitHub name, so no event
//! finds them; [`crate::model::SET_ASIDE_MARK`]), stopped if they had not
//! ended, and moved to a new generation so that no step in flight writes
//! them again; nothing is written to GitHub for them (the repository they
//! worked for is not at that name any more). Their rows stay with the
//! other ended runs. A run stored without an id (before closer kept it) and
//! created after the repository was takes that repository's id when it is
//! started again ([`adopt_id`]).

use sqlx::any::AnyArguments;
use sqlx::query::Query;
use sqlx::{AnyPool, Row};

use super::StoreError;
use super::runs::ended_states_sql;
use crate::clock::Millis;
use crate::model::{Outcome, RepoName, RepositoryId, RunId};

type AnyQuery<'q> = Query<'q, sqlx::Any, AnyArguments>;

/// Why a run set aside while it was open was stopped.
pub const SET_ASIDE: &str = "its repository's name now belongs to another repository";

/// The repository an event names: its name, GitHub's id, and when GitHub
/// says it was created, when the event tells.
#[derive(Debug, Clone, Copy)]
pub struct Holder<'a> {
    pub name: &'a RepoName,
    pub id: RepositoryId,
    pub created_at: Option<Millis>,
}

/// Sets aside the runs stored under `holder`'s name that are not its runs,
/// and answers them. Knowing when the repository was created, those are the
/// runs created before it, of another id or of none: a delivery from the
/// repository that had the name, held back and arriving late, sets nothing
/// of the new one's aside. Not knowing, those of another id.
pub async fn set_aside(
    pool: &AnyPool,
    holder: Holder<'_>,
    now: Millis,
) -> Result<Vec<RunId>, StoreError> {
    // A read first: nearly every event finds nothing to set aside, and an
    // UPDATE, even of no row, takes SQLite's write lock.
    let any = format!(
        "SELECT id FROM runs WHERE repository = $1 AND {} LIMIT 1",
        not_holders(&holder)
    );
    let probe = bind_holder(sqlx::query(sqlx::AssertSqlSafe(any)), &holder);
    if probe.fetch_optional(pool).await?.is_none() {
        return Ok(Vec::new());
    }
    let (ended, mark) = (ended_states_sql(), crate::model::SET_ASIDE_MARK);
    let sql = format!(
        "UPDATE runs SET repository = repository || '{mark}' || id, \
         outcome = CASE WHEN state IN ({ended}) THEN outcome ELSE $4 END, \
         state = CASE WHEN state IN ({ended}) THEN state ELSE 'stopped' END, \
         generation = generation + 1, updated_at = $5 \
         WHERE repository = $1 AND {} RETURNING id",
        not_holders(&holder)
    );
    let stopped = Outcome::Stopped(SET_ASIDE.to_owned()).to_string();
    let update = bind_holder(sqlx::query(sqlx::AssertSqlSafe(sql)), &holder)
        .bind(stopped)
        .bind(now);
    let rows = update.fetch_all(pool).await?;
    rows.iter()
        .map(|row| Ok(RunId::from_stored(row.try_get::<String, _>("id")?)))
        .collect()
}

/// The SQL condition for a run that is not `holder`'s, with the id `$2`
/// and the creation time `$3` ([`bind_holder`]). Postgres refuses a bound
/// parameter the statement does not use: without a creation time, `$3` is
/// compared with itself.
fn not_holders(holder: &Holder<'_>) -> &'static str {
    match holder.created_at {
        Some(_) => "(repository_id IS NULL OR repository_id <> $2) AND created_at < $3",
        None => "repository_id IS NOT NULL AND repository_id <> $2 AND $3 = $3",
    }
}

/// Binds the name (`$1`), the id (`$2`) and the creation time (`$3`; 0
/// when unknown, where the condition does not compare it).
fn bind_holder<'q>(query: AnyQuery<'q>, holder: &Holder<'_>) -> AnyQuery<'q> {
    query
        .bind(holder.name.to_string())
        .bind(holder.id.0)
        .bind(holder.created_at.unwrap_or(0))
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
