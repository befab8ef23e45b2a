//! `manual`: complete when the agent's output contains the keyword AND the
//! objective goals pass: the keyword alone is only a claim.

use serde_json::{Map, Value, json};

use crate::config::repo::CompletionType;
use crate::engine::completion_check::CheckResult;
use crate::engine::handlers::{
    CompletionCriteria, CompletionHandler, HandlerVerdict, IterationSummary, goals_block,
};
use crate::llm::BoxFuture;

/// Completes on a keyword plus passing goals.
#[derive(Debug, Clone)]
pub struct ManualHandler {
    keyword: String,
}

impl ManualHandler {
    /// A handler waiting for `keyword`.
    pub fn new(keyword: &str) -> Self {
        Self {
            keyword: keyword.to_owned(),
        }
    }

    fn said(&self, summary: &IterationSummary) -> bool {
        !self.keyword.is_empty()
            && (summary.output_text.contains(&self.keyword)
                || summary
                    .structured_output
                    .to_string()
                    .contains(&self.keyword))
    }
}

impl CompletionHandler for ManualHandler {
    fn kind(&self) -> CompletionType {
        CompletionType::Manual
    }

    fn criteria(&self) -> CompletionCriteria {
        CompletionCriteria {
            short: format!("output \"{}\" when done (goals must pass)", self.keyword),
            detailed: format!(
                "When the task is complete, output \"{}\" to signal completion. Do not output this keyword until you are \
                 certain the task is fully complete: closer also runs the required goals, and the keyword counts only when they pass.",
                self.keyword
            ),
        }
    }

    fn extra_params(&self, _: &[IterationSummary], _: u32) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("keyword".into(), json!(self.keyword));
        m
    }

    fn is_complete<'a>(
        &'a self,
        summary: &'a IterationSummary,
        _: Option<&'a CheckResult>,
    ) -> BoxFuture<'a, HandlerVerdict> {
        let verdict = if summary.failed {
            HandlerVerdict::done(false, "the agent run failed")
        } else if !self.said(summary) {
            HandlerVerdict::done(
                false,
                format!("the keyword \"{}\" was not in the output", self.keyword),
            )
        } else if let Some(goals) = goals_block(&summary.goals) {
            HandlerVerdict::done(
                false,
                format!("the keyword \"{}\" was given but {goals}", self.keyword),
            )
        } else {
            HandlerVerdict::done(
                true,
                format!(
                    "completion keyword \"{}\" detected and every required goal passes",
                    self.keyword
                ),
            )
        };
        Box::pin(async move { verdict })
    }
}
