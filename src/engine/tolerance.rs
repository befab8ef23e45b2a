//! The baseline, strictly: a failure of a required goal blocks completion
//! whether or not it was already there at the base commit, because a test
//! that fails at base is very often the bug itself. The repository may
//! tolerate failures present at base — all of them (`baseline.tolerate:
//! preexisting`) or the ones it lists (`listed` with `known_failures`) —
//! and every tolerated failure stays visible where reviewers read.
//!
//! This module only sorts failures; it never hides one.

use std::collections::{HashMap, HashSet};

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};

use super::baseline::Baseline;
use super::fingerprint::Failure;
use super::goals::GoalResult;
use super::paths::PatternError;
use crate::config::repo::{BaselineConfig, Tolerate};

/// The failures of required goals, sorted against the baseline.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sorted {
    /// Not there at the base commit.
    pub new: Vec<Failure>,
    /// There at the base commit and not tolerated: they block.
    pub since_base: Vec<Failure>,
    /// There at the base commit and tolerated by the repository's choice.
    pub tolerated: Vec<Failure>,
}

/// The repository's tolerance.
#[derive(Debug, Clone)]
pub struct Tolerance {
    mode: Tolerate,
    known: GlobSet,
}

impl Tolerance {
    pub fn new(config: &BaselineConfig) -> Result<Tolerance, PatternError> {
        Ok(Tolerance {
            mode: config.tolerate,
            known: globs(&config.known_failures)?,
        })
    }

    /// Whether a failure that was there at base is tolerated. Only a
    /// failure that names its test: one closer read from output no runner
    /// parser knows (a linter's, a compiler's) is a digest of its last
    /// error lines, which a change can keep while adding failures above
    /// them, so "the same as at base" cannot be told for it.
    fn tolerates(&self, failure: &Failure) -> bool {
        match self.mode {
            Tolerate::None => false,
            Tolerate::Preexisting => failure.test.is_some(),
            Tolerate::Listed => failure
                .test
                .as_deref()
                .is_some_and(|id| self.known.is_match(id)),
        }
    }

    /// Sorts `current` (the failures of required goals).
    pub fn sort<'a>(
        &self,
        baseline: &Baseline,
        current: impl IntoIterator<Item = &'a Failure>,
    ) -> Sorted {
        let mut sorted = Sorted::default();
        for failure in current {
            let bucket = match (
                baseline.contains(&failure.fingerprint),
                self.tolerates(failure),
            ) {
                (false, _) => &mut sorted.new,
                (true, false) => &mut sorted.since_base,
                (true, true) => &mut sorted.tolerated,
            };
            if !bucket.iter().any(|f| f.fingerprint == failure.fingerprint) {
                bucket.push(failure.clone());
            }
        }
        sorted
    }
}

/// Globs over test ids (`/` is not special: ids are not paths).
fn globs(patterns: &[String]) -> Result<GlobSet, PatternError> {
    let mut set = GlobSetBuilder::new();
    for pattern in patterns {
        let glob = GlobBuilder::new(pattern)
            .literal_separator(false)
            .build()
            .map_err(|e| PatternError {
                pattern: pattern.clone(),
                reason: e.kind().to_string(),
            })?;
        set.add(glob);
    }
    set.build().map_err(|e| PatternError {
        pattern: patterns.join(", "),
        reason: e.to_string(),
    })
}

/// The named tests that failed at base and pass now: the same goal ran at
/// head and names the test among its passes.
pub fn fixed_since_base(baseline: &Baseline, head: &[GoalResult]) -> Vec<Failure> {
    since_base_where(baseline, head, |now, id| {
        now.passed_tests.iter().any(|p| p == id)
    })
}

/// The named tests that failed at base and neither fail nor pass now: the
/// same required goal ran at head, but the test did not (deleted or
/// skipped), or its output names no passes, so it cannot be shown fixed.
/// They block (a goal that is not required blocks nothing, this included).
pub fn vanished_since_base(baseline: &Baseline, head: &[GoalResult]) -> Vec<Failure> {
    since_base_where(baseline, head, |now, id| {
        now.required
            && !now.passed_tests.iter().any(|p| p == id)
            && !now.failures.iter().any(|c| c.test.as_deref() == Some(id))
    })
}

/// A parametrised test's id without its parameters (`test_add[2-3-5]`,
/// Go's `TestParse/want_3`): a fix that corrects an expected value renames
/// the case, not the test. Other ids are their own stem (a path such as
/// `Tests/test_x.py::test_a` or `TestSuite/foo.t` is not a Go subtest).
fn stem(id: &str) -> &str {
    if let Some((test, _)) = id.split_once('[') {
        return test;
    }
    match id.split_once('/') {
        Some((test, _)) if is_go_test(test) && !id.contains("::") && !id.contains('.') => test,
        _ => id,
    }
}

