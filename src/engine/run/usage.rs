//! What a run spends, for its budget: the tokens and cost an agent reports
//! in its structured output (claude-code, codex, opencode or any `command`
//! agent), and the cost of the engine's own LLM calls at the operator's
//! prices.
//!
//! Agent output is untrusted: anything that is not a non-negative number is
//! ignored, never an error and never a panic.

use serde_json::Value;

use crate::llm::Usage;

/// What one agent run reported spending.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct AgentUsage {
    pub tokens: u64,
    pub cost_usd: f64,
}

/// Reads the tokens and cost an agent reported: `usage.total_tokens`, else
/// `usage.input_tokens + usage.output_tokens` (claude-code, codex, any
/// `command` agent); opencode's `tokens[]` (`input + output + reasoning`);
/// cost from `total_cost_usd` (claude-code), `cost_usd` or `cost` (opencode).
pub fn agent_usage(structured: &Value) -> AgentUsage {
    let mut tokens = 0;
    if let Some(usage) = structured.get("usage") {
        tokens = match count(usage.get("total_tokens")) {
            Some(total) => total,
            None => {
                count(usage.get("input_tokens")).unwrap_or(0)
                    + count(usage.get("output_tokens")).unwrap_or(0)
            }
        };
    }
    if let Some(steps) = structured.get("tokens").and_then(Value::as_array) {
        tokens += steps
            .iter()
            .map(|t| {
                ["input", "output", "reasoning"]
                    .iter()
                    .filter_map(|k| count(t.get(*k)))
                    .sum::<u64>()
            })
            .sum::<u64>();
    }
    let cost_usd = ["total_cost_usd", "cost_usd", "cost"]
        .iter()
        .find_map(|k| dollars(structured.get(*k)))
        .unwrap_or(0.0);
    AgentUsage { tokens, cost_usd }
}

fn count(v: Option<&Value>) -> Option<u64> {
    v.and_then(Value::as_u64)
}

fn dollars(v: Option<&Value>) -> Option<f64> {
    v.and_then(Value::as_f64)
        .filter(|c| c.is_finite() && *c >= 0.0)
}

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
    use serde_json::json;

    #[test]
    fn reads_what_each_agent_reports() {
        let claude = json!({"type": "result", "total_cost_usd": 0.031,
            "usage": {"input_tokens": 12, "output_tokens": 40}});
        assert_eq!(
            agent_usage(&claude),
            AgentUsage {
                tokens: 52,
                cost_usd: 0.031
            }
        );
        let codex = json!({"usage": {"input_tokens": 24763, "cached_input_tokens": 24448,
            "output_tokens": 122}});
        assert_eq!(agent_usage(&codex).tokens, 24885);
        let total = json!({"usage": {"total_tokens": 900, "input_tokens": 1}});
        assert_eq!(agent_usage(&total).tokens, 900);
        let opencode = json!({"cost": 0.002, "tokens": [
            {"input": 671, "output": 8, "reasoning": 1, "cache": {"read": 21415}},
            {"input": 10, "output": 2}]});
        assert_eq!(
            agent_usage(&opencode),
            AgentUsage {
                tokens: 692,
                cost_usd: 0.002
            }
        );
    }

    #[test]
    fn bad_or_missing_numbers_count_as_nothing() {
        for bad in [
            json!({}),
            json!("text"),
            json!({"usage": "lots", "cost": "free"}),
            json!({"usage": {"input_tokens": -5, "output_tokens": 1.5}, "total_cost_usd": -1.0}),
            json!({"tokens": [null, 3, {"input": "x"}]}),
        ] {
            assert_eq!(agent_usage(&bad), AgentUsage::default(), "{bad}");
        }
    }

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
