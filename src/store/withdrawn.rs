//! Stops the open runs of repositories closer can no longer reach: the App
//! uninstalled or suspended, repositories taken out of its installation, a
//! repository deleted ([`Withdrawal`]). Left open, such a run's steps would
//! fail on every GitHub call until their job died, and an agent at work
//! would go on spending on a repository nobody can receive its work.
//!
//! Each run is stopped with the withdrawal's reason as its outcome, as
//! `/closer stop` stops one (`runs::mark_stopped`: state, outcome and time
//! only, in the same generation): a step in flight saves nothing more but
//! what it spent, and the agent's watch (`engine/run/interrupt.rs`) ends its
//! agent within seconds. Nothing is written to GitHub: closer's access is
//! gone, and the engine leaves such runs alone (`Run::withdrawn`). Ended
//! runs stay as they are, and a stopped run can be retried once the App is
//! back.

use sqlx::{AnyPool, Row};

use super::StoreError;
use super::runs::ended_states_sql;
use crate::clock::Millis;
use crate::model::{InstallationId, RepoName, RepositoryId, RunId, Withdrawal};

/// The runs a withdrawal covers.
#[derive(Debug, Clone, Copy)]
pub enum Scope<'a> {
    /// Every run of the installation.
    Installation(InstallationId),
    /// The installation's runs of one repository: by its id when known
    /// (whatever name the run has: a rename not followed yet), and runs
    /// stored without an id (before closer kept it) by the name, in any
    /// case; a run of another repository that once had the name is not
    /// this one's. Without the id, by the name.
    Repository {
        installation: InstallationId,
        name: &'a RepoName,
        id: Option<RepositoryId>,
    },
}

/// Stops the open runs in `scope` for `why`; answers the runs stopped.
pub async fn stop_runs(
    pool: &AnyPool,
    scope: Scope<'_>,
    why: Withdrawal,
    now: Millis,
) -> Result<Vec<RunId>, StoreError> {
    let which = match scope {
        Scope::Installation(_) => "",
        Scope::Repository { id: None, .. } => " AND LOWER(repository) = LOWER($4)",
        Scope::Repository { id: Some(_), .. } => {
            " AND (repository_id = $5 \
             OR (repository_id IS NULL AND LOWER(repository) = LOWER($4)))"
        }
    };
    let sql = format!(
        "UPDATE runs SET state = 'stopped', outcome = $1, updated_at = $2 \
         WHERE installation_id = $3 AND state NOT IN ({}){which} RETURNING id",
        ended_states_sql()
    );
    let query = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(why.outcome().to_string())
        .bind(now);
    let query = match scope {
        Scope::Installation(installation) => query.bind(installation.0),
        Scope::Repository {
            installation,
            name,
            id,
        } => {
            let query = query.bind(installation.0).bind(name.to_string());
            match id {
                Some(id) => query.bind(id.0),
                None => query,
            }
        }
    };
    let rows = query.fetch_all(pool).await?;
    rows.iter()
        .map(|row| Ok(RunId::from_stored(row.try_get::<String, _>("id")?)))
        .collect()
}
