//! The tests a run reports as passed, by name, for the formats that name
//! them: TAP, unittest (`-v`), pytest (`-v` or `-rA`), `cargo test`,
//! `go test -v`, jest `--verbose` and vitest's verbose reporter
//! (`passed_js.rs`), and mocha's default reporter (`mocha.rs`). Named passes are what tells a test that now passes from a
//! test that was deleted or skipped: a failing test only counts as fixed,
//! or as the reproduction of a bug, when it ran and passed.
//!
//! Names are given in the form the failure parsers give them, so the two
//! can be compared.
//!
//! The tests a run shows starting (not skipped), whatever their result, are
//! read too: a test's result line that its own output split in two (a log
//! line between unittest's `name (id) ... ` and its `ok`, a docstring, a
//! captured print under `pytest -s`) still shows that the test ran.

use std::sync::LazyLock;

use regex::Regex;

use super::cargo::LIBTEST_NAME;
use super::normalize::{re, strip_ansi};

static TAP: LazyLock<Regex> = LazyLock::new(|| re(r"^ok \d+(?: -)? (.+?)\s*$"));
static UNITTEST: LazyLock<Regex> = LazyLock::new(|| re(r"^(\w+) \(([\w.]+)\) \.\.\. ok$"));
static PYTEST_VERBOSE: LazyLock<Regex> = LazyLock::new(|| re(r"^(\S+::\S+) PASSED"));
static PYTEST_SUMMARY: LazyLock<Regex> = LazyLock::new(|| re(r"^PASSED (\S+)"));
static CARGO: LazyLock<Regex> = LazyLock::new(|| re(&format!(r"^test {LIBTEST_NAME} \.\.\. ok$")));
static GO: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*--- PASS: (\S+)"));

static UNITTEST_START: LazyLock<Regex> = LazyLock::new(|| re(r"^(\w+) \(([\w.]+)\)(.*)$"));
static PYTEST_START: LazyLock<Regex> = LazyLock::new(|| re(r"^(\S+::\S+)(.*)$"));
static CARGO_START: LazyLock<Regex> =
    LazyLock::new(|| re(&format!(r"^test {LIBTEST_NAME} \.\.\.(.*)$")));
static GO_RUN: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*=== RUN\s+(\S+)"));
static GO_SKIP: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*--- SKIP: (\S+)"));

/// The names of the tests `output` shows starting and not skipped (see the
/// module notes), in the passed tests' form. A start line that carries no
/// result (`test_doc (m.C.test_doc)` before a docstring, a node id before
/// its captured output) takes the first result that follows it before the
/// next start line; with none (pytest's warnings summary lists bare node
/// ids) the test is not counted.
pub fn started_tests(output: &str) -> Vec<String> {
    let text = strip_ansi(output);
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let go_skipped: Vec<&str> = lines
        .iter()
        .filter_map(|l| {
            GO_SKIP
                .captures(l)
                .map(|c| c.get(1).map_or("", |m| m.as_str()))
        })
        .collect();
    let mut names: Vec<String> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some((name, rest)) = start_of(line) else {
            continue;
        };
        let result = outcome(&rest).or_else(|| {
            lines[i + 1..]
                .iter()
                .take_while(|l| start_of(l).is_none())
                .find_map(|l| outcome(l))
        });
        if result == Some(Outcome::Ran) {
            names.push(name);
        }
    }
    names.extend(lines.iter().filter_map(|l| {
        let name = GO_RUN.captures(l)?.get(1)?.as_str();
        (!go_skipped.contains(&name)).then(|| name.to_owned())
    }));
    names.sort();
    names.dedup();
    names
}

/// What a result says of its test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ran,
    Skipped,
}

/// The result a line (or a start line's rest) gives, if it gives one.
fn outcome(text: &str) -> Option<Outcome> {
    let lower = text.to_ascii_lowercase();
    let skipped = ["skip", "ignored", "xfail", "deselected", "expected failure"];
    if skipped.iter().any(|w| lower.contains(w)) {
        return Some(Outcome::Skipped);
    }
    let trimmed = text.trim();
    let ran = [
        "PASSED",
        "FAILED",
        "FAIL",
        "ERROR",
        "XPASS",
        "ok",
        "unexpected success",
    ];
    ran.iter()
        .any(|w| {
            trimmed == *w
                || trimmed.ends_with(&format!(" {w}"))
                || trimmed.starts_with(&format!("{w} "))
        })
        .then_some(Outcome::Ran)
}

/// A test's start line: its name, in the passed tests' form, and the rest
/// of the line.
fn start_of(line: &str) -> Option<(String, String)> {
    if let Some(c) = UNITTEST_START.captures(line) {
        let (method, id) = (&c[1], &c[2]);
        let name = match id.ends_with(method) {
            true => id.to_owned(),
            false => format!("{id}.{method}"),
        };
        return Some((name, c[3].to_owned()));
    }
    [&*PYTEST_START, &*CARGO_START]
        .iter()
        .find_map(|r| r.captures(line).map(|c| (c[1].to_owned(), c[2].to_owned())))
}

