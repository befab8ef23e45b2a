//! Runs and their iterations: the engine's persistent state (the replies
//! the prompts carry are in `messages.rs`). One run per (repository, issue); a retry reuses the row and keeps
//! its iterations. Every state change goes through [`save`], so the row is
//! always the whole truth about a run.

use sqlx::any::{AnyArguments, AnyRow};
use sqlx::query::Query;
use sqlx::{AnyPool, Row};

use super::StoreError;
use super::jobs::{self, NewJob};
use crate::clock::Millis;
use crate::model::{
    CompletionType, InstallationId, IssueNumber, IterationEnd, Named, Outcome, Phase, RepoName,
    RepositoryId, Run, RunId, RunState, Stage, TaskType, UnknownValue,
};

type AnyQuery<'q> = Query<'q, sqlx::Any, AnyArguments>;

const COLUMNS: &str = "id, installation_id, repository, issue_number, state, phase, \
    completion_type, task_type, stage, iteration, max_iterations, branch, base_commit, \
    clone_url, default_branch, pull_request, status_comment_id, tokens_used, cost_usd, \
    outcome, data, created_at, updated_at, generation, repository_id";

/// A row read as a [`Run`]; every text column that holds a name is read
/// strictly (an unknown one is [`StoreError::Unknown`]).
fn from_row(row: &AnyRow) -> Result<Run, StoreError> {
    let repository: String = row.try_get("repository")?;
    let task_type: Option<String> = row.try_get("task_type")?;
    let outcome: Option<String> = row.try_get("outcome")?;
    let stage: i64 = row.try_get("stage")?;
    Ok(Run {
        id: RunId::from_stored(row.try_get::<String, _>("id")?),
        installation_id: InstallationId(row.try_get("installation_id")?),
        repository: RepoName::parse(&repository)
            .ok_or_else(|| unknown("runs.repository", &repository))?,
        repository_id: row
            .try_get::<Option<i64>, _>("repository_id")?
            .map(RepositoryId),
        issue_number: IssueNumber(unsigned("runs.issue_number", row.try_get("issue_number")?)?),
        state: RunState::read("runs.state", &row.try_get::<String, _>("state")?)?,
        phase: Phase::read("runs.phase", &row.try_get::<String, _>("phase")?)?,
        completion_type: CompletionType::read(
            "runs.completion_type",
            &row.try_get::<String, _>("completion_type")?,
        )?,
        task_type: task_type
            .map(|t| TaskType::read("runs.task_type", &t))
            .transpose()?,
        stage: Stage::from_number(stage)
            .ok_or_else(|| unknown("runs.stage", &stage.to_string()))?,
        iteration: small("runs.iteration", row.try_get("iteration")?)?,
        max_iterations: small("runs.max_iterations", row.try_get("max_iterations")?)?,
        branch: row.try_get("branch")?,
        base_commit: row.try_get("base_commit")?,
        clone_url: row.try_get("clone_url")?,
        default_branch: row.try_get("default_branch")?,
        pull_request: row
            .try_get::<Option<i64>, _>("pull_request")?
            .map(|n| unsigned("runs.pull_request", n).map(IssueNumber))
            .transpose()?,
        status_comment_id: row
            .try_get::<Option<i64>, _>("status_comment_id")?
            .map(|n| unsigned("runs.status_comment_id", n))
            .transpose()?,
        tokens_used: unsigned("runs.tokens_used", row.try_get("tokens_used")?)?,
        cost_usd: row.try_get("cost_usd")?,
        outcome: outcome
            .map(|o| Outcome::parse(&o).ok_or_else(|| unknown("runs.outcome", &o)))
            .transpose()?,
        data: row.try_get("data")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
        generation: small("runs.generation", row.try_get("generation")?)?,
    })
}

fn unknown(column: &'static str, value: &str) -> StoreError {
    StoreError::Unknown(UnknownValue {
        column,
        value: value.to_owned(),
    })
}

fn unsigned(column: &'static str, n: i64) -> Result<u64, StoreError> {
    u64::try_from(n).map_err(|_| unknown(column, &n.to_string()))
}

