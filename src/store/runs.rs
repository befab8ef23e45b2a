//! Runs, iterations and the maintainer's replies: the engine's persistent
//! state. One run per (repository, issue); a retry reuses the row and keeps
//! its iterations. Every state change goes through [`save`], so the row is
//! always the whole truth about a run.

use serde::{Deserialize, Serialize};
use sqlx::any::{AnyArguments, AnyRow};
use sqlx::query::Query;
use sqlx::{AnyPool, Row};

use super::StoreError;
use crate::clock::Millis;

/// A run as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRow {
    pub id: String,
    pub installation_id: i64,
    pub repository: String,
    pub issue_number: i64,
    pub state: String,
    pub phase: String,
    pub completion_type: String,
    pub task_type: Option<String>,
    pub stage: i64,
    pub iteration: i64,
    pub max_iterations: i64,
    pub branch: String,
    pub base_commit: Option<String>,
    pub clone_url: Option<String>,
    pub default_branch: Option<String>,
    pub pull_request: Option<i64>,
    pub status_comment_id: Option<i64>,
    pub tokens_used: i64,
    pub cost_usd: f64,
    pub outcome: Option<String>,
    /// JSON the engine owns (config snapshot, labels, notes).
    pub data: String,
    pub created_at: Millis,
    pub updated_at: Millis,
}

type AnyQuery<'q> = Query<'q, sqlx::Any, AnyArguments>;

const COLUMNS: &str = "id, installation_id, repository, issue_number, state, phase, \
    completion_type, task_type, stage, iteration, max_iterations, branch, base_commit, \
    clone_url, default_branch, pull_request, status_comment_id, tokens_used, cost_usd, \
    outcome, data, created_at, updated_at";

