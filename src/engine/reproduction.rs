//! Fail-to-pass evidence for bugs: the head's tests run against the base
//! commit's code, and the tests that fail there and pass at head are the
//! proof that the bug was reproduced and fixed. Shown as the `Reproduction`
//! row of the verification table; required for `bug` tasks in a repository
//! with a `tests_pass` goal unless it says `reproduction: report | off`.
//!
//! This module decides what to run and reads the results; running the
//! tests on a worktree of the base commit is the engine's (it owns the
//! sandbox).

use serde::{Deserialize, Serialize};

use super::artifacts::Artifacts;
use super::file_kinds::FileKinds;
use super::goals::{GoalLevel, GoalResult};
use crate::config::repo::{GoalKind, GoalSpec, RepoConfig, ReproductionMode};
use crate::model::TaskType;

/// The row's name in the verification table.
pub const CHECK_NAME: &str = "Reproduction";

/// What the reproduction found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reproduction {
    /// Whether a missing reproduction blocks completion.
    pub required: bool,
    /// The tests that fail on the base commit's code and pass at head.
    pub fail_to_pass: Vec<String>,
    /// How it was found, or why there is none.
    pub note: String,
}

impl Reproduction {
    pub fn passed(&self) -> bool {
        !self.fail_to_pass.is_empty()
    }

    pub fn blocks(&self) -> bool {
        self.required && !self.passed()
    }

    /// The verification table's row.
    pub fn as_goal(&self) -> GoalResult {
        let evidence = match self.passed() {
            true => format!("fail → pass: {}", self.fail_to_pass.join(", ")),
            false => self.note.clone(),
        };
        let mut row =
            GoalResult::check(GoalLevel::TaskType, CHECK_NAME, "", self.passed(), evidence);
        row.required = self.required;
        row
    }
}

/// Whether the run needs a reproduction, and how strictly: `None` when
/// it does not apply (not a bug, switched off, or no tests to run by
/// default).
pub fn mode(config: &RepoConfig, task: TaskType) -> Option<ReproductionMode> {
    if task != TaskType::Bug {
        return None;
    }
    match config.reproduction {
        Some(ReproductionMode::Off) => None,
        Some(mode) => Some(mode),
        None => (!test_goals(config).is_empty()).then_some(ReproductionMode::Required),
    }
}

/// The `tests_pass` goals a bug is verified with.
pub fn test_goals(config: &RepoConfig) -> Vec<&GoalSpec> {
    let rules = config.task_types.get(&TaskType::Bug);
    config
        .dod
        .iter()
        .chain(rules.into_iter().flat_map(|r| r.goals.iter()))
        .filter(|g| matches!(g.kind, GoalKind::TestsPass { .. }))
        .collect()
}

/// The test files the change committed (added, modified, or deleted: a
/// path the head commit has no file at is skipped when copying): what is
/// copied onto the base commit's code, as the head commit has it. Files
/// left uncommitted beside the commit never are.
pub fn changed_tests(kinds: &FileKinds, artifacts: &Artifacts) -> Vec<String> {
    artifacts
        .changed_files
        .iter()
        .map(|f| f.path.clone())
        .filter(|p| kinds.is_test(p))
        .collect()
}

/// The verdict from the test goals run on the base code with the head's
/// tests (`at_base`) and the same goals at head: the named tests that fail
/// at base and that the same goal names as passed at head (a test that
/// was deleted or skipped did not pass).
pub fn conclude(required: bool, at_base: &[GoalResult], at_head: &[GoalResult]) -> Reproduction {
    let head_of = |base: &GoalResult| {
        at_head
            .iter()
            .find(|g| g.goal_type == base.goal_type && g.target == base.target)
    };
    let mut fail_to_pass: Vec<String> = at_base
        .iter()
        .filter(|g| g.goal_type == "tests_pass")
        .filter_map(|g| head_of(g).map(|head| (g, head)))
        .flat_map(|(base, head)| {
            base.failures
                .iter()
                .filter_map(|f| f.test.clone())
                .filter(|id| head.passed_tests.contains(id))
        })
        .collect();
    fail_to_pass.sort();
    fail_to_pass.dedup();
    Reproduction {
        required,
        note: note(&fail_to_pass, at_head),
        fail_to_pass,
    }
}

/// How the reproduction was found, or why there is none.
fn note(fail_to_pass: &[String], at_head: &[GoalResult]) -> String {
    let tests = || at_head.iter().filter(|g| g.goal_type == "tests_pass");
    if !fail_to_pass.is_empty() {
        "the head's tests fail on the base commit's code and pass with the change".to_owned()
    } else if tests().any(|g| !g.passed) {
        "not yet: the tests do not pass at head".to_owned()
    } else if tests().all(|g| g.passed_tests.is_empty()) {
        "the tests pass, but their output names no passing test, so no test can be shown to \
         reproduce the bug; run them verbosely (pytest -v, python -m unittest -v, go test -v, TAP, \
         jest --verbose, vitest --reporter=verbose, mocha's default reporter)"
            .to_owned()
    } else {
        "no test reproduces the bug: every test also passes on the base commit's code; \
         add a test that reproduces the bug (fails before the fix, passes after)"
            .to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::engine::fingerprint::parse_failures;

    fn goal(command: &str, output: Option<&str>) -> GoalResult {
        let mut g = GoalResult::check(
            GoalLevel::Dod,
            "tests_pass",
            command,
            output.is_none(),
            String::new(),
        );
        g.failures = output.map_or(Vec::new(), |o| parse_failures(command, o, None));
        g
    }

    fn passing(command: &str, output: &str) -> GoalResult {
        let mut g = goal(command, None);
        g.passed_tests = crate::engine::fingerprint::passed_tests(output);
        g
    }

    #[test]
    fn a_test_failing_on_base_code_and_passing_at_head_is_the_reproduction() {
        let cmd = "sh run_tests.sh";
        let at_base = [goal(
            cmd,
            Some("ok 1 - tests/existing.sh\nnot ok 2 - tests/add.sh\n"),
        )];
        let head = passing(cmd, "ok 1 - tests/existing.sh\nok 2 - tests/add.sh\n");
        let r = conclude(true, &at_base, std::slice::from_ref(&head));
        assert!(r.passed() && !r.blocks(), "{r:?}");
        assert_eq!(r.fail_to_pass, vec!["tests/add.sh"]);
        assert_eq!(r.as_goal().name(), "Reproduction");

        // The failing test was deleted (or skipped): the tests pass, but it
        // did not run, so it reproduces nothing.
        let deleted = passing(cmd, "ok 1 - tests/existing.sh\n");
        assert!(conclude(true, &at_base, &[deleted]).blocks());
        let silent = conclude(true, &at_base, &[goal(cmd, None)]);
        assert!(
            silent.blocks() && silent.note.contains("verbos"),
            "{}",
            silent.note
        );

        let none = conclude(true, &[goal(cmd, None)], std::slice::from_ref(&head));
        assert!(none.blocks());
        assert!(none.note.contains("reproduce"), "{}", none.note);
        assert!(!conclude(false, &[], &[head]).blocks());

        let failing = goal(cmd, Some("not ok 1 - tests/add.sh\n"));
        let not_yet = conclude(true, &at_base, &[failing]);
        assert!(not_yet.blocks() && not_yet.note.contains("not yet"));
    }
}
