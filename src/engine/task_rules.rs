//! The built-in rules of each task type (level-2 goals), read from the
//! change itself: a `feature` changes a non-test source file, a `test`
//! adds or changes a test file, `docs` changes documentation. (A `bug`'s
//! rule is the reproduction, `reproduction.rs`.) A repository that
//! configures `task_types.<type>` replaces the built-in rule of that type.

use super::artifacts::Artifacts;
use super::file_kinds::{FileKind, FileKinds};
use super::goals::{GoalLevel, GoalResult};
use crate::config::repo::RepoConfig;
use crate::model::TaskType;

/// The built-in rule's result for the task, if the type has one and the
/// repository did not replace it.
pub fn builtin(
    config: &RepoConfig,
    task: TaskType,
    kinds: &FileKinds,
    artifacts: &Artifacts,
) -> Option<GoalResult> {
    if config.task_types.contains_key(&task) {
        return None;
    }
    let (goal_type, wanted, what) = match task {
        TaskType::Feature => ("source_changed", FileKind::Source, "a non-test source file"),
        TaskType::Test => ("test_changed", FileKind::Test, "a test file"),
        TaskType::Docs => ("docs_changed", FileKind::Docs, "a documentation file"),
        _ => return None,
    };
    let matching: Vec<&str> = artifacts
        .all_files()
        .map(|f| f.path.as_str())
        .filter(|p| kinds.kind(p) == wanted)
        .collect();
    let evidence = match matching.as_slice() {
        [] => format!("no change to {what}"),
        files => files.iter().take(5).copied().collect::<Vec<_>>().join(", "),
    };
    Some(GoalResult::check(
        GoalLevel::TaskType,
        goal_type,
        "",
        !matching.is_empty(),
        evidence,
    ))
}