fn from_row(row: &AnyRow) -> Result<RunRow, sqlx::Error> {
    Ok(RunRow {
        id: row.try_get("id")?,
        installation_id: row.try_get("installation_id")?,
        repository: row.try_get("repository")?,
        issue_number: row.try_get("issue_number")?,
        state: row.try_get("state")?,
        phase: row.try_get("phase")?,
        completion_type: row.try_get("completion_type")?,
        task_type: row.try_get("task_type")?,
        stage: row.try_get("stage")?,
        iteration: row.try_get("iteration")?,
        max_iterations: row.try_get("max_iterations")?,
        branch: row.try_get("branch")?,
        base_commit: row.try_get("base_commit")?,
        clone_url: row.try_get("clone_url")?,
        default_branch: row.try_get("default_branch")?,
        pull_request: row.try_get("pull_request")?,
        status_comment_id: row.try_get("status_comment_id")?,
        tokens_used: row.try_get("tokens_used")?,
        cost_usd: row.try_get("cost_usd")?,
        outcome: row.try_get("outcome")?,
        data: row.try_get("data")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

/// Inserts a run unless the issue already has one; returns the issue's run
/// and whether it was created now.
pub async fn insert_or_get(pool: &AnyPool, run: &RunRow) -> Result<(RunRow, bool), StoreError> {
    // Mutable columns first, in the order `bind_mutable` binds them ($1-$19).
    let query = sqlx::query(
        "INSERT INTO runs (state, phase, completion_type, task_type, stage, iteration, \
         max_iterations, branch, base_commit, clone_url, default_branch, pull_request, \
         status_comment_id, tokens_used, cost_usd, outcome, data, updated_at, installation_id, \
         id, repository, issue_number, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, \
         $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23) \
         ON CONFLICT (repository, issue_number) DO NOTHING",
    );
    let inserted = bind_mutable(query, run)
        .bind(&run.id)
        .bind(&run.repository)
        .bind(run.issue_number)
        .bind(run.created_at)
        .execute(pool)
        .await?
        .rows_affected()
        == 1;
    let stored = by_issue(pool, &run.repository, run.issue_number)
        .await?
        .ok_or_else(|| StoreError::Sqlx(sqlx::Error::RowNotFound))?;
    Ok((stored, inserted))
}

pub async fn get(pool: &AnyPool, id: &str) -> Result<Option<RunRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM runs WHERE id = $1");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .fetch_optional(pool)
        .await?;
    Ok(row.map(|r| from_row(&r)).transpose()?)
}

pub async fn by_issue(
    pool: &AnyPool,
    repository: &str,
    issue_number: i64,
) -> Result<Option<RunRow>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM runs WHERE repository = $1 AND issue_number = $2");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(repository)
        .bind(issue_number)
        .fetch_optional(pool)
        .await?;
    Ok(row.map(|r| from_row(&r)).transpose()?)
}

/// Runs in any of `states`, oldest first.
pub async fn in_states(pool: &AnyPool, states: &[&str]) -> Result<Vec<RunRow>, StoreError> {
    let mut out = Vec::new();
    for state in states {
        let sql = format!("SELECT {COLUMNS} FROM runs WHERE state = $1 ORDER BY created_at");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(*state)
            .fetch_all(pool)
            .await?;
        for row in rows {
            out.push(from_row(&row)?);
        }
    }
    Ok(out)
}

/// The update of every mutable column; `$guard` narrows which rows it may touch.
macro_rules! update_run_sql {
    ($guard:literal) => {
        concat!(
            "UPDATE runs SET state = $1, phase = $2, completion_type = $3, task_type = $4, ",
            "stage = $5, iteration = $6, max_iterations = $7, branch = $8, base_commit = $9, ",
            "clone_url = $10, default_branch = $11, pull_request = $12, status_comment_id = $13, ",
            "tokens_used = $14, cost_usd = $15, outcome = $16, data = $17, updated_at = $18, ",
            "installation_id = $19 WHERE id = $20",
            $guard
        )
    };
}

/// Writes every mutable column of a run.
pub async fn save(pool: &AnyPool, run: &RunRow) -> Result<(), StoreError> {
    update(pool, run, update_run_sql!("")).await?;
    Ok(())
}

/// Like [`save`], but only while the stored run is not `stopped` (a person
/// closed the issue or said `/closer stop` meanwhile); writing `stopped`
/// always goes through. `false` when nothing was written.
pub async fn save_unless_stopped(pool: &AnyPool, run: &RunRow) -> Result<bool, StoreError> {
    let sql = if run.state == "stopped" {
        update_run_sql!("")
    } else {
        update_run_sql!(" AND state <> 'stopped'")
    };
    Ok(update(pool, run, sql).await? == 1)
}

/// Stops a run that is not over yet by writing only its state, outcome and
/// time, so that what a step in flight wrote a moment before (the
/// iteration) is kept; from then on [`save_unless_stopped`] refuses that
/// step's writes. `false` when the run had ended meanwhile (done, failed or
/// already stopped): nothing is written.
pub async fn mark_stopped(
    pool: &AnyPool,
    id: &str,
    outcome: &str,
    now: Millis,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "UPDATE runs SET state = 'stopped', outcome = $1, updated_at = $2 \
         WHERE id = $3 AND state NOT IN ('done', 'failed', 'stopped')",
    )
    .bind(outcome)
    .bind(now)
    .bind(id)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// The stored state of a run (`None` when there is no such run): the cheap
/// read the stop watch makes every few seconds.
pub async fn state_of(pool: &AnyPool, id: &str) -> Result<Option<String>, StoreError> {
    let row = sqlx::query("SELECT state FROM runs WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await?;
    Ok(row.map(|r| r.try_get("state")).transpose()?)
}

async fn update(pool: &AnyPool, run: &RunRow, sql: &'static str) -> Result<u64, StoreError> {
    let done = bind_mutable(sqlx::query(sql), run)
        .bind(&run.id)
        .execute(pool)
        .await?;
    Ok(done.rows_affected())
}

/// Binds the columns a run changes over its life, as `$1`–`$19`.
fn bind_mutable<'q>(query: AnyQuery<'q>, run: &'q RunRow) -> AnyQuery<'q> {
    query
        .bind(&run.state)
        .bind(&run.phase)
        .bind(&run.completion_type)
        .bind(run.task_type.as_deref())
        .bind(run.stage)
        .bind(run.iteration)
        .bind(run.max_iterations)
        .bind(&run.branch)
        .bind(run.base_commit.as_deref())
        .bind(run.clone_url.as_deref())
        .bind(run.default_branch.as_deref())
        .bind(run.pull_request)
        .bind(run.status_comment_id)
        .bind(run.tokens_used)
        .bind(run.cost_usd)
        .bind(run.outcome.as_deref())
        .bind(&run.data)
        .bind(run.updated_at)
        .bind(run.installation_id)
}

/// One iteration as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterationRow {
    pub run_id: String,
    pub number: i64,
    pub prompt: String,
    pub agent: Option<String>,
    pub judgment: Option<String>,
    pub decision: Option<String>,
    pub started_at: Millis,
    pub finished_at: Option<Millis>,
}

/// Records that an iteration started with this prompt (again, after a crash:
/// the prompt is replaced and the result cleared).
pub async fn start_iteration(
    pool: &AnyPool,
    run_id: &str,
    number: i64,
    prompt: &str,
    now: Millis,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO iterations (run_id, number, prompt, started_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (run_id, number) DO UPDATE SET prompt = excluded.prompt, \
         started_at = excluded.started_at, agent = NULL, judgment = NULL, decision = NULL, \
         finished_at = NULL",
    )
    .bind(run_id)
    .bind(number)
    .bind(prompt)
    .bind(now)
    .execute(pool)
    .await?;
    Ok(())
}

/// Records an iteration's result.
pub async fn finish_iteration(
    pool: &AnyPool,
    run_id: &str,
    number: i64,
    agent: &str,
    judgment: &str,
    decision: &str,
    now: Millis,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE iterations SET agent = $1, judgment = $2, decision = $3, finished_at = $4 \
         WHERE run_id = $5 AND number = $6",
    )
    .bind(agent)
    .bind(judgment)
    .bind(decision)
    .bind(now)
    .bind(run_id)
    .bind(number)
    .execute(pool)
    .await?;
    Ok(())
}