pub(super) fn small(column: &'static str, n: i64) -> Result<u32, StoreError> {
    u32::try_from(n).map_err(|_| unknown(column, &n.to_string()))
}

/// A count or id as the database stores it (`BIGINT`); values past
/// `i64::MAX` are saturated, never wrapped.
fn db_int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Inserts a run unless the issue already has one; returns the issue's run
/// and whether it was created now.
pub async fn insert_or_get(pool: &AnyPool, run: &Run) -> Result<(Run, bool), StoreError> {
    // Mutable columns first, in the order `bind_mutable` binds them ($1-$20).
    let query = sqlx::query(
        "INSERT INTO runs (state, phase, completion_type, task_type, stage, iteration, \
         max_iterations, branch, base_commit, clone_url, default_branch, pull_request, \
         status_comment_id, tokens_used, cost_usd, outcome, data, updated_at, installation_id, \
         generation, id, repository, issue_number, created_at, repository_id) VALUES ($1, $2, $3, \
         $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, \
         $23, $24, $25) \
         ON CONFLICT (repository, issue_number) DO NOTHING",
    );
    let inserted = bind_mutable(query, run)
        .bind(run.id.as_str())
        .bind(run.repository.to_string())
        .bind(db_int(run.issue_number.0))
        .bind(run.created_at)
        .bind(run.repository_id.map(|id| id.0))
        .execute(pool)
        .await?
        .rows_affected()
        == 1;
    let stored = by_issue(pool, &run.repository, run.issue_number)
        .await?
        .ok_or_else(|| StoreError::Sqlx(sqlx::Error::RowNotFound))?;
    Ok((stored, inserted))
}

pub async fn get(pool: &AnyPool, id: &RunId) -> Result<Option<Run>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM runs WHERE id = $1");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(id.as_str())
        .fetch_optional(pool)
        .await?;
    row.map(|r| from_row(&r)).transpose()
}

pub async fn by_issue(
    pool: &AnyPool,
    repository: &RepoName,
    issue_number: IssueNumber,
) -> Result<Option<Run>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM runs WHERE repository = $1 AND issue_number = $2");
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(repository.to_string())
        .bind(db_int(issue_number.0))
        .fetch_optional(pool)
        .await?;
    row.map(|r| from_row(&r)).transpose()
}

