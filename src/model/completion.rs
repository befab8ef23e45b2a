//! How a run decides it is complete: the completion type a repository
//! chooses (`completion.type` in `.github/closer.yml`).

use serde::{Deserialize, Serialize};

use super::Named;

/// The completion type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum CompletionType {
    /// Verified completion: the completion check's checklist and the goals.
    #[default]
    Issue,
    /// Phases preparation → processing → review → complete.
    Project,
    /// Stop after `max_iterations`.
    Iterate,
    /// The agent's output contains `keyword` and the goals pass.
    Manual,
    /// An executable named in the configuration decides.
    Custom,
}

impl Named for CompletionType {
    const ALL: &'static [CompletionType] = &[
        CompletionType::Issue,
        CompletionType::Project,
        CompletionType::Iterate,
        CompletionType::Manual,
        CompletionType::Custom,
    ];

    /// The name used in the config file and in prompt paths.
    fn as_str(self) -> &'static str {
        match self {
            CompletionType::Issue => "issue",
            CompletionType::Project => "project",
            CompletionType::Iterate => "iterate",
            CompletionType::Manual => "manual",
            CompletionType::Custom => "custom",
        }
    }
}