/// The required goals, passing now, whose output named tests at base
/// within the cap and goes past it now: nothing can be told missing from
/// such output, and the agent's code can print its way there, so they
/// block as unreadable (their names).
pub fn cut_since_base(baseline: &Baseline, head: &[GoalResult]) -> Vec<String> {
    baseline
        .goals
        .iter()
        .filter(|base| !base.output_cut && !base.passed_tests.is_empty())
        .filter_map(|base| {
            head.iter().find(|g| {
                g.goal_type == base.goal_type
                    && g.target == base.target
                    && g.required
                    && g.output_cut
                    && (g.passed || g.tolerated)
            })
        })
        .map(GoalResult::name)
        .collect()
}

/// The required goals, passing now, whose output named tests at base and
/// names none now (no pass, no start, no named failure): a runner whose
/// verbosity changed (jest prints its tree by default for a single test
/// file only) or a command the agent made quieter. Nothing can be told
/// missing, or running, from such output, so they block as unreadable
/// (their names) instead of listing every test as dropped.
pub fn silent_since_base(baseline: &Baseline, head: &[GoalResult]) -> Vec<String> {
    baseline
        .goals
        .iter()
        .filter(|base| !base.output_cut && !base.passed_tests.is_empty())
        .filter_map(|base| head.iter().find(|g| same_passing_goal(base, g)))
        .filter(|g| names_no_test(g))
        .map(GoalResult::name)
        .collect()
}

/// `now` is `base`'s goal at head, required, runnable, within the cap,
/// and passed (or failed only as tolerated).
fn same_passing_goal(base: &GoalResult, now: &GoalResult) -> bool {
    now.goal_type == base.goal_type
        && now.target == base.target
        && !now.not_runnable
        && now.required
        && !now.output_cut
        && (now.passed || now.tolerated)
}

/// Whether a goal's output names no test at all.
fn names_no_test(goal: &GoalResult) -> bool {
    goal.passed_tests.is_empty()
        && goal.started_tests.is_empty()
        && goal.failures.iter().all(|f| f.test.is_none())
}

/// How many of `ids` there are per stem.
fn by_stem<'a>(ids: impl Iterator<Item = &'a str>) -> HashMap<&'a str, usize> {
    let mut count: HashMap<&str, usize> = HashMap::new();
    for id in ids {
        *count.entry(stem(id)).or_default() += 1;
    }
    count
}

/// Go's rule for a test function's name: `Test`, then nothing or a
/// character that is not a lower-case letter.
fn is_go_test(name: &str) -> bool {
    name.strip_prefix("Test").is_some_and(|rest| {
        rest.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !rest.starts_with(|c: char| c.is_ascii_lowercase())
    })
}

/// The named tests that passed at base and neither pass, fail nor show
/// running now in the same required goal, which passed (or failed only as
/// tolerated): deleted, skipped, or no longer collected (a runner switched
/// off, a test marked to be skipped). A goal that fails now blocks already
/// and is not read here, nor one whose output went past the cap at base or
/// now (see [`cut_since_base`]); a parametrised case counts as running
/// while its test runs as many cases as passed at base.
/// `(goal name, test id)`, in the base goal's order.
pub fn dropped_since_base(baseline: &Baseline, head: &[GoalResult]) -> Vec<(String, String)> {
    let mut dropped = Vec::new();
    for base in &baseline.goals {
        let Some(now) = head.iter().find(|g| {
            g.goal_type == base.goal_type
                && g.target == base.target
                && !g.not_runnable
                && g.required
                && (g.passed || g.tolerated)
        }) else {
            continue;
        };
        // Output past the cap names only some of its tests, not always the
        // same ones, and output naming none names nothing: nothing can be
        // told missing from either (see `silent_since_base`).
        if base.output_cut || now.output_cut || names_no_test(now) {
            continue;
        }
        let ran: HashSet<&str> = now
            .passed_tests
            .iter()
            .chain(&now.started_tests)
            .map(String::as_str)
            .chain(now.failures.iter().filter_map(|f| f.test.as_deref()))
            .collect();
        // A case counts as renamed only while its test runs as many cases
        // as passed at base: skipping all but one is a drop.
        let at_base = by_stem(base.passed_tests.iter().map(String::as_str));
        let now_ran = by_stem(ran.iter().copied());
        let renamed = |id: &str| {
            let s = stem(id);
            s != id && now_ran.get(s).copied().unwrap_or(0) >= at_base.get(s).copied().unwrap_or(0)
        };
        dropped.extend(
            base.passed_tests
                .iter()
                .filter(|id| !ran.contains(id.as_str()) && !renamed(id))
                .map(|id| (now.name(), id.clone())),
        );
    }
    dropped
}

