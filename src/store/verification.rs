//! Verification evidence: per iteration the artifacts, goal results,
//! fingerprinted failures and the convergence decision; per run the baseline
//! and the diagnostic artifacts (baseline failures, current failures,
//! fingerprint history, completion reasons), each retrievable as JSON for the
//! dashboard and the diagnosis comment.
//!
//! Saving an iteration replaces what was stored for it (a retried job writes
//! it again), in one transaction. Iteration 0 is the baseline.

use serde::de::DeserializeOwned;
use sqlx::{AnyPool, Row};

use super::StoreError;
use crate::clock::Millis;
use crate::engine::artifacts::{ArtifactKind, Artifacts};
use crate::engine::baseline::Baseline;
use crate::engine::convergence::{ConvergenceState, Verdict};
use crate::engine::fingerprint::{Failure, Runner};
use crate::engine::goals::{GoalLevel, GoalResult};
use crate::engine::verify::IterationVerification;

/// The iteration number under which the baseline is stored.
pub const BASELINE_ITERATION: i64 = 0;

/// The kinds of per-run diagnostic artifact.
pub const DIAGNOSTIC_KINDS: &[&str] = &[
    "baseline_failures",
    "current_failures",
    "fingerprint_history",
    "completion_reasons",
];

/// A stored failure and whether it was new against the baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFailure {
    pub failure: Failure,
    pub is_new: bool,
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Payload(e.to_string()))
}

fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Payload(e.to_string()))
}

fn enum_name<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    match serde_json::to_value(value).map_err(|e| StoreError::Payload(e.to_string()))? {
        serde_json::Value::String(s) => Ok(s),
        other => Err(StoreError::Payload(format!("not a name: {other}"))),
    }
}

fn from_name<T: DeserializeOwned>(name: &str) -> Result<T, StoreError> {
    serde_json::from_value(serde_json::Value::String(name.to_owned()))
        .map_err(|e| StoreError::Payload(e.to_string()))
}

