//! How a run ends without a verified result: FAILED (iteration limit,
//! convergence stage 3, broken baseline, agent or setup failure) gets
//! `closer:failed` and one diagnosis comment and the issue stays open;
//! STOPPED (the issue was closed by a person, `/closer stop`) only updates
//! the status comment.
//!
//! The state is written first; the label and the diagnosis are posted after
//! and remembered in the run data, so a crash in between repeats them once.

use serde::{Deserialize, Serialize};

use super::context::RunContext;
use super::data::IterationRecord;
use super::{Engine, EngineError};
use crate::comment::{
    self, BudgetExceeded, DiagnosisView, FailureReason, FingerprintRow, StageAttempt,
};
use crate::engine::tolerance::failure_id;
use crate::model::{Decision, Outcome, Run, RunState, Stage};

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
    /// The worktree was not the commit verification checked, so it was
    /// not pushed.
    PushRefused {
        detail: String,
    },
    /// GitHub refused to take the change to the workflow file `path` from
    /// the App (it has no `workflows` permission).
    WorkflowRefused {
        path: String,
    },
    /// The repository's rules (rulesets, branch protection) declined the
    /// push; GitHub named `rules`.
    RulesRefused {
        rules: Vec<String>,
    },
    /// The agent, the LLM or the setup failed.
    Error {
        message: String,
    },
    /// The run's steps failed for good `times` in a row, each after all
    /// its tries (reconciliation queued them again in between); `error`
    /// is the last one's.
    StepsFailed {
        times: u32,
        error: String,
    },
    /// The run's pull request was closed without being merged.
    PullRequestClosed {
        number: u64,
    },
}

impl RunFailure {
    /// The run spent its iterations or its budget.
    fn is_limit(&self) -> bool {
        matches!(
            self,
            RunFailure::IterationLimit { .. }
                | RunFailure::TokenBudget { .. }
                | RunFailure::CostBudget { .. }
        )
    }

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
            RunFailure::PushRefused { detail } => FailureReason::PushRefused {
                detail: detail.clone(),
            },
            RunFailure::WorkflowRefused { path } => {
                FailureReason::WorkflowRefused { path: path.clone() }
            }
            RunFailure::RulesRefused { rules } => FailureReason::RulesRefused {
                rules: rules.clone(),
            },
            RunFailure::Error { message } => FailureReason::AgentError {
                message: message.clone(),
            },
            RunFailure::StepsFailed { times, error } => FailureReason::StepsFailed {
                times: *times,
                error: error.clone(),
            },
            // Reported by its own comment (`pull_closed_comment`), never
            // by a diagnosis.
            RunFailure::PullRequestClosed { number } => FailureReason::AgentError {
                message: format!("pull request #{number} was closed without being merged"),
            },
        }
    }

    /// The run's outcome.
    pub fn outcome(&self) -> Outcome {
        Outcome::Failed(match self {
            RunFailure::IterationLimit { max } => format!("iteration limit {max}"),
            RunFailure::ConvergenceStopped => "convergence stage 3".to_owned(),
            RunFailure::BaselineBroken { detail } => format!("baseline broken: {detail}"),
            RunFailure::TokenBudget { used, max } => format!("token budget ({used} of {max})"),
            RunFailure::CostBudget { used_usd, max_usd } => {
                format!("cost budget (${used_usd:.2} of ${max_usd:.2})")
            }
            RunFailure::PushRefused { detail } => format!("push refused: {detail}"),
            RunFailure::WorkflowRefused { path } => format!("workflow {path} refused by GitHub"),
            RunFailure::RulesRefused { rules } => {
                format!(
                    "push declined by the repository's rules ({})",
                    rules.join(" ")
                )
            }
            RunFailure::Error { message } => message.clone(),
            RunFailure::StepsFailed { times, error } => {
                format!("its steps failed {times} times in a row: {error}")
            }
            RunFailure::PullRequestClosed { number } => {
                format!("pull request #{number} closed unmerged")
            }
        })
    }
}

