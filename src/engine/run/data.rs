//! The engine's own JSON in `runs.data` and `iterations.judgment`: what a run
//! needs between steps (the config text, the issue as the trigger saw it,
//! the baseline, the convergence state, which labels and one-off comments are
//! already on GitHub). Unreadable JSON reads as the default, never a panic.

use serde::{Deserialize, Serialize};

use crate::agent::sandbox::Worktree;
use crate::engine::baseline::Baseline;
use crate::engine::convergence::ConvergenceState;
use crate::engine::handlers::IterationSummary;
use crate::engine::judge::Judgment;
use crate::engine::verify::IterationVerification;

/// What a run carries between steps.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct RunData {
    /// `.github/closer.yml` as read when the run was triggered (`None`: absent).
    pub config_text: Option<String>,
    pub issue_title: String,
    pub issue_body: String,
    pub issue_author: String,
    pub issue_labels: Vec<String>,
    /// Started by the trigger label (not a command): removing the label stops it.
    pub by_label: bool,
    pub baseline: Option<Baseline>,
    pub convergence: ConvergenceState,
    pub worktree: Option<Worktree>,
    /// The `phase:*` label closer put on the issue.
    pub phase_label: Option<String>,
    pub awaiting_label: bool,
    pub failed_label: bool,
    /// The iteration whose question was posted.
    pub question_posted: Option<i64>,
    /// Why the run failed, for the diagnosis (set before it is posted).
    pub failure: Option<String>,
    pub diagnosis_posted: bool,
    pub deliverable_posted: bool,
    /// Verified, pull request open, closing when it merges (`close_on: merged`).
    pub awaiting_merge: bool,
    /// A problem with the configured project board, reported once.
    pub board_problem: Option<String>,
    /// The last status comment body written, to skip no-op edits.
    pub last_status: Option<String>,
}

impl RunData {
    /// Reads `runs.data`; bad JSON gives the default (and a warning).
    pub fn from_json(text: &str) -> RunData {
        serde_json::from_str(text).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "run data unreadable; starting from defaults");
            RunData::default()
        })
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned())
    }
}

/// One iteration as the engine stores it in `iterations.judgment`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IterationRecord {
    pub summary: IterationSummary,
    pub judgment: Judgment,
    pub verification: Option<IterationVerification>,
    /// Both halves of verified completion agreed.
    pub complete: bool,
}

impl IterationRecord {
    pub fn from_json(text: &str) -> Option<IterationRecord> {
        serde_json::from_str(text).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_or_partial_run_data_reads_as_defaults() {
        let d = RunData::from_json("not json");
        assert!(d.config_text.is_none() && !d.failed_label);
        let d = RunData::from_json(r#"{"issue_author": "maria", "unknown": 1}"#);
        assert_eq!(d.issue_author, "maria");
        assert!(!d.awaiting_merge);
        let back = RunData::from_json(&d.to_json());
        assert_eq!(back.issue_author, "maria");
    }

    #[test]
    fn an_iteration_record_that_is_not_ours_is_skipped() {
        assert!(IterationRecord::from_json("{}").is_none());
        assert!(IterationRecord::from_json("").is_none());
    }
}