async fn insert_goal_results(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &str,
    iteration: i64,
    results: &[GoalResult],
    now: Millis,
) -> Result<(), StoreError> {
    for (position, goal) in results.iter().enumerate() {
        sqlx::query(
            "INSERT INTO goal_results (run_id, iteration, position, level, goal_type, target, passed, \
             required, not_runnable, baseline_only, duration_ms, evidence, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
        )
        .bind(run_id)
        .bind(iteration)
        .bind(position as i64)
        .bind(goal.level.as_str())
        .bind(&goal.goal_type)
        .bind(&goal.target)
        .bind(i64::from(goal.passed))
        .bind(i64::from(goal.required))
        .bind(i64::from(goal.not_runnable))
        .bind(i64::from(goal.tolerated))
        .bind(i64::try_from(goal.duration_ms).unwrap_or(i64::MAX))
        .bind(&goal.evidence)
        .bind(now)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

async fn insert_failures(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &str,
    iteration: i64,
    failures: &[Failure],
    is_new: impl Fn(&Failure) -> bool,
    now: Millis,
) -> Result<(), StoreError> {
    let mut seen = std::collections::HashSet::new();
    for failure in failures
        .iter()
        .filter(|f| seen.insert(f.fingerprint.clone()))
    {
        sqlx::query(
            "INSERT INTO failures (run_id, iteration, fingerprint, runner, command, test_name, location, \
             error, is_new, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(run_id)
        .bind(iteration)
        .bind(&failure.fingerprint)
        .bind(enum_name(&failure.runner)?)
        .bind(&failure.command)
        .bind(failure.test.as_deref())
        .bind(failure.location.as_deref())
        .bind(&failure.error)
        .bind(i64::from(is_new(failure)))
        .bind(now)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

async fn clear_iteration(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &str,
    iteration: i64,
) -> Result<(), StoreError> {
    for sql in [
        "DELETE FROM iteration_artifacts WHERE run_id = $1 AND iteration = $2",
        "DELETE FROM goal_results WHERE run_id = $1 AND iteration = $2",
        "DELETE FROM failures WHERE run_id = $1 AND iteration = $2",
        "DELETE FROM convergence_decisions WHERE run_id = $1 AND iteration = $2",
    ] {
        sqlx::query(sql)
            .bind(run_id)
            .bind(iteration)
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

async fn upsert_diagnostic<'e, E>(
    executor: E,
    run_id: &str,
    kind: &str,
    data: &str,
    now: Millis,
) -> Result<(), StoreError>
where
    E: sqlx::Executor<'e, Database = sqlx::Any>,
{
    sqlx::query(
        "INSERT INTO run_diagnostics (run_id, kind, data, updated_at) VALUES ($1, $2, $3, $4) \
         ON CONFLICT (run_id, kind) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at",
    )
    .bind(run_id)
    .bind(kind)
    .bind(data)
    .bind(now)
    .execute(executor)
    .await?;
    Ok(())
}

/// Stores the baseline: its goal results and failures as iteration 0, and
/// the `baseline_failures` diagnostic.
pub async fn save_baseline(
    pool: &AnyPool,
    run_id: &str,
    baseline: &Baseline,
    now: Millis,
) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    clear_iteration(&mut tx, run_id, BASELINE_ITERATION).await?;
    insert_goal_results(&mut tx, run_id, BASELINE_ITERATION, &baseline.goals, now).await?;
    insert_failures(
        &mut tx,
        run_id,
        BASELINE_ITERATION,
        &baseline.failures,
        |_| false,
        now,
    )
    .await?;
    upsert_diagnostic(
        &mut *tx,
        run_id,
        "baseline_failures",
        &to_json(&baseline.failures)?,
        now,
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Stores one iteration's verification and the run's convergence state
/// (with the `current_failures` and `fingerprint_history` diagnostics).
pub async fn save_iteration(
    pool: &AnyPool,
    run_id: &str,
    verification: &IterationVerification,
    state: &ConvergenceState,
    now: Millis,
) -> Result<(), StoreError> {
    let iteration = i64::from(verification.iteration);
    let artifacts = &verification.artifacts;
    let decision = &verification.decision;
    let mut tx = pool.begin().await?;
    clear_iteration(&mut tx, run_id, iteration).await?;
    sqlx::query(
        "INSERT INTO iteration_artifacts (run_id, iteration, base_commit, head, branch, diff_hash, data, \
         missing, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(run_id)
    .bind(iteration)
    .bind(&artifacts.base_commit)
    .bind(&artifacts.head)
    .bind(artifacts.branch.as_deref())
    .bind(&artifacts.diff_hash)
    .bind(to_json(artifacts)?)
    .bind(to_json(&verification.missing_artifacts)?)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    insert_goal_results(&mut tx, run_id, iteration, &verification.goals, now).await?;
    let new: std::collections::HashSet<&str> = verification
        .new_failures
        .iter()
        .map(|f| f.fingerprint.as_str())
        .collect();
    insert_failures(
        &mut tx,
        run_id,
        iteration,
        &verification.failures,
        |f| new.contains(f.fingerprint.as_str()),
        now,
    )
    .await?;
    sqlx::query(
        "INSERT INTO convergence_decisions (run_id, iteration, check_id, decision, stage, data, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(run_id)
    .bind(iteration)
    .bind(&decision.check_id.0)
    .bind(enum_name(&decision.decision)?)
    .bind(i64::from(decision.stage.number()))
    .bind(to_json(decision)?)
    .bind(now)
    .execute(&mut *tx)
    .await?;
    upsert_diagnostic(
        &mut *tx,
        run_id,
        "current_failures",
        &to_json(&verification.failures)?,
        now,
    )
    .await?;
    upsert_diagnostic(
        &mut *tx,
        run_id,
        "fingerprint_history",
        &to_json(&state.history)?,
        now,
    )
    .await?;
    upsert_diagnostic(&mut *tx, run_id, "convergence_state", &to_json(state)?, now).await?;
    tx.commit().await?;
    Ok(())
}

/// The artifacts stored for an iteration, with the missing kinds.
pub async fn artifacts(
    pool: &AnyPool,
    run_id: &str,
    iteration: i64,
) -> Result<Option<(Artifacts, Vec<ArtifactKind>)>, StoreError> {
    let row = sqlx::query(
        "SELECT data, missing FROM iteration_artifacts WHERE run_id = $1 AND iteration = $2",
    )
    .bind(run_id)
    .bind(iteration)
    .fetch_optional(pool)
    .await?;
    row.map(|r| {
        Ok((
            from_json(&r.try_get::<String, _>("data")?)?,
            from_json(&r.try_get::<String, _>("missing")?)?,
        ))
    })
    .transpose()
}

/// The goal results of an iteration (0 = baseline), in evaluation order.
/// Their failures are read with [`failures`].
pub async fn goal_results(
    pool: &AnyPool,
    run_id: &str,
    iteration: i64,
) -> Result<Vec<GoalResult>, StoreError> {
    let rows = sqlx::query(
        "SELECT level, goal_type, target, passed, required, not_runnable, baseline_only, duration_ms, \
         evidence \
         FROM goal_results WHERE run_id = $1 AND iteration = $2 ORDER BY position",
    )
    .bind(run_id)
    .bind(iteration)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(GoalResult {
                level: from_name::<GoalLevel>(&r.try_get::<String, _>("level")?)?,
                goal_type: r.try_get("goal_type")?,
                target: r.try_get("target")?,
                passed: r.try_get::<i64, _>("passed")? != 0,
                required: r.try_get::<i64, _>("required")? != 0,
                not_runnable: r.try_get::<i64, _>("not_runnable")? != 0,
                tolerated: r.try_get::<i64, _>("baseline_only")? != 0,
                duration_ms: u64::try_from(r.try_get::<i64, _>("duration_ms")?).unwrap_or(0),
                evidence: r.try_get("evidence")?,
                failures: Vec::new(),
                passed_tests: Vec::new(),
            })
        })
        .collect()
}

/// The failures of an iteration (0 = baseline).
pub async fn failures(
    pool: &AnyPool,
    run_id: &str,
    iteration: i64,
) -> Result<Vec<StoredFailure>, StoreError> {
    let rows = sqlx::query(
        "SELECT fingerprint, runner, command, test_name, location, error, is_new FROM failures \
         WHERE run_id = $1 AND iteration = $2 ORDER BY id",
    )
    .bind(run_id)
    .bind(iteration)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(StoredFailure {
                failure: Failure {
                    fingerprint: r.try_get("fingerprint")?,
                    runner: from_name::<Runner>(&r.try_get::<String, _>("runner")?)?,
                    command: r.try_get("command")?,
                    test: r.try_get("test_name")?,
                    location: r.try_get("location")?,
                    error: r.try_get("error")?,
                },
                is_new: r.try_get::<i64, _>("is_new")? != 0,
            })
        })
        .collect()
}

/// The decision of an iteration.
pub async fn decision(
    pool: &AnyPool,
    run_id: &str,
    iteration: i64,
) -> Result<Option<Verdict>, StoreError> {
    let row =
        sqlx::query("SELECT data FROM convergence_decisions WHERE run_id = $1 AND iteration = $2")
            .bind(run_id)
            .bind(iteration)
            .fetch_optional(pool)
            .await?;
    row.map(|r| from_json(&r.try_get::<String, _>("data")?))
        .transpose()
}

/// The run's newest decision: the only one that is current.
pub async fn latest_decision(pool: &AnyPool, run_id: &str) -> Result<Option<Verdict>, StoreError> {
    let row = sqlx::query(
        "SELECT data FROM convergence_decisions WHERE run_id = $1 ORDER BY iteration DESC LIMIT 1",
    )
    .bind(run_id)
    .fetch_optional(pool)
    .await?;
    row.map(|r| from_json(&r.try_get::<String, _>("data")?))
        .transpose()
}

/// The run's convergence state, to resume after a restart.
pub async fn convergence_state(
    pool: &AnyPool,
    run_id: &str,
) -> Result<Option<ConvergenceState>, StoreError> {
    match diagnostic(pool, run_id, "convergence_state").await? {
        Some(value) => serde_json::from_value(value)
            .map(Some)
            .map_err(|e| StoreError::Payload(e.to_string())),
        None => Ok(None),
    }
}

/// One stored diagnostic as JSON. `completion_reasons` is assembled from the
/// decisions: `[{iteration, check_id, decision, stage, reasons}]`.
pub async fn diagnostic(
    pool: &AnyPool,
    run_id: &str,
    kind: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    if kind == "completion_reasons" {
        let rows = sqlx::query(
            "SELECT data FROM convergence_decisions WHERE run_id = $1 ORDER BY iteration",
        )
        .bind(run_id)
        .fetch_all(pool)
        .await?;
        if rows.is_empty() {
            return Ok(None);
        }
        let mut reasons = Vec::new();
        for row in rows {
            let d: Verdict = from_json(&row.try_get::<String, _>("data")?)?;
            reasons.push(serde_json::json!({
                "iteration": d.iteration,
                "check_id": d.check_id,
                "decision": d.decision,
                "stage": d.stage.number(),
                "reasons": d.reasons,
            }));
        }
        return Ok(Some(serde_json::Value::Array(reasons)));
    }
    let row = sqlx::query("SELECT data FROM run_diagnostics WHERE run_id = $1 AND kind = $2")
        .bind(run_id)
        .bind(kind)
        .fetch_optional(pool)
        .await?;
    row.map(|r| from_json(&r.try_get::<String, _>("data")?))
        .transpose()
}

/// Every diagnostic of a run in one JSON object (missing ones are `null`).
pub async fn diagnostics(pool: &AnyPool, run_id: &str) -> Result<serde_json::Value, StoreError> {
    let mut object = serde_json::Map::new();
    for kind in DIAGNOSTIC_KINDS {
        let value = diagnostic(pool, run_id, kind)
            .await?
            .unwrap_or(serde_json::Value::Null);
        object.insert((*kind).to_owned(), value);
    }
    Ok(serde_json::Value::Object(object))
}
