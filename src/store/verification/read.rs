//! Reading verification evidence back, as rows and JSON documents.

use sqlx::{AnyPool, Row};

use super::{ArtifactsRow, DIAGNOSTIC_KINDS, FailureRow, GoalRow};
use crate::store::StoreError;

fn payload(e: serde_json::Error) -> StoreError {
    StoreError::Payload(e.to_string())
}

/// The artifacts stored for an iteration.
pub async fn artifacts(
    pool: &AnyPool,
    run_id: &str,
    iteration: i64,
) -> Result<Option<ArtifactsRow>, StoreError> {
    let row = sqlx::query(
        "SELECT base_commit, head, branch, diff_hash, data, missing FROM iteration_artifacts \
         WHERE run_id = $1 AND iteration = $2",
    )
    .bind(run_id)
    .bind(iteration)
    .fetch_optional(pool)
    .await?;
    row.map(|r| {
        Ok(ArtifactsRow {
            base_commit: r.try_get("base_commit")?,
            head: r.try_get("head")?,
            branch: r.try_get("branch")?,
            diff_hash: r.try_get("diff_hash")?,
            data: r.try_get("data")?,
            missing: r.try_get("missing")?,
        })
    })
    .transpose()
}

/// The goal results of an iteration (0 = baseline), in evaluation order.
pub async fn goal_results(
    pool: &AnyPool,
    run_id: &str,
    iteration: i64,
) -> Result<Vec<GoalRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT level, goal_type, target, passed, required, not_runnable, baseline_only, duration_ms, \
         evidence FROM goal_results WHERE run_id = $1 AND iteration = $2 ORDER BY position",
    )
    .bind(run_id)
    .bind(iteration)
    .fetch_all(pool)
    .await?;
    rows.iter()
        .map(|r| {
            Ok(GoalRow {
                level: r.try_get("level")?,
                goal_type: r.try_get("goal_type")?,
                target: r.try_get("target")?,
                passed: r.try_get::<i64, _>("passed")? != 0,
                required: r.try_get::<i64, _>("required")? != 0,
                not_runnable: r.try_get::<i64, _>("not_runnable")? != 0,
                tolerated: r.try_get::<i64, _>("baseline_only")? != 0,
                duration_ms: u64::try_from(r.try_get::<i64, _>("duration_ms")?).unwrap_or(0),
                evidence: r.try_get("evidence")?,
            })
        })
        .collect()
}

/// The failures of an iteration (0 = baseline).
pub async fn failures(
    pool: &AnyPool,
    run_id: &str,
    iteration: i64,
) -> Result<Vec<FailureRow>, StoreError> {
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
            Ok(FailureRow {
                fingerprint: r.try_get("fingerprint")?,
                runner: r.try_get("runner")?,
                command: r.try_get("command")?,
                test: r.try_get("test_name")?,
                location: r.try_get("location")?,
                error: r.try_get("error")?,
                is_new: r.try_get::<i64, _>("is_new")? != 0,
            })
        })
        .collect()
}

/// The decision of an iteration, as JSON.
pub async fn decision(
    pool: &AnyPool,
    run_id: &str,
    iteration: i64,
) -> Result<Option<String>, StoreError> {
    let row =
        sqlx::query("SELECT data FROM convergence_decisions WHERE run_id = $1 AND iteration = $2")
            .bind(run_id)
            .bind(iteration)
            .fetch_optional(pool)
            .await?;
    Ok(row.map(|r| r.try_get("data")).transpose()?)
}

/// The run's newest decision (the only one that is current), as JSON.
pub async fn latest_decision(pool: &AnyPool, run_id: &str) -> Result<Option<String>, StoreError> {
    let row = sqlx::query(
        "SELECT data FROM convergence_decisions WHERE run_id = $1 ORDER BY iteration DESC LIMIT 1",
    )
    .bind(run_id)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|r| r.try_get("data")).transpose()?)
}

/// One stored diagnostic as JSON. `completion_reasons` is assembled from the
/// decisions: `[{iteration, check_id, decision, stage, reasons}]`.
pub async fn diagnostic(
    pool: &AnyPool,
    run_id: &str,
    kind: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    if kind == "completion_reasons" {
        return completion_reasons(pool, run_id).await;
    }
    let row = sqlx::query("SELECT data FROM run_diagnostics WHERE run_id = $1 AND kind = $2")
        .bind(run_id)
        .bind(kind)
        .fetch_optional(pool)
        .await?;
    row.map(|r| serde_json::from_str(&r.try_get::<String, _>("data")?).map_err(payload))
        .transpose()
}

async fn completion_reasons(
    pool: &AnyPool,
    run_id: &str,
) -> Result<Option<serde_json::Value>, StoreError> {
    let rows = sqlx::query(
        "SELECT data, stage FROM convergence_decisions WHERE run_id = $1 ORDER BY iteration",
    )
    .bind(run_id)
    .fetch_all(pool)
    .await?;
    if rows.is_empty() {
        return Ok(None);
    }
    let mut reasons = Vec::new();
    for row in rows {
        let d: serde_json::Value =
            serde_json::from_str(&row.try_get::<String, _>("data")?).map_err(payload)?;
        reasons.push(serde_json::json!({
            "iteration": d["iteration"],
            "check_id": d["check_id"],
            "decision": d["decision"],
            "stage": row.try_get::<i64, _>("stage")?,
            "reasons": d["reasons"],
        }));
    }
    Ok(Some(serde_json::Value::Array(reasons)))
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
