//! The engine's verification evidence in the store: converts baselines,
//! iterations and their failures to the store's plain rows and back, with
//! the same functions the store offers, in the engine's types. A name read
//! back that the engine does not know (a goal level, a runner) is an error
//! naming the column and the value, never a default.

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::AnyPool;

use super::artifacts::{ArtifactKind, Artifacts};
use super::baseline::Baseline;
use super::convergence::{ConvergenceState, Verdict};
use super::fingerprint::{Failure, Runner};
use super::goals::GoalResult;
use super::verify::IterationVerification;
use crate::clock::Millis;
use crate::model::UnknownValue;
use crate::store::StoreError;
use crate::store::verification::{
    self as stored, ArtifactsRow, BaselineEvidence, DecisionRow, FailureRow, GoalRow,
    IterationEvidence,
};

pub use crate::store::verification::{
    BASELINE_ITERATION, DIAGNOSTIC_KINDS, diagnostic, diagnostics,
};

/// A stored failure and whether it was new against the baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFailure {
    pub failure: Failure,
    pub is_new: bool,
}

/// Stores the baseline as iteration 0.
pub async fn save_baseline(
    pool: &AnyPool,
    run_id: &str,
    baseline: &Baseline,
    now: Millis,
) -> Result<(), StoreError> {
    let evidence = BaselineEvidence {
        goals: baseline
            .goals
            .iter()
            .map(goal_row)
            .collect::<Result<_, _>>()?,
        failures: failure_rows(&baseline.failures, |_| false)?,
        failures_json: to_json(&baseline.failures)?,
    };
    stored::save_baseline(pool, run_id, &evidence, now).await
}

/// Stores one iteration's verification and the run's convergence state.
pub async fn save_iteration(
    pool: &AnyPool,
    run_id: &str,
    verification: &IterationVerification,
    state: &ConvergenceState,
    now: Millis,
) -> Result<(), StoreError> {
    let artifacts = &verification.artifacts;
    let decision = &verification.decision;
    let new = |f: &Failure| {
        verification
            .new_failures
            .iter()
            .any(|n| n.fingerprint == f.fingerprint)
    };
    let evidence = IterationEvidence {
        iteration: i64::from(verification.iteration),
        artifacts: ArtifactsRow {
            base_commit: artifacts.base_commit.clone(),
            head: artifacts.head.clone(),
            branch: artifacts.branch.clone(),
            diff_hash: artifacts.diff_hash.clone(),
            data: to_json(artifacts)?,
            missing: to_json(&verification.missing_artifacts)?,
        },
        goals: verification
            .goals
            .iter()
            .map(goal_row)
            .collect::<Result<_, _>>()?,
        failures: failure_rows(&verification.failures, new)?,
        decision: DecisionRow {
            check_id: decision.check_id.0.clone(),
            decision: name(&decision.decision)?,
            stage: i64::from(decision.stage.number()),
            data: to_json(decision)?,
        },
        failures_json: to_json(&verification.failures)?,
        history_json: to_json(&state.history)?,
        state_json: to_json(state)?,
    };
    stored::save_iteration(pool, run_id, &evidence, now).await
}

/// The artifacts stored for an iteration, with the missing kinds.
pub async fn artifacts(
    pool: &AnyPool,
    run_id: &str,
    iteration: i64,
) -> Result<Option<(Artifacts, Vec<ArtifactKind>)>, StoreError> {
    let Some(row) = stored::artifacts(pool, run_id, iteration).await? else {
        return Ok(None);
    };
    Ok(Some((from_json(&row.data)?, from_json(&row.missing)?)))
}

