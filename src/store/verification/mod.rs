//! Verification evidence as stored: per iteration the artifacts, goal
//! results, fingerprinted failures and the convergence decision; per run the
//! baseline and the diagnostic documents (baseline failures, current
//! failures, fingerprint history, convergence state; completion reasons are
//! assembled from the decisions), each retrievable as JSON for the dashboard
//! and the diagnosis comment.
//!
//! The rows are plain data ([`rows`]); the engine converts its evidence to
//! and from them (`engine/evidence.rs`): this module knows SQL, not
//! verdicts. Saving an iteration replaces what was stored for it (a retried
//! job writes it again), in one transaction. Iteration 0 is the baseline.

mod read;
mod rows;

pub use read::{
    artifacts, decision, diagnostic, diagnostics, failures, goal_results, latest_decision,
};
pub use rows::{
    ArtifactsRow, BaselineEvidence, DecisionRow, FailureRow, GoalRow, IterationEvidence,
};

use sqlx::AnyPool;

use super::StoreError;
use crate::clock::Millis;

/// The iteration number under which the baseline is stored.
pub const BASELINE_ITERATION: i64 = 0;

/// The kinds of per-run diagnostic document.
pub const DIAGNOSTIC_KINDS: &[&str] = &[
    "baseline_failures",
    "current_failures",
    "fingerprint_history",
    "completion_reasons",
];

async fn insert_goal_results(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &str,
    iteration: i64,
    results: &[GoalRow],
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
        .bind(&goal.level)
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
    failures: &[FailureRow],
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
        .bind(&failure.runner)
        .bind(&failure.command)
        .bind(failure.test.as_deref())
        .bind(failure.location.as_deref())
        .bind(&failure.error)
        .bind(i64::from(failure.is_new))
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
    baseline: &BaselineEvidence,
    now: Millis,
) -> Result<(), StoreError> {
    let mut tx = pool.begin().await?;
    clear_iteration(&mut tx, run_id, BASELINE_ITERATION).await?;
    insert_goal_results(&mut tx, run_id, BASELINE_ITERATION, &baseline.goals, now).await?;
    insert_failures(&mut tx, run_id, BASELINE_ITERATION, &baseline.failures, now).await?;
    let failures = &baseline.failures_json;
    upsert_diagnostic(&mut *tx, run_id, "baseline_failures", failures, now).await?;
    tx.commit().await?;
    Ok(())
}

/// Stores one iteration's evidence and the run's convergence state (with
/// the `current_failures` and `fingerprint_history` diagnostics).
pub async fn save_iteration(
    pool: &AnyPool,
    run_id: &str,
    evidence: &IterationEvidence,
    now: Millis,
) -> Result<(), StoreError> {
    let iteration = evidence.iteration;
    let mut tx = pool.begin().await?;
    clear_iteration(&mut tx, run_id, iteration).await?;
    insert_artifacts(&mut tx, run_id, iteration, &evidence.artifacts, now).await?;
    insert_goal_results(&mut tx, run_id, iteration, &evidence.goals, now).await?;
    insert_failures(&mut tx, run_id, iteration, &evidence.failures, now).await?;
    insert_decision(&mut tx, run_id, iteration, &evidence.decision, now).await?;
    for (kind, data) in [
        ("current_failures", &evidence.failures_json),
        ("fingerprint_history", &evidence.history_json),
        ("convergence_state", &evidence.state_json),
    ] {
        upsert_diagnostic(&mut *tx, run_id, kind, data, now).await?;
    }
    tx.commit().await?;
    Ok(())
}

async fn insert_artifacts(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &str,
    iteration: i64,
    artifacts: &ArtifactsRow,
    now: Millis,
) -> Result<(), StoreError> {
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
    .bind(&artifacts.data)
    .bind(&artifacts.missing)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

async fn insert_decision(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    run_id: &str,
    iteration: i64,
    decision: &DecisionRow,
    now: Millis,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO convergence_decisions (run_id, iteration, check_id, decision, stage, data, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(run_id)
    .bind(iteration)
    .bind(&decision.check_id)
    .bind(&decision.decision)
    .bind(decision.stage)
    .bind(&decision.data)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