/// The states a run ends in, as an SQL list (`'done', 'failed', …`).
pub(super) fn ended_states_sql() -> String {
    RunState::ALL
        .iter()
        .filter(|s| s.is_final())
        .map(|s| format!("'{}'", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether an issue or pull request has a run that has not ended: the run
/// of that issue, or the run whose pull request it is.
pub async fn open_on_thread(
    pool: &AnyPool,
    repository: &RepoName,
    number: IssueNumber,
) -> Result<bool, StoreError> {
    let ended = ended_states_sql();
    let sql = format!(
        "SELECT COUNT(*) AS n FROM runs WHERE repository = $1 \
         AND (issue_number = $2 OR pull_request = $2) AND state NOT IN ({ended})"
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(repository.to_string())
        .bind(db_int(number.0))
        .fetch_one(pool)
        .await?;
    Ok(row.try_get::<i64, _>("n")? > 0)
}

/// Runs in any of `states`, oldest first.
pub async fn in_states(pool: &AnyPool, states: &[RunState]) -> Result<Vec<Run>, StoreError> {
    let mut out = Vec::new();
    for state in states {
        let sql = format!("SELECT {COLUMNS} FROM runs WHERE state = $1 ORDER BY created_at");
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(state.as_str())
            .fetch_all(pool)
            .await?;
        for row in rows {
            out.push(from_row(&row)?);
        }
    }
    Ok(out)
}

/// The update of every mutable column; `$guard` narrows which rows it may touch.
///
/// The run's totals (`tokens_used`, `cost_usd`) only grow: a save from a
/// run read before [`stop_iteration`] added a stopped agent's spending (the
/// stop's own status save, a restart) keeps the larger total.
///
/// Where the repository lives (`clone_url`, `installation_id`) is written
/// by a restart only (`restart`); a step's save keeps what is stored, since
/// [`rename_repository`] may have changed it while the step worked with
/// the run it read before (decision 232). Both are still bound as `$10`
/// and `$19`, so every save binds the same parameters.
macro_rules! update_run_sql {
    (restart $guard:literal) => {
        update_run_sql!(@ "clone_url = $10", "installation_id = $19", $guard)
    };
    ($guard:literal) => {
        update_run_sql!(@ "clone_url = COALESCE(clone_url, $10)",
            "installation_id = COALESCE(installation_id, $19)", $guard)
    };
    (@ $clone_url:literal, $installation:literal, $guard:literal) => {
        concat!(
            "UPDATE runs SET state = $1, phase = $2, completion_type = $3, task_type = $4, ",
            "stage = $5, iteration = $6, max_iterations = $7, branch = $8, base_commit = $9, ",
            $clone_url, ", default_branch = $11, pull_request = $12, status_comment_id = $13, ",
            "tokens_used = CASE WHEN tokens_used > $14 THEN tokens_used ELSE $14 END, ",
            "cost_usd = CASE WHEN cost_usd > $15 THEN cost_usd ELSE $15 END, ",
            "outcome = $16, data = $17, updated_at = $18, ",
            $installation, ", generation = $20 WHERE id = $21",
            $guard
        )
    };
}

/// Writes every mutable column of a run, whatever the stored run is (a
/// restart, which also starts a new generation: see [`Run::generation`]).
pub async fn save(pool: &AnyPool, run: &Run) -> Result<(), StoreError> {
    update(pool, run, update_run_sql!(restart "")).await?;
    Ok(())
}

/// Like [`save`], but only while the stored run is the generation `run`
/// was loaded as (not restarted meanwhile) and not `stopped` (a person
/// closed the issue or said `/closer stop` meanwhile); writing `stopped`
/// goes through whatever the stored state. `false` when the run was not
/// written; what it spent is kept even then (see [`keep_totals`]).
pub async fn save_unless_stopped(pool: &AnyPool, run: &Run) -> Result<bool, StoreError> {
    let saved = update(pool, run, unless_stopped_sql(run)).await? == 1;
    if !saved {
        keep_totals(pool, run).await?;
    }
    Ok(saved)
}

/// Writes `run`'s totals where they are larger than the stored ones, in
/// the same life of the run (`generation`): a step whose save was refused
/// because the run was stopped meanwhile (while it verified or judged)
/// still spent what it spent.
async fn keep_totals<'e>(
    db: impl sqlx::Executor<'e, Database = sqlx::Any>,
    run: &Run,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE runs SET \
         tokens_used = CASE WHEN tokens_used > $1 THEN tokens_used ELSE $1 END, \
         cost_usd = CASE WHEN cost_usd > $2 THEN cost_usd ELSE $2 END \
         WHERE id = $3 AND generation = $4",
    )
    .bind(db_int(run.tokens_used))
    .bind(run.cost_usd)
    .bind(run.id.as_str())
    .bind(i64::from(run.generation))
    .execute(db)
    .await?;
    Ok(())
}

fn unless_stopped_sql(run: &Run) -> &'static str {
    if run.state == RunState::Stopped {
        update_run_sql!(" AND generation = $20")
    } else {
        update_run_sql!(" AND generation = $20 AND state <> 'stopped'")
    }
}

/// How an iteration ended, written with the run's decision on it.
#[derive(Debug, Clone, PartialEq)]
pub struct IterationFinish {
    pub number: u32,
    /// The agent's result, as JSON.
    pub agent: String,
    /// The judgment's record, as JSON.
    pub judgment: String,
    pub decision: IterationEnd,
    pub at: Millis,
}

/// [`save_unless_stopped`] and the end of the iteration the run's state
/// was decided on, in one transaction: a run is never left with an
/// iteration judged and the decision on it lost (a crash between the two
/// would run the next iteration on work already judged). The iteration's
/// end is written even when the run was stopped meanwhile.
pub async fn save_judged(
    pool: &AnyPool,
    run: &Run,
    finish: &IterationFinish,
) -> Result<bool, StoreError> {
    let mut tx = pool.begin().await?;
    write_finish(&mut *tx, &run.id, finish).await?;
    let saved = update(&mut *tx, run, unless_stopped_sql(run)).await? == 1;
    if !saved {
        keep_totals(&mut *tx, run).await?;
    }
    tx.commit().await?;
    Ok(saved)
}

/// Stops a run that is not over yet by writing only its state, outcome and
/// time, so that what a step in flight wrote a moment before (the
/// iteration) is kept; from then on [`save_unless_stopped`] refuses that
/// step's writes. `then` (the job that shows the stop on GitHub) is queued
/// in the same transaction, so a stop is never left unshown. `false` when
/// the run had ended meanwhile (done, failed or already stopped): nothing
/// is written.
pub async fn mark_stopped(
    pool: &AnyPool,
    id: &RunId,
    outcome: &Outcome,
    then: &NewJob,
    now: Millis,
) -> Result<bool, StoreError> {
    let mut tx = pool.begin().await?;
    let done = sqlx::query(
        "UPDATE runs SET state = 'stopped', outcome = $1, updated_at = $2 \
         WHERE id = $3 AND state NOT IN ('done', 'failed', 'stopped')",
    )
    .bind(outcome.to_string())
    .bind(now)
    .bind(id.as_str())
    .execute(&mut *tx)
    .await?;
    let marked = done.rows_affected() == 1;
    if marked {
        jobs::enqueue(&mut *tx, then, now).await?;
    }
    tx.commit().await?;
    Ok(marked)
}

/// Gives the runs of repository `old` (whatever its case) the name `new`
/// and the clone URL `clone_url` (the old name's URL may lead to another
/// repository one day), under `installation` (a repository moved to another
/// owner belongs to that owner's installation): the repository was renamed
/// or moved.
/// A run whose issue number a run under `new` already has (a deleted
/// repository's name taken again) keeps the old name, since one issue has
/// one run. Only the runs of repository `id` (GitHub's answer for the old
/// name) follow, and those stored without an id: a run of another
/// repository that once had the name stays. Answers how many were renamed.
pub async fn rename_repository(
    pool: &AnyPool,
    old: &RepoName,
    new: &RepoName,
    id: RepositoryId,
    clone_url: &str,
    installation: InstallationId,
) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "UPDATE runs SET repository = $1, installation_id = $2, clone_url = $5 \
         WHERE LOWER(repository) = LOWER($3) AND repository <> $1 \
         AND (repository_id IS NULL OR repository_id = $4) \
         AND NOT EXISTS (SELECT 1 FROM runs AS there \
         WHERE there.repository = $1 AND there.issue_number = runs.issue_number)",
    )
    .bind(new.to_string())
    .bind(installation.0)
    .bind(old.to_string())
    .bind(id.0)
    .bind(clone_url)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}

