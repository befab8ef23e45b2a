//! `issue`: verified completion. Complete only when the completion check's
//! checklist is complete with enough confidence AND every required goal
//! passed AND the agent run did not fail. The agent's own claim never
//! suffices.

use serde_json::{Map, Value};

use crate::config::repo::CompletionType;
use crate::engine::completion_check::CheckResult;
use crate::engine::handlers::{
    CompletionCriteria, CompletionHandler, HandlerVerdict, IterationSummary, goals_block,
};
use crate::llm::BoxFuture;

/// The default handler.
#[derive(Debug, Clone, Copy, Default)]
pub struct IssueHandler;

impl CompletionHandler for IssueHandler {
    fn kind(&self) -> CompletionType {
        CompletionType::Issue
    }

    fn criteria(&self) -> CompletionCriteria {
        CompletionCriteria {
            short: "verified: checklist complete and every required goal passes".to_owned(),
            detailed: "The work is done when everything the issue asks for (including each line of its task list) \
                       is implemented and committed, and every required goal (build, tests, lint and the other \
                       checks closer runs) passes. Your own statement that you are done is not enough: closer \
                       runs the goals itself and reviews your report against the issue."
                .to_owned(),
        }
    }

    fn extra_params(&self, _: &[IterationSummary], _: u32) -> Map<String, Value> {
        Map::new()
    }

    fn is_complete<'a>(
        &'a self,
        summary: &'a IterationSummary,
        closer: Option<&'a CheckResult>,
    ) -> BoxFuture<'a, HandlerVerdict> {
        Box::pin(async move { verified(summary, closer) })
    }
}

/// The verified-completion rule, shared with `manual` and `project`.
pub(crate) fn verified(summary: &IterationSummary, closer: Option<&CheckResult>) -> HandlerVerdict {
    if summary.failed {
        return HandlerVerdict::done(false, "the agent run failed");
    }
    let closer_part = match closer {
        None => Some("the completion check did not run".to_owned()),
        Some(c) if c.error.is_some() => Some(format!(
            "the completion check failed: {}",
            c.error.as_deref().unwrap_or_default()
        )),
        Some(c) if !c.output.all_complete => Some(format!(
            "the checklist is not complete: {}",
            c.output.summary
        )),
        Some(c) if !c.complete => Some(format!(
            "the checklist is complete but the confidence {:.2} is below the threshold",
            c.output.confidence
        )),
        Some(_) => None,
    };
    match (closer_part, goals_block(&summary.goals)) {
        (None, None) => HandlerVerdict::done(
            true,
            "verified: the checklist is complete and every required goal passes",
        ),
        (Some(c), None) => HandlerVerdict::done(false, c),
        (None, Some(g)) => HandlerVerdict::done(false, g),
        (Some(c), Some(g)) => HandlerVerdict::done(false, format!("{c}; {g}")),
    }
}
