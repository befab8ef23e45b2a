//! How a run ends without a verified result: FAILED (iteration limit,
//! convergence stage 3, broken baseline, agent or setup failure) gets
//! `closer:failed` and one diagnosis comment and the issue stays open;
//! STOPPED (the issue was closed by a person, `/closer stop`) only updates
//! the status comment.
//!
//! The state is written first; the label and the diagnosis are posted after
//! and remembered in the run data, so a crash in between repeats them once.

use serde::{Deserialize, Serialize};

use super::data::RunData;
use super::{Engine, EngineError, state};
use crate::comment::{
    self, BudgetExceeded, DiagnosisView, FailureReason, FingerprintRow, Stage as ViewStage,
    StageAttempt,
};
use crate::engine::convergence::Stage;
use crate::github::InstallationClient;
use crate::github::types::IssueNumber;
use crate::store::runs::{self, RunRow};

/// Why a run failed, as stored in the run data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RunFailure {
    IterationLimit {
        max: u32,
    },
    ConvergenceStopped,
    BaselineBroken {
        detail: String,
    },
    /// The next iteration would exceed the run's token budget.
    TokenBudget {
        used: u64,
        max: u64,
    },
    /// The next iteration would exceed the run's cost budget.
    CostBudget {
        used_usd: f64,
        max_usd: f64,
    },
    /// The agent, the LLM or the setup failed.
    Error {
        message: String,
    },
}

impl RunFailure {
    fn reason(&self) -> FailureReason {
        match self {
            RunFailure::IterationLimit { max } => FailureReason::IterationLimit { max: *max },
            RunFailure::ConvergenceStopped => FailureReason::ConvergenceStopped,
            RunFailure::BaselineBroken { detail } => FailureReason::BaselineBroken {
                detail: detail.clone(),
            },
            RunFailure::TokenBudget { used, max } => {
                FailureReason::BudgetExceeded(BudgetExceeded::Tokens {
                    used: *used,
                    max: *max,
                })
            }
            RunFailure::CostBudget { used_usd, max_usd } => {
                FailureReason::BudgetExceeded(BudgetExceeded::Cost {
                    used_usd: *used_usd,
                    max_usd: *max_usd,
                })
            }
            RunFailure::Error { message } => FailureReason::AgentError {
                message: message.clone(),
            },
        }
    }

    /// One line for `runs.outcome`.
    pub fn outcome(&self) -> String {
        match self {
            RunFailure::IterationLimit { max } => format!("failed: iteration limit {max}"),
            RunFailure::ConvergenceStopped => "failed: convergence stage 3".to_owned(),
            RunFailure::BaselineBroken { detail } => format!("failed: baseline broken: {detail}"),
            RunFailure::TokenBudget { used, max } => {
                format!("failed: token budget ({used} of {max})")
            }
            RunFailure::CostBudget { used_usd, max_usd } => {
                format!("failed: cost budget (${used_usd:.2} of ${max_usd:.2})")
            }
            RunFailure::Error { message } => format!("failed: {message}"),
        }
    }
}

impl Engine {
    /// Ends the run as FAILED and reports it.
    pub(super) async fn fail(
        &self,
        client: &InstallationClient,
        mut run: RunRow,
        mut data: RunData,
        failure: RunFailure,
    ) -> Result<(), EngineError> {
        tracing::warn!(run = %run.id, outcome = %failure.outcome(), "run failed");
        run.state = state::FAILED.to_owned();
        run.outcome = Some(failure.outcome());
        data.failure = Some(serde_json::to_string(&failure).unwrap_or_default());
        data.diagnosis_posted = false;
        self.save(&mut run, &data).await?;
        self.report_failure(client, run, data).await
    }

