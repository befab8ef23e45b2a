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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::repo::{GoalKind, GoalSpec, TaskTypeRules};
    use crate::engine::artifacts::ChangedFile;

    fn changed(paths: &[&str]) -> Artifacts {
        Artifacts {
            base_commit: "b".into(),
            head: "h".into(),
            branch: None,
            commits: Vec::new(),
            changed_files: paths
                .iter()
                .map(|p| ChangedFile {
                    path: (*p).into(),
                    added: 1,
                    deleted: 0,
                    new: false,
                })
                .collect(),
            untracked: Vec::new(),
            diff_hash: "d".into(),
        }
    }

    #[test]
    fn each_task_type_checks_what_it_promises() {
        let config = RepoConfig::default();
        let kinds = FileKinds::new(&[]).unwrap();
        let rule = |task, paths: &[&str]| builtin(&config, task, &kinds, &changed(paths));
        let only_tests = ["tests/add.sh"];
        let only_docs = ["docs/guide.md"];
        let source = ["src/lib.rs", "tests/add.sh"];
        assert!(!rule(TaskType::Feature, &only_tests).unwrap().passed);
        assert!(!rule(TaskType::Feature, &only_docs).unwrap().passed);
        assert!(rule(TaskType::Feature, &source).unwrap().passed);
        assert!(rule(TaskType::Test, &only_tests).unwrap().passed);
        assert!(!rule(TaskType::Test, &only_docs).unwrap().passed);
        assert!(rule(TaskType::Docs, &only_docs).unwrap().passed);
        assert!(!rule(TaskType::Docs, &source).unwrap().passed);
        let feature = rule(TaskType::Feature, &only_docs).unwrap();
        assert_eq!(feature.name(), "source_changed");
        assert!(feature.required && feature.evidence.contains("no change"));
        assert!(
            rule(TaskType::Bug, &source).is_none(),
            "a bug's rule is the reproduction"
        );
        assert!(rule(TaskType::Refactor, &source).is_none());
    }

    #[test]
    fn a_configured_task_type_replaces_the_built_in_rule() {
        let mut config = RepoConfig::default();
        config.task_types.insert(
            TaskType::Docs,
            TaskTypeRules {
                goals: vec![GoalSpec {
                    kind: GoalKind::FilesChanged {
                        pattern: "handbook/**".into(),
                    },
                    required: true,
                    timeout_secs: None,
                }],
            },
        );
        let kinds = FileKinds::new(&[]).unwrap();
        assert!(builtin(&config, TaskType::Docs, &kinds, &changed(&["src/x.rs"])).is_none());
    }
}