/// The named failures of each baseline goal that `keep` selects against
/// the same goal at head (goals that could not run at head are skipped).
fn since_base_where(
    baseline: &Baseline,
    head: &[GoalResult],
    keep: impl Fn(&GoalResult, &str) -> bool,
) -> Vec<Failure> {
    let mut found = Vec::new();
    for base in &baseline.goals {
        let Some(now) = head
            .iter()
            .find(|g| g.goal_type == base.goal_type && g.target == base.target && !g.not_runnable)
        else {
            continue;
        };
        found.extend(
            base.failures
                .iter()
                .filter(|b| b.test.as_deref().is_some_and(|id| keep(now, id)))
                .cloned(),
        );
    }
    found
}

/// Which of the tests that passed at base a change may stop running
/// (`baseline.removed_tests`).
#[derive(Debug, Clone)]
pub struct Removable(GlobSet);

impl Removable {
    pub fn new(config: &BaselineConfig) -> Result<Removable, PatternError> {
        globs(&config.removed_tests).map(Removable)
    }

    pub fn allows(&self, test: &str) -> bool {
        self.0.is_match(test)
    }
}

impl Tolerance {
    /// Whether a failed command goal is tolerated: every failure closer
    /// read in its output is a tolerated one from the base commit. Output
    /// past the cap is never tolerated: what came after the cut could hold
    /// a new failure (or the agent's code could print its way past it).
    pub fn excuses_goal(&self, baseline: &Baseline, goal: &GoalResult) -> bool {
        !goal.passed
            && !goal.failures.is_empty()
            && !goal.output_cut
            && self.sort(baseline, &goal.failures).tolerated.len() == goal.failures.len()
    }

    /// `failures` split into those this tolerance excuses and the rest.
    pub fn split(&self, failures: Vec<Failure>) -> (Vec<Failure>, Vec<Failure>) {
        failures.into_iter().partition(|f| self.tolerates(f))
    }
}

