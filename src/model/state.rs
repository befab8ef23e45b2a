//! Where a run is in its life.

use serde::{Deserialize, Serialize};

use super::Named;

/// The state of a run.
///
/// `queued → running ⇄ awaiting_response`, `running → verifying → done`;
/// any open state can end as `failed` or `stopped`, and a retry takes an
/// ended run back to `queued`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Waiting for its `start` step.
    Queued,
    /// Iterating.
    Running,
    /// The agent asked; waiting for a reply.
    AwaitingResponse,
    /// Verified; pushing, opening the pull request, closing (or waiting for
    /// the merge).
    Verifying,
    Done,
    Failed,
    Stopped,
}

impl Named for RunState {
    const ALL: &'static [RunState] = &[
        RunState::Queued,
        RunState::Running,
        RunState::AwaitingResponse,
        RunState::Verifying,
        RunState::Done,
        RunState::Failed,
        RunState::Stopped,
    ];

    fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::AwaitingResponse => "awaiting_response",
            RunState::Verifying => "verifying",
            RunState::Done => "done",
            RunState::Failed => "failed",
            RunState::Stopped => "stopped",
        }
    }
}

impl RunState {
    /// The states of a run that has not ended.
    pub const OPEN: [RunState; 4] = [
        RunState::Queued,
        RunState::Running,
        RunState::AwaitingResponse,
        RunState::Verifying,
    ];

    /// Whether the run has ended.
    pub fn is_final(self) -> bool {
        matches!(self, RunState::Done | RunState::Failed | RunState::Stopped)
    }

    /// The state as a maintainer reads it.
    pub fn label(self) -> &'static str {
        match self {
            RunState::AwaitingResponse => "awaiting response",
            other => other.as_str(),
        }
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
