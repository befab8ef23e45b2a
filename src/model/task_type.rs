//! The kind of work an issue asks for. It decides which artifacts are expected,
//! which level-2 goals apply and whether the answer itself is the deliverable.

use serde::{Deserialize, Serialize};

use super::Named;

/// A task type (label `type:*`, else classified by the LLM).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskType {
    ReadInfo,
    Report,
    Feature,
    Bug,
    Refactor,
    Docs,
    Test,
}

impl Named for TaskType {
    const ALL: &'static [TaskType] = &[
        TaskType::ReadInfo,
        TaskType::Report,
        TaskType::Feature,
        TaskType::Bug,
        TaskType::Refactor,
        TaskType::Docs,
        TaskType::Test,
    ];

    /// The name used in labels, config keys and prompts.
    fn as_str(self) -> &'static str {
        match self {
            TaskType::ReadInfo => "read_info",
            TaskType::Report => "report",
            TaskType::Feature => "feature",
            TaskType::Bug => "bug",
            TaskType::Refactor => "refactor",
            TaskType::Docs => "docs",
            TaskType::Test => "test",
        }
    }
}

impl TaskType {
    /// `read_info` and `report` answer; the others change code.
    pub fn changes_code(self) -> bool {
        !matches!(self, TaskType::ReadInfo | TaskType::Report)
    }
}

impl std::fmt::Display for TaskType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