/// The run as FAILED with `failure`, its diagnosis still to post.
fn set_failed(ctx: &mut RunContext, failure: RunFailure) {
    let outcome = failure.outcome();
    tracing::warn!(run = %ctx.run.id, %outcome, "run failed");
    ctx.run.state = RunState::Failed;
    ctx.run.outcome = Some(outcome);
    ctx.data.failure = Some(failure);
    ctx.data.diagnosis_posted = false;
}

impl Engine {
    /// Ends the run as FAILED and reports it.
    pub(super) async fn fail(
        &self,
        ctx: &mut RunContext,
        failure: RunFailure,
    ) -> Result<(), EngineError> {
        set_failed(ctx, failure);
        self.runs.save(ctx).await?;
        self.report_failure(ctx).await
    }

    /// [`Engine::fail`] after an iteration, unless the run's pull request
    /// ended while it worked: a maintainer's merge or close is the run's
    /// end then (`end_if_pull_ended`), not the iteration's failure, which
    /// would open again the issue the merge closed.
    pub(super) async fn fail_unless_pull_ended(
        &self,
        ctx: &mut RunContext,
        failure: RunFailure,
    ) -> Result<(), EngineError> {
        if ctx.run.pull_request.is_some() && self.end_if_pull_ended(ctx).await? {
            return Ok(());
        }
        self.fail(ctx, failure).await
    }

    /// [`Engine::fail`], only while the stored run is still in the state
    /// it was read in (reconciliation on several replicas: one of them
    /// fails the run, and reports it); `false` when it had moved on.
    pub(super) async fn fail_if_unchanged(
        &self,
        ctx: &mut RunContext,
        failure: RunFailure,
    ) -> Result<bool, EngineError> {
        let was = ctx.run.state;
        set_failed(ctx, failure);
        if !self.runs.save_if_still(ctx, was).await? {
            return Ok(false);
        }
        // Queued before the report, due after it: a process that dies
        // while reporting (a rolling upgrade ends reconciliation mid-pass)
        // leaves the report to this step, and nothing else would come for
        // a failed run (decision 255). After a report that went through,
        // the step finds nothing to do.
        if let Err(e) = self
            .runs
            .enqueue_after_recheck(&ctx.run.id, super::Step::Iterate)
            .await
        {
            tracing::warn!(run = %ctx.run.id, error = %e, "the failed run's step was not queued; reporting it now");
        }
        self.report_failure(ctx).await?;
        Ok(true)
    }

    /// The label, the diagnosis and the status of a failed run; each once.
    /// An issue closer had closed (a verified run whose pull request was
    /// then closed, or whose review round failed) is opened again, without
    /// its `phase:*` label: a closed issue never shows a failed run.
    pub(super) async fn report_failure(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        self.status.set_failed_label(ctx, true).await?;
        self.status.set_awaiting_label(ctx, false).await?;
        let reopened = ctx.data.issue_closed;
        if reopened {
            ctx.client.reopen_issue(ctx.repo(), ctx.issue()).await?;
            ctx.data.issue_closed = false;
            ctx.data.reopened = true;
            self.runs.save(ctx).await?;
        }
        let pull_closed = matches!(ctx.data.failure, Some(RunFailure::PullRequestClosed { .. }));
        // `reopened` is kept: a retry of this step after the reopen still
        // takes the label off.
        if ctx.data.reopened || pull_closed {
            self.status.clear_phase(ctx).await?;
        }
        if !ctx.data.diagnosis_posted {
            let failure = ctx.data.failure.clone().unwrap_or(RunFailure::Error {
                message: "unknown".to_owned(),
            });
            let records = self.runs.records(&ctx.run.id).await?;
            let body = match failure {
                RunFailure::PullRequestClosed { number } => {
                    comment::pull_closed_comment(number, ctx.data.reopened)
                }
                _ => comment::diagnosis_comment(&diagnosis(ctx, &failure, &records)),
            };
            // Per life of the run: a retry that fails the same way again
            // says so again.
            let generation = ctx.run.generation;
            let key = format!("diagnosis:{generation}:{}", super::triggers::digest(&body));
            self.status.post_once_for_run(ctx, &key, &body).await?;
            ctx.data.diagnosis_posted = true;
            self.runs.save(ctx).await?;
        }
        self.status.publish(ctx).await
    }