pub async fn iterations(pool: &AnyPool, run_id: &str) -> Result<Vec<IterationRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT run_id, number, prompt, agent, judgment, decision, started_at, finished_at \
         FROM iterations WHERE run_id = $1 ORDER BY number",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(IterationRow {
                run_id: r.try_get("run_id")?,
                number: r.try_get("number")?,
                prompt: r.try_get("prompt")?,
                agent: r.try_get("agent")?,
                judgment: r.try_get("judgment")?,
                decision: r.try_get("decision")?,
                started_at: r.try_get("started_at")?,
                finished_at: r.try_get("finished_at")?,
            })
        })
        .collect()
}

/// A maintainer's reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageRow {
    pub comment_id: i64,
    pub author: String,
    pub body: String,
    pub used_in: Option<i64>,
}

/// Stores a reply once per comment; `true` when it is new.
pub async fn add_message(
    pool: &AnyPool,
    run_id: &str,
    comment_id: i64,
    author: &str,
    body: &str,
    now: Millis,
) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO messages (run_id, comment_id, author, body, created_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (run_id, comment_id) DO NOTHING",
    )
    .bind(run_id)
    .bind(comment_id)
    .bind(author)
    .bind(body)
    .bind(now)
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Every reply of a run, oldest first.
pub async fn messages(pool: &AnyPool, run_id: &str) -> Result<Vec<MessageRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT comment_id, author, body, used_in FROM messages WHERE run_id = $1 ORDER BY id",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(MessageRow {
                comment_id: r.try_get("comment_id")?,
                author: r.try_get("author")?,
                body: r.try_get("body")?,
                used_in: r.try_get("used_in")?,
            })
        })
        .collect()
}

/// Marks the replies `comment_ids` (those a prompt carried) as used by
/// `iteration`; a reply stored meanwhile stays unused for the next prompt.
pub async fn mark_messages_used_by_id(
    pool: &AnyPool,
    run_id: &str,
    comment_ids: &[i64],
    iteration: i64,
) -> Result<(), StoreError> {
    for comment_id in comment_ids {
        sqlx::query(
            "UPDATE messages SET used_in = $1 \
             WHERE run_id = $2 AND comment_id = $3 AND used_in IS NULL",
        )
        .bind(iteration)
        .bind(run_id)
        .bind(*comment_id)
        .execute(pool)
        .await?;
    }
    Ok(())
}
