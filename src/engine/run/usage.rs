//! What a run spends, for its budget: the cost of the engine's own LLM
//! calls at the operator's prices, and the tighter of two ceilings. What an
//! agent spent is read by its adapter (`agent::outcome::AgentUsage`).

use crate::llm::Usage;

/// The operator's LLM prices (`[llm] input_usd_per_mtok`,
/// `output_usd_per_mtok`); unset prices count as free.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LlmPrices {
    /// US dollars per million input tokens.
    pub input_usd_per_mtok: f64,
    /// US dollars per million output tokens.
    pub output_usd_per_mtok: f64,
}

impl LlmPrices {
    /// What `usage` cost at these prices.
    pub fn cost(&self, usage: &Usage) -> f64 {
        (usage.input_tokens as f64 * self.input_usd_per_mtok
            + usage.output_tokens as f64 * self.output_usd_per_mtok)
            / 1_000_000.0
    }
}

/// The tighter of the repository's budget and the operator's ceiling.
pub fn ceiling<T: PartialOrd>(repo: Option<T>, operator: Option<T>) -> Option<T> {
    match (repo, operator) {
        (Some(r), Some(o)) => Some(if r < o { r } else { o }),
        (r, o) => r.or(o),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llm_usage_is_priced_per_million_tokens() {
        let prices = LlmPrices {
            input_usd_per_mtok: 3.0,
            output_usd_per_mtok: 15.0,
        };
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
        };
        assert!((prices.cost(&usage) - 4.5).abs() < 1e-9);
        assert_eq!(LlmPrices::default().cost(&usage), 0.0);
    }

    #[test]
    fn the_operator_ceiling_wins_when_tighter() {
        assert_eq!(ceiling(Some(5.0), Some(2.0)), Some(2.0));
        assert_eq!(ceiling(Some(1.0), Some(2.0)), Some(1.0));
        assert_eq!(ceiling(None, Some(2u64)), Some(2));
        assert_eq!(ceiling(Some(3u64), None), Some(3));
        assert_eq!(ceiling::<u64>(None, None), None);
    }
}