/// The names of the tests `output` reports as passed (skipped and TODO
/// tests are not passed).
pub fn passed_tests(output: &str) -> Vec<String> {
    let text = strip_ansi(output);
    let mut names: Vec<String> = text
        .lines()
        .map(str::trim_end)
        .filter_map(passed_name)
        .collect();
    names.extend(super::passed_js::passed(&text));
    names.extend(super::mocha::passed(&text));
    names.sort();
    names.dedup();
    names
}

fn passed_name(line: &str) -> Option<String> {
    if let Some(c) = TAP.captures(line) {
        let rest = &c[1];
        if rest.contains("# SKIP") || rest.contains("# TODO") || rest.contains("# skip") {
            return None;
        }
        return Some(rest.split(" # ").next().unwrap_or(rest).trim().to_owned());
    }
    if let Some(c) = UNITTEST.captures(line) {
        let (method, id) = (&c[1], &c[2]);
        return Some(match id.ends_with(method) {
            true => id.to_owned(),
            false => format!("{id}.{method}"),
        });
    }
    [&*PYTEST_VERBOSE, &*PYTEST_SUMMARY, &*CARGO, &*GO]
        .iter()
        .find_map(|r| r.captures(line).map(|c| c[1].to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_are_named_as_the_failure_parsers_name_failures() {
        let tap = "1..3\nok 1 - tests/add.sh\nnot ok 2 - tests/b.sh\nok 3 - tests/c.sh # SKIP not today\n";
        assert_eq!(passed_tests(tap), ["tests/add.sh"]);
        let unittest = "test_add (test_calc.CalcTest.test_add) ... ok\ntest_legacy (test_calc.CalcTest.test_legacy) ... FAIL\ntest_old (test_calc.CalcTest) ... ok\ntest_skip (test_calc.CalcTest.test_skip) ... skipped 'no'\n";
        assert_eq!(
            passed_tests(unittest),
            ["test_calc.CalcTest.test_add", "test_calc.CalcTest.test_old"]
        );
        let pytest = "test_calc.py::test_add PASSED  [ 50%]\ntest_calc.py::test_neg FAILED [100%]\nPASSED test_calc.py::test_sub\n";
        assert_eq!(
            passed_tests(pytest),
            ["test_calc.py::test_add", "test_calc.py::test_sub"]
        );
        let cargo = "test parser::tests::empty ... ok\ntest parser::tests::big ... FAILED\n";
        assert_eq!(passed_tests(cargo), ["parser::tests::empty"]);
        let go = "=== RUN   TestAdd\n--- PASS: TestAdd (0.00s)\n--- FAIL: TestSub (0.00s)\n";
        assert_eq!(passed_tests(go), ["TestAdd"]);
        assert!(passed_tests("....\nOK\n").is_empty());
    }

    /// A result line split by the test's own output still shows the test
    /// ran; a skipped one does not.
    #[test]
    fn a_test_shown_starting_ran_whatever_split_its_result_line() {
        let unittest = "test_add (test_calc.CalcTest.test_add) ... log line\nok\n\
                        test_doc (test_calc.CalcTest.test_doc)\nAdds. ... ok\n\
                        test_skip (test_calc.CalcTest.test_skip) ... skipped 'flaky'\n";
        assert_eq!(
            started_tests(unittest),
            ["test_calc.CalcTest.test_add", "test_calc.CalcTest.test_doc"]
        );
        assert!(
            passed_tests(unittest).is_empty(),
            "the control: no whole result line"
        );
        let pytest = "test_calc.py::test_add printed\nPASSED\ntest_calc.py::test_old SKIPPED (x)\n";
        assert_eq!(started_tests(pytest), ["test_calc.py::test_add"]);
        let cargo = "test calc::add ... printed\nok\ntest calc::slow ... ignored\n";
        assert_eq!(started_tests(cargo), ["calc::add"]);
        let go =
            "=== RUN   TestAdd\nlog\n--- PASS: TestAdd\n=== RUN   TestOld\n--- SKIP: TestOld\n";
        assert_eq!(started_tests(go), ["TestAdd"]);
        // A docstring before a skip, a warning summary's bare node id, and
        // a skip after a print under `pytest -s`: not started.
        let docstring = "test_doc (m.C.test_doc)\nAdds. ... skipped 'flaky'\n";
        assert!(started_tests(docstring).is_empty());
        let warned = "=== warnings summary ===\nt.py::test_old\n  t.py:3: UserWarning: x\n";
        assert!(started_tests(warned).is_empty());
        let printed = "t.py::test_a \nhello\nSKIPPED (why)\nt.py::test_b \nhello\nPASSED\n";
        assert_eq!(started_tests(printed), ["t.py::test_b"]);
    }
}
