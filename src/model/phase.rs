//! The phase of a run, as project boards follow it: one `phase:*` label on
//! the issue at every moment, and the board's Status field when configured.

use serde::{Deserialize, Serialize};

use super::Named;

/// A phase, in order; a run only moves forward (a retry starts over).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Preparation,
    Processing,
    Review,
    Complete,
}

impl Named for Phase {
    const ALL: &'static [Phase] = &[
        Phase::Preparation,
        Phase::Processing,
        Phase::Review,
        Phase::Complete,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Phase::Preparation => "preparation",
            Phase::Processing => "processing",
            Phase::Review => "review",
            Phase::Complete => "complete",
        }
    }
}

impl Phase {
    /// The issue label that shows the phase (`phase:<name>`).
    pub fn issue_label(self) -> String {
        format!("phase:{}", self.as_str())
    }
}

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