/// Like [`save`], but only while the stored run is still in state `was`
/// in `run`'s generation (what its caller read); `true` when it was
/// written. Of two replicas' reconciliation passes that would fail the
/// same run, one writes it; the other leaves the run, and its diagnosis,
/// to the winner.
pub async fn save_if_still(pool: &AnyPool, run: &Run, was: RunState) -> Result<bool, StoreError> {
    let sql = update_run_sql!(" AND generation = $20 AND state = $22");
    let done = bind_mutable(sqlx::query(sql), run)
        .bind(run.id.as_str())
        .bind(was.as_str())
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// The stored state of a run (`None` when there is no such run): the cheap
/// read the stop watch makes every few seconds.
pub async fn state_of(pool: &AnyPool, id: &RunId) -> Result<Option<RunState>, StoreError> {
    let row = sqlx::query("SELECT state FROM runs WHERE id = $1")
        .bind(id.as_str())
        .fetch_optional(pool)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    Ok(Some(RunState::read(
        "runs.state",
        &row.try_get::<String, _>("state")?,
    )?))
}

async fn update<'e>(
    db: impl sqlx::Executor<'e, Database = sqlx::Any>,
    run: &Run,
    sql: &'static str,
) -> Result<u64, StoreError> {
    let done = bind_mutable(sqlx::query(sql), run)
        .bind(run.id.as_str())
        .execute(db)
        .await?;
    Ok(done.rows_affected())
}

