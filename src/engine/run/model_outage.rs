//! The agent's own model provider down (its tool said so after its own
//! retries: a 5xx, 529 overloaded, 429, no answer): the iteration is not
//! counted. The run goes back to where it stood before the iteration began
//! (its number, its row), the status comment says why it waits, and the
//! step is deferred like any outage (the queue's backoff, no attempt
//! spent); the same iteration runs again, with the same prompt, in the same
//! worktree, continuing the tool's session.
//!
//! A run never waits silently forever: after [`MODEL_OUTAGE_PATIENCE`] of
//! the provider failing, counted from the first interrupted attempt, the
//! run fails with a diagnosis (the last attempt is then recorded as an
//! iteration). The wait is kept in the run's data, so it survives restarts
//! and job re-creation; an agent run that ends any other way clears it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::context::RunContext;
use super::iterate::Iteration;
use super::{Engine, EngineError};
use crate::agent::adapter::AgentResult;
use crate::clock::Millis;
use crate::store::runs;

/// How long a run waits for its agent's model provider before it fails:
/// long enough for a provider's bad afternoon, short enough that a
/// misconfigured endpoint (a wrong port refuses every connection) is
/// reported the same day, and shorter than the queue's day of patience
/// with a deferred job (decision 80), so the run decides, not the queue.
pub const MODEL_OUTAGE_PATIENCE: Duration = Duration::from_secs(6 * 3600);

/// A run waiting for its agent's model provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelOutage {
    /// When the first attempt the outage interrupted ended (ms).
    pub since: Millis,
    /// How many attempts it interrupted so far.
    pub attempts: u32,
    /// The tool's own words, the last time.
    pub detail: String,
}

impl ModelOutage {
    /// The wait in a sentence, for the status comment: the same on every
    /// attempt while the tool says the same, so the comment is not edited
    /// for each one.
    pub fn describe(&self) -> String {
        let since = chrono::DateTime::from_timestamp_millis(self.since)
            .map_or_else(String::new, |t| {
                format!(" since {}", t.format("%Y-%m-%d %H:%M UTC"))
            });
        format!(
            "the agent's model provider is unavailable{since}: {}",
            self.detail
        )
    }
}

impl Engine {
    /// The agent ended because its model provider is down: the iteration
    /// is taken back and the step deferred, or, past the patience, the run
    /// fails saying so.
    pub(super) async fn model_down(
        &self,
        ctx: &mut RunContext,
        iteration: &Iteration,
        result: &AgentResult,
        detail: &str,
    ) -> Result<(), EngineError> {
        let now = self.runs.store().now_ms();
        let outage = ctx.data.model_outage.get_or_insert(ModelOutage {
            since: now,
            attempts: 0,
            detail: String::new(),
        });
        outage.attempts += 1;
        outage.detail = detail.to_owned();
        let waited = Duration::from_millis(now.saturating_sub(outage.since).max(0) as u64);
        tracing::warn!(run = %ctx.run.id, iteration = iteration.n, attempts = outage.attempts,
            waited_s = waited.as_secs(), %detail, "the agent's model provider is unavailable");
        if waited >= MODEL_OUTAGE_PATIENCE {
            let message = gave_up(outage, waited);
            ctx.data.model_outage = None;
            return self.cannot_run(ctx, iteration, result, message).await;
        }
        ctx.run.iteration = iteration.n.saturating_sub(1);
        // The iteration's work is discarded: what the next attempt spends
        // is counted afresh (what this one spent stays counted).
        ctx.data.usage_counted = None;
        self.runs.save(ctx).await?;
        let pool = self.runs.store().pool();
        runs::discard_iteration(pool, &ctx.run.id, iteration.n).await?;
        // The outage's backoff comes first: a booked status write waits
        // for the next step's edit rather than send this one back soon.
        match self.status.publish(ctx).await {
            Ok(()) | Err(EngineError::Busy(_)) => {}
            Err(e) => return Err(e),
        }
        Err(EngineError::AgentModelUnavailable(detail.to_owned()))
    }

    /// An agent run that ended otherwise ends the wait.
    pub(super) async fn model_back(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        if let Some(outage) = ctx.data.model_outage.take() {
            tracing::info!(run = %ctx.run.id, attempts = outage.attempts, "the agent's model provider answers again");
            self.runs.save(ctx).await?;
        }
        Ok(())
    }
}

/// The diagnosis of a run that stopped waiting.
fn gave_up(outage: &ModelOutage, waited: Duration) -> String {
    format!(
        "the agent's model provider was still unavailable after {} h of waiting ({} attempts): {}",
        waited.as_secs() / 3600,
        outage.attempts,
        outage.detail
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_is_described_since_it_began() {
        let outage = ModelOutage {
            since: 1_795_446_000_000,
            attempts: 3,
            detail: "API Error: 529 Overloaded".into(),
        };
        assert_eq!(
            outage.describe(),
            "the agent's model provider is unavailable since 2026-11-23 15:00 UTC: API Error: 529 Overloaded"
        );
        assert_eq!(
            gave_up(&outage, MODEL_OUTAGE_PATIENCE),
            "the agent's model provider was still unavailable after 6 h of waiting (3 attempts): API Error: 529 Overloaded"
        );
    }

    #[test]
    fn the_run_decides_before_the_queue_gives_up_on_the_job() {
        assert!(MODEL_OUTAGE_PATIENCE < crate::store::jobs::OUTAGE_PATIENCE);
    }
}
