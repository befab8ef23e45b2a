//! The convergence controller's stage: how much freedom the agent has left
//! before a run that goes round in circles is stopped.

use serde::{Deserialize, Serialize};

/// The strategy stage; stored as its number (1, 2, 3).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// Stage 1: normal iterations.
    #[default]
    Normal,
    /// Stage 2: the same failures repeated; minimal-fix mode (allowed paths
    /// and diff budget enforced).
    MinimalFix,
    /// Stage 3: still repeating; the run stops as failed.
    Stopped,
}

impl Stage {
    pub fn number(self) -> u8 {
        match self {
            Stage::Normal => 1,
            Stage::MinimalFix => 2,
            Stage::Stopped => 3,
        }
    }

    /// The stage numbered `n`, if there is one.
    pub fn from_number(n: i64) -> Option<Stage> {
        match n {
            1 => Some(Stage::Normal),
            2 => Some(Stage::MinimalFix),
            3 => Some(Stage::Stopped),
            _ => None,
        }
    }

    /// The stage as a maintainer reads it.
    pub fn label(self) -> &'static str {
        match self {
            Stage::Normal => "normal",
            Stage::MinimalFix => "minimal-fix",
            Stage::Stopped => "stopped",
        }
    }
}