/// The goal results of an iteration (0 = baseline), in evaluation order.
/// Their failures are read with [`failures`].
pub async fn goal_results(
    pool: &AnyPool,
    run_id: &str,
    iteration: i64,
) -> Result<Vec<GoalResult>, StoreError> {
    let rows = stored::goal_results(pool, run_id, iteration).await?;
    rows.into_iter()
        .map(|r| {
            Ok(GoalResult {
                level: read_name("goal_results.level", &r.level)?,
                goal_type: r.goal_type,
                target: r.target,
                passed: r.passed,
                required: r.required,
                not_runnable: r.not_runnable,
                tolerated: r.tolerated,
                duration_ms: r.duration_ms,
                evidence: r.evidence,
                failures: Vec::new(),
                passed_tests: Vec::new(),
                started_tests: Vec::new(),
                output_cut: false,
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
    let rows = stored::failures(pool, run_id, iteration).await?;
    rows.into_iter()
        .map(|r| {
            Ok(StoredFailure {
                failure: Failure {
                    fingerprint: r.fingerprint,
                    runner: read_name::<Runner>("failures.runner", &r.runner)?,
                    command: r.command,
                    test: r.test,
                    location: r.location,
                    error: r.error,
                },
                is_new: r.is_new,
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
    stored::decision(pool, run_id, iteration)
        .await?
        .map(|d| from_json(&d))
        .transpose()
}

/// The run's newest decision: the only one that is current.
pub async fn latest_decision(pool: &AnyPool, run_id: &str) -> Result<Option<Verdict>, StoreError> {
    stored::latest_decision(pool, run_id)
        .await?
        .map(|d| from_json(&d))
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

fn goal_row(goal: &GoalResult) -> Result<GoalRow, StoreError> {
    Ok(GoalRow {
        level: goal.level.as_str().to_owned(),
        goal_type: goal.goal_type.clone(),
        target: goal.target.clone(),
        passed: goal.passed,
        required: goal.required,
        not_runnable: goal.not_runnable,
        tolerated: goal.tolerated,
        duration_ms: goal.duration_ms,
        evidence: goal.evidence.clone(),
    })
}

/// The failures, once per fingerprint, with whether each is new.
fn failure_rows(
    failures: &[Failure],
    is_new: impl Fn(&Failure) -> bool,
) -> Result<Vec<FailureRow>, StoreError> {
    let mut seen = std::collections::HashSet::new();
    failures
        .iter()
        .filter(|f| seen.insert(f.fingerprint.clone()))
        .map(|f| {
            Ok(FailureRow {
                fingerprint: f.fingerprint.clone(),
                runner: name(&f.runner)?,
                command: f.command.clone(),
                test: f.test.clone(),
                location: f.location.clone(),
                error: f.error.clone(),
                is_new: is_new(f),
            })
        })
        .collect()
}

fn to_json<T: Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| StoreError::Payload(e.to_string()))
}

fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Payload(e.to_string()))
}

/// A unit enum's serde name.
fn name<T: Serialize>(value: &T) -> Result<String, StoreError> {
    match serde_json::to_value(value).map_err(|e| StoreError::Payload(e.to_string()))? {
        serde_json::Value::String(s) => Ok(s),
        other => Err(StoreError::Payload(format!("not a name: {other}"))),
    }
}

/// A unit enum read back from its serde name; an unknown one names the
/// column and the value.
fn read_name<T: DeserializeOwned>(column: &'static str, value: &str) -> Result<T, StoreError> {
    serde_json::from_value(serde_json::Value::String(value.to_owned())).map_err(|_| {
        StoreError::Unknown(UnknownValue {
            column,
            value: value.to_owned(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_goal_level_or_runner_names_the_column_and_the_value() {
        use crate::engine::goals::GoalLevel;
        let e = read_name::<GoalLevel>("goal_results.level", "cosmic").unwrap_err();
        assert_eq!(
            e.to_string(),
            "database holds unknown value \"cosmic\" in column goal_results.level"
        );
        assert!(read_name::<GoalLevel>("goal_results.level", "dod").is_ok());
        assert!(read_name::<Runner>("failures.runner", "tap").is_ok());
        assert!(read_name::<Runner>("failures.runner", "nose").is_err());
    }
}
