//! A run's budget: the repository's `budget:` under the operator's
//! ceilings, what each LLM call and agent run adds to it, and whether the
//! next iteration may start.

use super::context::RunContext;
use super::failure::RunFailure;
use super::usage::{LlmPrices, ceiling};
use crate::agent::outcome::AgentUsage;
use crate::llm::Usage;
use crate::model::Run;

/// The operator's ceilings and prices.
pub struct Budget {
    pub max_tokens_per_run: Option<u64>,
    pub max_cost_usd_per_run: Option<f64>,
    pub llm_prices: LlmPrices,
}

impl Budget {
    /// Why the run may not start another iteration, if it may not.
    pub fn exhausted(&self, ctx: &RunContext) -> Option<RunFailure> {
        let run = &ctx.run;
        let budget = &ctx.config.budget;
        if let Some(max) = ceiling(budget.max_tokens, self.max_tokens_per_run)
            && run.tokens_used >= max
        {
            return Some(RunFailure::TokenBudget {
                used: run.tokens_used,
                max,
            });
        }
        if let Some(max_usd) = ceiling(budget.max_cost_usd, self.max_cost_usd_per_run)
            && run.cost_usd >= max_usd
        {
            return Some(RunFailure::CostBudget {
                used_usd: run.cost_usd,
                max_usd,
            });
        }
        None
    }

    /// Counts an LLM call: its tokens, and its cost at the operator's prices.
    pub fn add_llm(&self, run: &mut Run, usage: Usage) {
        run.tokens_used = run
            .tokens_used
            .saturating_add(usage.input_tokens)
            .saturating_add(usage.output_tokens);
        run.cost_usd += self.llm_prices.cost(&usage);
    }

    /// Counts what an agent run reported spending.
    pub fn add_agent(&self, run: &mut Run, spent: &AgentUsage) {
        run.tokens_used = run.tokens_used.saturating_add(spent.tokens.total());
        run.cost_usd += spent.cost_usd.unwrap_or(0.0);
    }
}