    /// The label, the diagnosis and the status of a failed run; each once.
    pub(super) async fn report_failure(
        &self,
        client: &InstallationClient,
        mut run: RunRow,
        mut data: RunData,
    ) -> Result<(), EngineError> {
        let repo = Self::repo_name(&run)?;
        let number = IssueNumber(run.issue_number as u64);
        if !data.failed_label {
            client
                .add_labels(&repo, number, &[comment::labels::FAILED])
                .await?;
            data.failed_label = true;
            self.save(&mut run, &data).await?;
        }
        if data.awaiting_label {
            client
                .remove_label(&repo, number, comment::labels::AWAITING_RESPONSE)
                .await?;
            data.awaiting_label = false;
            self.save(&mut run, &data).await?;
        }
        if !data.diagnosis_posted {
            let failure = data
                .failure
                .as_deref()
                .and_then(|f| serde_json::from_str::<RunFailure>(f).ok())
                .unwrap_or(RunFailure::Error {
                    message: "unknown".to_owned(),
                });
            let body = comment::diagnosis_comment(&self.diagnosis(&run, &data, &failure));
            self.post_once_for_run(client, &run, "diagnosis", &body)
                .await?;
            data.diagnosis_posted = true;
            self.save(&mut run, &data).await?;
        }
        self.publish_status(client, &mut run, &mut data).await
    }

    fn diagnosis(&self, run: &RunRow, data: &RunData, failure: &RunFailure) -> DiagnosisView {
        let d = data.convergence.diagnosis(&[]);
        let stages = [Stage::Normal, Stage::MinimalFix]
            .into_iter()
            .filter_map(|stage| {
                let iterations: Vec<u32> = data
                    .convergence
                    .history
                    .iter()
                    .filter(|h| h.stage == stage)
                    .map(|h| h.iteration)
                    .collect();
                (!iterations.is_empty()).then(|| StageAttempt {
                    stage: match stage {
                        Stage::Normal => ViewStage::Normal,
                        _ => ViewStage::MinimalFix,
                    },
                    iterations,
                    tried: String::new(),
                })
            })
            .collect();
        DiagnosisView {
            reason: failure.reason(),
            iterations: run.iteration.max(0) as u32,
            fingerprints: d
                .repeated
                .iter()
                .map(|r| FingerprintRow {
                    description: r.summary.clone(),
                    hash: r.fingerprint.clone(),
                    occurrences: r.count,
                })
                .collect(),
            stages,
            last_evidence: (!d.last_evidence.is_empty()).then(|| d.last_evidence.join("\n")),
            dashboard_url: None,
        }
    }

    /// Ends the run as STOPPED (the issue was closed, or `/closer stop`).
    pub(super) async fn stop(&self, run: RunRow, why: &str) -> Result<(), EngineError> {
        let outcome = format!("stopped: {why}");
        let now = self.store.now_ms();
        if !runs::mark_stopped(self.store.pool(), &run.id, &outcome, now).await? {
            // It ended (done, failed) since `run` was loaded: nothing to stop.
            return Ok(());
        }
        // Read again: a step in flight may have written since `run` was
        // loaded. From here on only this path writes the run.
        let Some(mut run) = self.load(&run.id).await? else {
            return Ok(());
        };
        let mut data = RunData::from_json(&run.data);
        let client = self.client(run.installation_id).await?;
        let repo = Self::repo_name(&run)?;
        self.set_awaiting_label(&client, &repo, &mut run, &mut data, false)
            .await?;
        self.publish_status(&client, &mut run, &mut data).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_survives_the_run_data_and_names_its_reason() {
        let all = [
            RunFailure::IterationLimit { max: 3 },
            RunFailure::ConvergenceStopped,
            RunFailure::BaselineBroken {
                detail: "cargo missing".into(),
            },
            RunFailure::TokenBudget {
                used: 240,
                max: 200,
            },
            RunFailure::CostBudget {
                used_usd: 0.75,
                max_usd: 0.5,
            },
            RunFailure::Error {
                message: "no LLM".into(),
            },
        ];
        for failure in all {
            let json = serde_json::to_string(&failure).unwrap();
            let back: RunFailure = serde_json::from_str(&json).unwrap();
            assert_eq!(back, failure);
            assert!(failure.outcome().starts_with("failed: "));
        }
        assert_eq!(
            RunFailure::TokenBudget {
                used: 240,
                max: 200
            }
            .reason(),
            FailureReason::BudgetExceeded(BudgetExceeded::Tokens {
                used: 240,
                max: 200
            })
        );
    }
}
