//! What the judgment needs to know about the goals: a name, whether it
//! passed, whether it is required, and the evidence. The goal runner (another
//! module) computes these; judgment only reads them and never runs a goal.

use serde::{Deserialize, Serialize};

/// The result of one goal, as input to the judgment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct GoalOutcome {
    /// E.g. `tests_pass: cargo test`.
    pub name: String,
    /// Whether it passed.
    pub passed: bool,
    /// A goal that is not required is reported but does not block completion.
    pub required: bool,
    /// A short excerpt of what showed it (exit code, failing test names, …).
    pub evidence: String,
}

/// The required goals that failed.
pub fn failed_required(goals: &[GoalOutcome]) -> impl Iterator<Item = &GoalOutcome> {
    goals.iter().filter(|g| g.required && !g.passed)
}