/// A failure's id as reviewers read it: the test, else its summary.
pub fn failure_id(failure: &Failure) -> String {
    failure.test.clone().unwrap_or_else(|| failure.summary())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failures(command: &str, output: &str) -> Vec<Failure> {
        crate::engine::fingerprint::parse_failures(command, output, None)
    }

    fn goal(command: &str, output: &str) -> GoalResult {
        use crate::engine::goals::GoalLevel;
        let mut g = GoalResult::check(GoalLevel::Dod, "tests_pass", command, false, String::new());
        g.failures = failures(command, output);
        g.passed_tests = crate::engine::fingerprint::passed_tests(output);
        g
    }

    fn config(tolerate: Tolerate, known: &[&str]) -> BaselineConfig {
        BaselineConfig {
            tolerate,
            known_failures: known.iter().map(|s| s.to_string()).collect(),
            removed_tests: Vec::new(),
        }
    }

    /// Real `cargo test --no-fail-fast` output (tests/fixtures/fingerprint):
    /// at base a unit test, an integration test `roundtrip` and a doctest
    /// fail, all tolerated. At the head the same three fail, and so do a
    /// `#[should_panic]` test, `roundtrip` in a second binary, and a binary
    /// ends without its result: the goal is not excused. The control, the
    /// base's own output again, is.
    #[test]
    fn a_new_cargo_failure_never_hides_behind_a_tolerated_one() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fingerprint");
        let read = |name: &str| std::fs::read_to_string(format!("{dir}/{name}")).unwrap();
        let (base_out, head_out) = (
            read("cargo-workspace-base.txt"),
            read("cargo-workspace.txt"),
        );
        let command = "cargo test --no-fail-fast";
        let baseline = Baseline {
            base_commit: "b".into(),
            failures: failures(command, &base_out),
            goals: vec![goal(command, &base_out)],
        };
        let all = Tolerance::new(&config(Tolerate::Preexisting, &[])).unwrap();
        assert!(
            all.excuses_goal(&baseline, &goal(command, &base_out)),
            "control"
        );
        let head = goal(command, &head_out);
        assert!(!all.excuses_goal(&baseline, &head), "{:#?}", head.failures);
        let sorted = all.sort(&baseline, &head.failures);
        let ids: Vec<String> = sorted.new.iter().map(failure_id).collect();
        assert!(ids.iter().any(|id| id == "tests::rejects_zero"), "{ids:?}");
    }

    #[test]
    fn strict_by_default_a_failure_present_at_base_still_blocks() {
        let out = "not ok 1 - tests/add.sh\nnot ok 2 - tests/legacy.sh\n";
        let at_base = failures("sh run_tests.sh", out);
        let baseline = Baseline {
            base_commit: "b".into(),
            failures: at_base.clone(),
            goals: vec![goal("sh run_tests.sh", out)],
        };
        let now = failures(
            "sh run_tests.sh",
            "ok 1 - tests/add.sh\nnot ok 2 - tests/legacy.sh\n",
        );
        let strict = Tolerance::new(&config(Tolerate::None, &[])).unwrap();
        let sorted = strict.sort(&baseline, &now);
        assert_eq!(sorted.since_base.len(), 1, "{sorted:?}");
        assert!(sorted.new.is_empty() && sorted.tolerated.is_empty());

        let all = Tolerance::new(&config(Tolerate::Preexisting, &[])).unwrap();
        assert_eq!(all.sort(&baseline, &now).tolerated.len(), 1);
        let mut only_legacy = goal("sh run_tests.sh", "not ok 2 - tests/legacy.sh\n");
        assert!(all.excuses_goal(&baseline, &only_legacy));
        // Output past the cap: what came after the cut is unknown.
        only_legacy.output_cut = true;
        assert!(!all.excuses_goal(&baseline, &only_legacy));

        // Output no runner parser knows (a linter's) names no test: its one
        // failure is the digest of its last error lines, which 50 new
        // violations above them keep. Never tolerated, so never excused.
        let lint = "make lint";
        let old = "a.py:1:1: E501 line too long\nmake: *** [Makefile:2: lint] Error 1\n";
        let lint_base = Baseline {
            base_commit: "b".into(),
            failures: failures(lint, old),
            goals: vec![goal(lint, old)],
        };
        let more = format!("b.py:2:1: F401 unused\n{old}");
        assert_eq!(
            failures(lint, &more)[0].fingerprint,
            lint_base.failures[0].fingerprint,
            "the digest cannot tell"
        );
        assert!(!all.excuses_goal(&lint_base, &goal(lint, &more)));
        assert_eq!(
            all.sort(&lint_base, &failures(lint, &more))
                .since_base
                .len(),
            1
        );

        let listed = Tolerance::new(&config(Tolerate::Listed, &["tests/legacy*"])).unwrap();
        assert_eq!(listed.sort(&baseline, &now).tolerated.len(), 1);
        let other = Tolerance::new(&config(Tolerate::Listed, &["tests/other.sh"])).unwrap();
        assert_eq!(other.sort(&baseline, &now).since_base.len(), 1);

        let head = [goal(
            "sh run_tests.sh",
            "ok 1 - tests/add.sh\nnot ok 2 - tests/legacy.sh\n",
        )];
        let fixed = fixed_since_base(&baseline, &head);
        assert_eq!(
            fixed.iter().map(failure_id).collect::<Vec<_>>(),
            vec!["tests/add.sh"]
        );
        assert!(fixed_since_base(&baseline, &[goal("other", "")]).is_empty());
        assert!(vanished_since_base(&baseline, &head).is_empty());

        // tests/add.sh no longer runs at all: deleted, or skipped.
        let gone = [goal(
            "sh run_tests.sh",
            "not ok 1 - tests/legacy.sh\nok 2 - tests/add.sh # SKIP\n",
        )];
        assert!(fixed_since_base(&baseline, &gone).is_empty());
        assert_eq!(
            vanished_since_base(&baseline, &gone)
                .iter()
                .map(failure_id)
                .collect::<Vec<_>>(),
            vec!["tests/add.sh"]
        );
        // The same goal, not required: reported, blocking nothing.
        let mut optional = gone;
        optional[0].required = false;
        assert!(vanished_since_base(&baseline, &optional).is_empty());
    }

    /// A test that passed at base and is no longer run while its goal
    /// passes (deleted, skipped, a runner switched off) is dropped; one
    /// still passing or failing is not, and a goal that fails now is not
    /// read (it blocks already).
    #[test]
    fn a_test_that_passed_at_base_and_no_longer_runs_is_dropped() {
        let out = "ok 1 - tests/add.sh\nok 2 - tests/sub.sh\n";
        let mut base_goal = goal("sh run_tests.sh", out);
        base_goal.passed = true;
        let baseline = Baseline {
            base_commit: "b".into(),
            failures: Vec::new(),
            goals: vec![base_goal],
        };
        let at_head = |output: &str, passed: bool| {
            let mut g = goal("sh run_tests.sh", output);
            g.passed = passed;
            [g]
        };
        let ids = |head: &[GoalResult]| {
            dropped_since_base(&baseline, head)
                .into_iter()
                .map(|(_, id)| id)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(&at_head("ok 1 - tests/add.sh\n", true)),
            ["tests/sub.sh"]
        );
        assert_eq!(
            ids(&at_head(
                "ok 1 - tests/add.sh\nok 2 - tests/sub.sh # SKIP\n",
                true
            )),
            ["tests/sub.sh"]
        );
        // Output that names no test at all blocks as unreadable, once,
        // instead of as every test dropped (a runner's verbosity changed).
        assert!(ids(&at_head("", true)).is_empty());
        assert_eq!(silent_since_base(&baseline, &at_head("", true)).len(), 1);
        assert!(silent_since_base(&baseline, &at_head("ok 1 - tests/add.sh\n", true)).is_empty());
        // The controls: all still run (one now failing), or the goal fails.
        assert!(ids(&at_head(out, true)).is_empty());
        assert!(
            ids(&at_head(
                "ok 1 - tests/add.sh\nnot ok 2 - tests/sub.sh\n",
                true
            ))
            .is_empty()
        );
        assert!(ids(&at_head("", false)).is_empty());
        // Nothing is told missing from output past the cap; the goal is
        // named as unreadable instead.
        let mut cut = at_head("", true);
        cut[0].output_cut = true;
        assert!(ids(&cut).is_empty());
        assert_eq!(
            cut_since_base(&baseline, &cut),
            ["tests_pass: sh run_tests.sh"]
        );
        assert!(cut_since_base(&baseline, &at_head("", true)).is_empty());
        // A test shown running (its result line split) still runs.
        let mut split = at_head("ok 1 - tests/add.sh\n", true);
        split[0].started_tests = vec!["tests/sub.sh".into()];
        assert!(ids(&split).is_empty());
        // A parametrised case renamed by the fix still runs; all cases but
        // one skipped do not; a path is not a Go subtest.
        let param = |out: &str| {
            let mut g = goal("pytest -v", out);
            g.passed = true;
            g
        };
        let base3 = Baseline {
            base_commit: "b".into(),
            failures: Vec::new(),
            goals: vec![param(
                "t.py::test_add[1] PASSED\nt.py::test_add[2] PASSED\n",
            )],
        };
        let renamed = [param(
            "t.py::test_add[1] PASSED\nt.py::test_add[3] PASSED\n",
        )];
        assert!(dropped_since_base(&base3, &renamed).is_empty());
        let fewer = [param("t.py::test_add[1] PASSED\n")];
        assert_eq!(dropped_since_base(&base3, &fewer).len(), 1);
        assert_eq!(stem("TestParse/want_3"), "TestParse");
        assert_eq!(stem("Tests/test_x.py::test_a"), "Tests/test_x.py::test_a");
        assert_eq!(stem("TestSuite/foo.t"), "TestSuite/foo.t");
        assert_eq!(stem("Testing/x"), "Testing/x");
        // The repository may allow a removal.
        let allowed = BaselineConfig {
            removed_tests: vec!["tests/sub*".into()],
            ..BaselineConfig::default()
        };
        let removable = Removable::new(&allowed).unwrap();
        assert!(removable.allows("tests/sub.sh") && !removable.allows("tests/add.sh"));
    }

    /// A jest test that passed at base is skipped now: named, as for the
    /// other runners (jest's verbose tree names its passes).
    #[test]
    fn a_jest_test_skipped_since_base_is_no_longer_run() {
        let jest = "npx jest --verbose";
        let at_base = " PASS  src/sum.test.js\n  sum\n    ✓ adds (5 ms)\n    ✓ subtracts\n\nTests:       2 passed, 2 total\n";
        let now = " PASS  src/sum.test.js\n  sum\n    ○ skipped adds\n    ✓ subtracts\n\nTests:       1 skipped, 1 passed, 2 total\n";
        let baseline = Baseline {
            base_commit: "b".into(),
            failures: Vec::new(),
            goals: vec![goal(jest, at_base)],
        };
        let mut head = goal(jest, now);
        head.passed = true;
        let dropped: Vec<String> = dropped_since_base(&baseline, &[head])
            .into_iter()
            .map(|(_, id)| id)
            .collect();
        assert_eq!(dropped, ["sum › adds"]);
    }
}
