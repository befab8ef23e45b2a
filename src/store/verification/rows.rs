//! The rows of verification evidence: plain data, names as the engine
//! spells them, the engine's documents as JSON text.

/// One goal result as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GoalRow {
    pub level: String,
    pub goal_type: String,
    pub target: String,
    pub passed: bool,
    pub required: bool,
    pub not_runnable: bool,
    /// Every failure tolerated (column `baseline_only`).
    pub tolerated: bool,
    pub duration_ms: u64,
    pub evidence: String,
}

/// One fingerprinted failure as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureRow {
    pub fingerprint: String,
    pub runner: String,
    pub command: String,
    pub test: Option<String>,
    pub location: Option<String>,
    pub error: String,
    /// Not there at the base commit.
    pub is_new: bool,
}

/// An iteration's artifacts as stored: the columns searched by, and the
/// whole document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactsRow {
    pub base_commit: String,
    pub head: String,
    pub branch: Option<String>,
    pub diff_hash: String,
    /// The artifacts, JSON.
    pub data: String,
    /// The missing artifact kinds, JSON.
    pub missing: String,
}

/// A convergence decision as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionRow {
    pub check_id: String,
    pub decision: String,
    pub stage: i64,
    /// The whole decision, JSON.
    pub data: String,
}

/// The baseline's evidence (iteration 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaselineEvidence {
    pub goals: Vec<GoalRow>,
    pub failures: Vec<FailureRow>,
    /// The `baseline_failures` diagnostic, JSON.
    pub failures_json: String,
}

/// One iteration's evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IterationEvidence {
    pub iteration: i64,
    pub artifacts: ArtifactsRow,
    pub goals: Vec<GoalRow>,
    pub failures: Vec<FailureRow>,
    pub decision: DecisionRow,
    /// The `current_failures` diagnostic, JSON.
    pub failures_json: String,
    /// The `fingerprint_history` diagnostic, JSON.
    pub history_json: String,
    /// The run's convergence state, JSON.
    pub state_json: String,
}
