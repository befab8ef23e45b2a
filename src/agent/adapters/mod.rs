//! The four adapters: three tools with their own JSON output, and `command`,
//! any argv speaking closer's contract.

pub mod claude_code;
pub mod codex;
pub mod command;
pub mod opencode;

/// Asserts that `adapter` reads each output as the model provider down, with
/// a detail that starts as given.
#[cfg(test)]
fn assert_provider_down(adapter: &dyn crate::agent::adapter::AgentAdapter, cases: &[(&str, &str)]) {
    use crate::agent::outcome::AgentFailure;
    for (out, starts) in cases {
        match adapter.interpret(out).failure {
            Some(AgentFailure::ModelUnavailable { detail }) => {
                assert!(detail.starts_with(starts), "{detail}")
            }
            other => panic!("{other:?} for {out}"),
        }
    }
}