    /// Ends the run as STOPPED (the issue was closed, or `/closer stop`).
    ///
    /// A run already stopped is shown as stopped again: the earlier try of
    /// this stop may have saved the state and then met GitHub down, and
    /// its delivery, tried again, must finish the label and the status
    /// (idempotent: an unchanged status is not written).
    pub(super) async fn stop(&self, run: &Run, why: &str) -> Result<(), EngineError> {
        let outcome = Outcome::Stopped(why.to_owned());
        self.runs.mark_stopped(&run.id, &outcome).await?;
        // Read again: a step in flight may have written since `run` was
        // loaded. From here on only the stop's paths write the run.
        let Some(mut ctx) = self.context(&run.id).await? else {
            return Ok(());
        };
        self.show_stop(&mut ctx).await
    }

    /// What a stop shows on the issue: the `awaiting-response` and
    /// `phase:*` labels off and the stopped status. Made by the stop, and again by the run's
    /// [`super::Step::ShowStop`] queued with it (the status is then written
    /// only if it is not the one already written), so a stop whose writes
    /// met GitHub down is shown in the end, whatever delivery or pass made
    /// it. Nothing for a run that is not stopped (it ended otherwise, or was
    /// restarted).
    pub(super) async fn show_stop(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        if ctx.run.state != RunState::Stopped {
            return Ok(());
        }
        let shown = async {
            self.status.set_awaiting_label(ctx, false).await?;
            self.status.clear_phase_of_stopped(ctx).await?;
            self.status.publish(ctx).await
        };
        match shown.await {
            // The issue was deleted: there is nothing left to show it on.
            Err(EngineError::GitHub(e)) if e.is_gone() => Ok(()),
            shown => shown,
        }
    }
}

/// Whether a stop applies to `run`: one still going, or one stopped already
/// whose stop may not be shown yet ([`Engine::stop`]).
pub(super) fn stop_applies(run: &Run) -> bool {
    !run.state.is_final() || run.state == RunState::Stopped
}

fn diagnosis(ctx: &RunContext, failure: &RunFailure, records: &[IterationRecord]) -> DiagnosisView {
    let convergence = &ctx.data.convergence;
    let verification = records.last().and_then(|r| r.verification.as_ref());
    let evidence: Vec<String> = verification.map_or(Vec::new(), |v| v.decision.reasons.clone());
    let d = convergence.diagnosis(&evidence);
    let stages = [Stage::Normal, Stage::MinimalFix]
        .into_iter()
        .filter_map(|stage| {
            let iterations: Vec<u32> = convergence
                .history
                .iter()
                .filter(|h| h.stage == stage)
                .map(|h| h.iteration)
                .collect();
            let tried = records
                .iter()
                .filter(|r| iterations.contains(&r.summary.iteration))
                .map(|r| r.summary.brief())
                .collect::<Vec<_>>()
                .join("; ");
            (!iterations.is_empty()).then_some(StageAttempt {
                stage,
                iterations,
                tried,
            })
        })
        .collect();
    DiagnosisView {
        reason: failure.reason(),
        iterations: ctx.run.iteration,
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
        failing_since_base: verification.map_or(Vec::new(), |v| {
            v.since_base.iter().map(failure_id).collect()
        }),
        // A run fails at a limit right after a question only when the
        // question was not asked (`decide.rs`).
        unanswered: records
            .last()
            .filter(|r| r.judgment.decision == Decision::AwaitingResponse)
            .filter(|_| failure.is_limit())
            .map_or(Vec::new(), |r| r.judgment.questions.clone()),
        dashboard_url: None,
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
            RunFailure::PushRefused {
                detail: "HEAD moved".into(),
            },
            RunFailure::Error {
                message: "no LLM".into(),
            },
            RunFailure::PullRequestClosed { number: 7 },
        ];
        for failure in all {
            let json = serde_json::to_string(&failure).unwrap();
            let back: RunFailure = serde_json::from_str(&json).unwrap();
            assert_eq!(back, failure);
            assert!(failure.outcome().to_string().starts_with("failed: "));
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
