//! `iterate`: the run stops after N iterations, whatever the output says.

use serde_json::{Map, Value, json};

use crate::config::repo::CompletionType;
use crate::engine::completion_check::CheckResult;
use crate::engine::handlers::{
    CompletionCriteria, CompletionHandler, HandlerVerdict, IterationSummary,
};
use crate::llm::BoxFuture;

/// Completes after `max_iterations`.
#[derive(Debug, Clone, Copy)]
pub struct IterateHandler {
    max_iterations: u32,
}

impl IterateHandler {
    /// A handler for `max_iterations` (at least 1).
    pub fn new(max_iterations: u32) -> Self {
        Self {
            max_iterations: max_iterations.max(1),
        }
    }
}

impl CompletionHandler for IterateHandler {
    fn kind(&self) -> CompletionType {
        CompletionType::Iterate
    }

    fn criteria(&self) -> CompletionCriteria {
        CompletionCriteria {
            short: format!("{} iterations", self.max_iterations),
            detailed: format!(
                "This task runs for up to {} iterations. Report progress at each iteration and work towards the goal efficiently.",
                self.max_iterations
            ),
        }
    }

    fn extra_params(&self, _: &[IterationSummary], iteration: u32) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("max_iterations".into(), json!(self.max_iterations));
        m.insert(
            "remaining".into(),
            json!(self.max_iterations.saturating_sub(iteration)),
        );
        m
    }

    fn is_complete<'a>(
        &'a self,
        summary: &'a IterationSummary,
        _: Option<&'a CheckResult>,
    ) -> BoxFuture<'a, HandlerVerdict> {
        let done = summary.iteration >= self.max_iterations;
        let text = format!(
            "completed {}/{} iterations",
            summary.iteration.min(self.max_iterations),
            self.max_iterations
        );
        Box::pin(async move { HandlerVerdict::done(done, text) })
    }
}