/// Binds the columns a run changes over its life, as `$1`–`$20`.
fn bind_mutable<'q>(query: AnyQuery<'q>, run: &'q Run) -> AnyQuery<'q> {
    query
        .bind(run.state.as_str())
        .bind(run.phase.as_str())
        .bind(run.completion_type.as_str())
        .bind(run.task_type.map(TaskType::as_str))
        .bind(i64::from(run.stage.number()))
        .bind(i64::from(run.iteration))
        .bind(i64::from(run.max_iterations))
        .bind(&run.branch)
        .bind(run.base_commit.as_deref())
        .bind(run.clone_url.as_deref())
        .bind(run.default_branch.as_deref())
        .bind(run.pull_request.map(|n| db_int(n.0)))
        .bind(run.status_comment_id.map(db_int))
        .bind(db_int(run.tokens_used))
        .bind(run.cost_usd)
        .bind(run.outcome.as_ref().map(Outcome::to_string))
        .bind(&run.data)
        .bind(run.updated_at)
        .bind(run.installation_id.0)
        .bind(i64::from(run.generation))
}

/// One iteration as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct IterationRow {
    pub run_id: RunId,
    pub number: u32,
    pub prompt: String,
    /// The agent's result (JSON the engine owns).
    pub agent: Option<String>,
    /// The engine's record of the iteration (JSON the engine owns).
    pub judgment: Option<String>,
    pub decision: Option<IterationEnd>,
    pub started_at: Millis,
    pub finished_at: Option<Millis>,
}

/// Records that an iteration started with this prompt (again, after a crash:
/// the prompt is replaced and the result cleared).
pub async fn start_iteration(
    pool: &AnyPool,
    run_id: &RunId,
    number: u32,
    prompt: &str,
    now: Millis,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO iterations (run_id, number, prompt, started_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (run_id, number) DO UPDATE SET prompt = excluded.prompt, \
         started_at = excluded.started_at, agent = NULL, judgment = NULL, decision = NULL, \
         finished_at = NULL",
    )
    .bind(run_id.as_str())
    .bind(i64::from(number))
    .bind(prompt)
    .bind(now)
    .execute(pool)
    .await?;
    Ok(())
}

/// Keeps the agent's result of an iteration not finished yet (to be judged).
pub async fn keep_agent_result(
    pool: &AnyPool,
    run_id: &RunId,
    number: u32,
    agent: &str,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE iterations SET agent = $1 WHERE run_id = $2 AND number = $3 AND finished_at IS NULL",
    )
    .bind(agent)
    .bind(run_id.as_str())
    .bind(i64::from(number))
    .execute(pool)
    .await?;
    Ok(())
}

/// Forgets an iteration that never finished (its agent could not reach
/// its model provider): the same number starts afresh later.
pub async fn discard_iteration(
    pool: &AnyPool,
    run_id: &RunId,
    number: u32,
) -> Result<(), StoreError> {
    sqlx::query("DELETE FROM iterations WHERE run_id = $1 AND number = $2 AND finished_at IS NULL")
        .bind(run_id.as_str())
        .bind(i64::from(number))
        .execute(pool)
        .await?;
    Ok(())
}

/// Records an iteration's result.
pub async fn finish_iteration(
    pool: &AnyPool,
    run_id: &RunId,
    number: u32,
    agent: &str,
    judgment: &str,
    decision: IterationEnd,
    now: Millis,
) -> Result<(), StoreError> {
    let finish = IterationFinish {
        number,
        agent: agent.to_owned(),
        judgment: judgment.to_owned(),
        decision,
        at: now,
    };
    write_finish(pool, run_id, &finish).await
}

/// What a stopped iteration's agent spent before it was stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    pub tokens: u64,
    pub cost_usd: f64,
}

