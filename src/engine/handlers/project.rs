//! `project`: phases preparation → processing → review → complete. The phase
//! comes from the agent's structured output (`"phase": "review"`), never from
//! guessing at free text; it only moves forward. Reaching `complete` finishes
//! the run once verified completion (checklist and goals) holds too.

use serde_json::{Map, Value, json};

use crate::config::repo::CompletionType;
use crate::engine::completion_check::CheckResult;
use crate::engine::handlers::issue::verified;
use crate::engine::handlers::{
    CompletionCriteria, CompletionHandler, HandlerVerdict, IterationSummary,
};
use crate::llm::BoxFuture;
use crate::model::{Named, Phase};

/// The phase one structured output reports, if it reports a valid one.
pub fn reported_phase(structured_output: &Value) -> Option<Phase> {
    serde_json::from_value(structured_output.get("phase")?.clone()).ok()
}

/// The phase after these iterations: the furthest valid phase reported (a
/// later, lower report does not move it back).
pub fn current_phase(history: &[IterationSummary]) -> Phase {
    history
        .iter()
        .filter_map(|s| reported_phase(&s.structured_output))
        .max()
        .unwrap_or(Phase::Preparation)
}

/// The phased handler.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProjectHandler;

impl CompletionHandler for ProjectHandler {
    fn kind(&self) -> CompletionType {
        CompletionType::Project
    }

    fn criteria(&self) -> CompletionCriteria {
        CompletionCriteria {
            short: "reach phase complete (verified)".to_owned(),
            detailed: "Work through the phases: 1. preparation (gather requirements, set up), 2. processing (do the main \
                       work), 3. review (validate and review the changes), 4. complete (finalise). Report the phase you \
                       have reached as \"phase\" in your structured output; move on only when the current phase is done. \
                       The run completes at phase complete once the checklist and the required goals confirm it."
                .to_owned(),
        }
    }

    fn extra_params(&self, history: &[IterationSummary], _: u32) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("phase".into(), json!(current_phase(history).as_str()));
        m
    }

    fn is_complete<'a>(
        &'a self,
        summary: &'a IterationSummary,
        closer: Option<&'a CheckResult>,
    ) -> BoxFuture<'a, HandlerVerdict> {
        let verdict = match reported_phase(&summary.structured_output) {
            Some(Phase::Complete) => {
                let v = verified(summary, closer);
                if v.complete {
                    HandlerVerdict::done(true, "the project reached phase complete, verified")
                } else {
                    HandlerVerdict::done(
                        false,
                        format!(
                            "phase complete reported but not verified: {}",
                            v.description
                        ),
                    )
                }
            }
            Some(p) => {
                HandlerVerdict::done(false, format!("the project is in phase {}", p.as_str()))
            }
            None => HandlerVerdict::done(false, "the output reported no valid `phase`"),
        };
        Box::pin(async move { verdict })
    }
}
