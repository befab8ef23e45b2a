//! What an iteration came to, as recorded on its row.

use serde::{Deserialize, Serialize};

use super::Named;

/// The completion check's decision about one iteration's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// Done by the completion check's measure (verified completion also
    /// needs the goals).
    Complete,
    /// More work needed.
    Incomplete,
    /// The agent asked the maintainer something.
    AwaitingResponse,
    /// The iteration failed (the agent or the check could not run).
    Error,
}

/// What an iteration came to: the decision, or that the run was stopped
/// while its agent worked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IterationEnd {
    /// Verified complete: both the completion check and the goals.
    Complete,
    Incomplete,
    AwaitingResponse,
    Error,
    /// The run was stopped meanwhile; nothing was judged.
    Stopped,
}

impl Named for IterationEnd {
    const ALL: &'static [IterationEnd] = &[
        IterationEnd::Complete,
        IterationEnd::Incomplete,
        IterationEnd::AwaitingResponse,
        IterationEnd::Error,
        IterationEnd::Stopped,
    ];

    fn as_str(self) -> &'static str {
        match self {
            IterationEnd::Complete => "complete",
            IterationEnd::Incomplete => "incomplete",
            IterationEnd::AwaitingResponse => "awaiting_response",
            IterationEnd::Error => "error",
            IterationEnd::Stopped => "stopped",
        }
    }
}

impl IterationEnd {
    /// The end of a judged iteration: the check's decision, counted as
    /// complete only when the goals agreed (`verified`).
    pub fn judged(decision: Decision, verified: bool) -> IterationEnd {
        match decision {
            Decision::Complete if verified => IterationEnd::Complete,
            Decision::AwaitingResponse => IterationEnd::AwaitingResponse,
            Decision::Error => IterationEnd::Error,
            Decision::Complete | Decision::Incomplete => IterationEnd::Incomplete,
        }
    }
}
