//! The `start` step: labels, the phase, a retry's cleanup, the task type,
//! the worktree and the baseline; then the first iteration is queued. An
//! LLM that cannot be reached for the task type defers the step; one that
//! refuses closer's requests fails the run, naming the `[llm]` settings.

use super::context::RunContext;
use super::failure::RunFailure;
use super::{Engine, EngineError, Step, other};
use crate::agent::sandbox::Worktree;
use crate::agent::sandbox::purpose::Purpose;
use crate::engine::baseline::{self, Baseline};
use crate::engine::classify::{ClassifyError, classify};
use crate::engine::evidence;
use crate::llm::LlmError;
use crate::model::{Phase, RunState, TaskType};

/// What the operator must set for runs to be judged at all.
const NO_LLM: &str = "closer has no LLM configured; the operator must set CLOSER_LLM_PROVIDER, \
     CLOSER_LLM_BASE_URL and CLOSER_LLM_MODEL";

/// The diagnosis of an LLM that refuses closer's requests.
pub(super) fn llm_refused(e: &LlmError) -> String {
    match e {
        LlmError::Truncated => format!(
            "{e}. The LLM's answers are cut short, and the next would be as long; the operator \
             must raise the limit: `[llm] max_output_tokens` for Anthropic (up to what the model \
             allows), the server's own limit on answers for an OpenAI-compatible one; then \
             `/closer retry`"
        ),
        _ => format!(
            "{e}. The LLM refuses closer's requests; the operator must fix the `[llm]` settings \
             (CLOSER_LLM_API_KEY, CLOSER_LLM_MODEL), then `/closer retry`"
        ),
    }
}

impl Engine {
    pub(super) async fn start(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        let trigger = ctx.config.trigger_label.clone();
        self.status
            .ensure_labels(&ctx.client, ctx.repo(), &trigger)
            .await?;
        self.status.set_phase(ctx, Phase::Preparation).await?;
        // A retry: the run is no longer failed.
        self.status.set_failed_label(ctx, false).await?;
        if self.checks.llm().is_none() {
            tracing::error!(run = %ctx.run.id, "no LLM configured (CLOSER_LLM_*): runs cannot be judged");
            let message = NO_LLM.to_owned();
            return self.fail(ctx, RunFailure::Error { message }).await;
        }
        self.classify(ctx).await?;
        if ctx.run.state.is_final() {
            return Ok(()); // the LLM refused: the run failed, with the reason
        }
        if ctx.data.afresh {
            // Restarted after its pull request was merged: the old worktree,
            // branch and base go, and `prepare` starts at the default
            // branch's head.
            self.workspace.discard(ctx).await?;
        }
        let worktree = match self.workspace.prepare(ctx).await {
            Ok(worktree) => worktree,
            // Tried again, it would fail the same way until somebody
            // pushes: the run fails at once, saying so (decision 260).
            Err(EngineError::EmptyRepository) => {
                let message = "the repository has no commits yet, so there is nothing to work \
                               from: push a first commit to its default branch, then comment \
                               `/closer retry`"
                    .to_owned();
                return self.fail(ctx, RunFailure::Error { message }).await;
            }
            Err(e) => return Err(e),
        };
        ctx.data.afresh = false;
        match self.baseline(ctx, &worktree).await? {
            Ok(b) => {
                let now = self.runs.store().now_ms();
                evidence::save_baseline(self.runs.store().pool(), ctx.run.id.as_str(), &b, now)
                    .await?;
                ctx.data.baseline = Some(b);
            }
            Err(detail) => return self.fail(ctx, RunFailure::BaselineBroken { detail }).await,
        }
        ctx.run.base_commit = Some(worktree.base_commit.clone());
        ctx.data.worktree = Some(worktree);
        ctx.run.state = RunState::Running;
        self.runs.save(ctx).await?;
        self.runs.enqueue(&ctx.run.id, Step::Iterate).await?;
        // The step's one status edit: iteration 1 is being worked on.
        self.status.publish(ctx).await
    }

    /// The task type, once: the `type:*` label, else the LLM.
    async fn classify(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        let Some(llm) = self.checks.llm() else {
            return Ok(());
        };
        if ctx.run.task_type.is_some() {
            return Ok(());
        }
        let prompts = self.checks.prompts(ctx);
        let data = &ctx.data;
        let classified = classify(
            &data.issue_labels,
            &data.issue_title,
            &data.issue_body,
            &llm,
            &prompts,
        )
        .await;
        let c = match classified {
            Ok(c) => c,
            Err(ClassifyError::Llm(e)) if e.is_outage() => {
                return Err(EngineError::LlmUnavailable(e.to_string()));
            }
            Err(ClassifyError::Llm(e)) if e.is_refusal() => {
                let message = llm_refused(&e);
                return self.fail(ctx, RunFailure::Error { message }).await;
            }
            Err(e) => return Err(other(format!("classifying the issue failed: {e}"))),
        };
        ctx.run.task_type = Some(c.task_type);
        self.budget.add_llm(&mut ctx.run, c.usage);
        self.runs.save(ctx).await
    }

    /// The baseline on a clean checkout of the base commit; `Err` with the
    /// reason when the baseline itself cannot be taken.
    async fn baseline(
        &self,
        ctx: &RunContext,
        worktree: &Worktree,
    ) -> Result<Result<Baseline, String>, EngineError> {
        let run_id = ctx.run.id.as_str();
        let base = &worktree.base_commit;
        let clean = self
            .checkout(worktree, run_id, base, Purpose::Baseline)
            .await?;
        let taken = baseline::take(
            self.workspace.sandbox().git(),
            &clean.worktree,
            Some(&clean.home),
            (&ctx.config, ctx.run.task_type.unwrap_or(TaskType::Feature)),
            self.checks.goals(),
        )
        .await;
        self.release(clean, run_id).await;
        Ok(taken.map_err(|e| e.to_string()))
    }
}