/// Ends an iteration its run's stop interrupted: the agent's result is
/// kept, and there is no judgment (nothing was judged). What the agent
/// spent is added to the run's totals (the run row is not otherwise
/// written here: the stop owns its state). The replies its prompt carried
/// are given back for the next prompt. All in one transaction.
pub async fn stop_iteration(
    pool: &AnyPool,
    run_id: &RunId,
    number: u32,
    agent: &str,
    spent: Spent,
    now: Millis,
) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    release_messages(&mut *tx, run_id, number).await?;
    // The sum stops at the column's largest value: an agent may report
    // any count, and past it SQLite would store a float and PostgreSQL
    // refuse the update.
    sqlx::query(
        "UPDATE runs SET tokens_used = CASE WHEN tokens_used > $4 - $1 THEN $4 \
         ELSE tokens_used + $1 END, cost_usd = cost_usd + $2 WHERE id = $3",
    )
    .bind(db_int(spent.tokens))
    .bind(spent.cost_usd)
    .bind(run_id.as_str())
    .bind(i64::MAX)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE iterations SET agent = $1, judgment = NULL, decision = $2, finished_at = $3 \
         WHERE run_id = $4 AND number = $5",
    )
    .bind(agent)
    .bind(IterationEnd::Stopped.as_str())
    .bind(now)
    .bind(run_id.as_str())
    .bind(i64::from(number))
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Gives the replies iteration `number`'s prompt carried back to the next
/// prompt: the iteration ended without its agent's work being judged (a
/// stop, an agent that could not run), so nobody acted on them.
pub async fn release_messages<'e>(
    db: impl sqlx::Executor<'e, Database = sqlx::Any>,
    run_id: &RunId,
    number: u32,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE messages SET used_in = NULL WHERE run_id = $1 AND used_in = $2")
        .bind(run_id.as_str())
        .bind(i64::from(number))
        .execute(db)
        .await?;
    Ok(())
}

async fn write_finish<'e>(
    db: impl sqlx::Executor<'e, Database = sqlx::Any>,
    run_id: &RunId,
    finish: &IterationFinish,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE iterations SET agent = $1, judgment = $2, decision = $3, finished_at = $4 \
         WHERE run_id = $5 AND number = $6",
    )
    .bind(&finish.agent)
    .bind(&finish.judgment)
    .bind(finish.decision.as_str())
    .bind(finish.at)
    .bind(run_id.as_str())
    .bind(i64::from(finish.number))
    .execute(db)
    .await?;
    Ok(())
}

pub async fn iterations(pool: &AnyPool, run_id: &RunId) -> Result<Vec<IterationRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT run_id, number, prompt, agent, judgment, decision, started_at, finished_at \
         FROM iterations WHERE run_id = $1 ORDER BY number",
    )
    .bind(run_id.as_str())
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            let decision: Option<String> = r.try_get("decision")?;
            Ok(IterationRow {
                run_id: RunId::from_stored(r.try_get::<String, _>("run_id")?),
                number: small("iterations.number", r.try_get("number")?)?,
                prompt: r.try_get("prompt")?,
                agent: r.try_get("agent")?,
                judgment: r.try_get("judgment")?,
                decision: decision
                    .map(|d| IterationEnd::read("iterations.decision", &d))
                    .transpose()?,
                started_at: r.try_get("started_at")?,
                finished_at: r.try_get("finished_at")?,
            })
        })
        .collect()
}

/// Empties the prompts and agent output (the bulk: up to 10 MiB each) of
/// the iterations of runs that ended (done, failed or stopped) and were last
/// updated before `before`. The judgments, which a retried run and the
/// status comment build on, are kept; so is everything of an open run.
pub async fn prune_output(pool: &AnyPool, before: Millis) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "UPDATE iterations SET prompt = '', agent = NULL \
         WHERE (prompt <> '' OR agent IS NOT NULL) AND run_id IN \
         (SELECT id FROM runs WHERE state IN ('done', 'failed', 'stopped') AND updated_at < $1)",
    )
    .bind(before)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}
