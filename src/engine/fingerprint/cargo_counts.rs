//! What `cargo test` and nextest count against what closer named.
//!
//! A failed goal is excused only when every failure read from it is a
//! tolerated one (decision 206), so a failure the parser cannot tell apart
//! from a tolerated one, or does not see, must not go unnoticed. libtest
//! prints, per test binary, `running N tests`, a result line per test and
//! `test result: … N failed;`; nextest ends with `Summary … N failed`. A
//! doubt becomes one failure that names no test, which no tolerance
//! excuses:
//! - a binary counts more failures than its section names (a form of name
//!   not read);
//! - the same name fails in the sections of two different targets (`Running
//!   tests/json.rs`, `Running tests/yaml.rs`: libtest's names do not say
//!   which, and the two would be read as one); the same target run twice
//!   (`cargo test; cargo test --release`) is the same test;
//! - a binary that said `running N tests` ended without its result (a test
//!   that exits the process: cargo reports no failure for it);
//! - nextest output without its `Summary`, or counting more than it named.
//!
//! These catch what runners print by themselves. A test that prints a
//! whole runner's output can still forge it (docs/verification.md).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use regex::Regex;

use super::RawFailure;
use super::normalize::re;

/// `Running unittests src/lib.rs (target/debug/deps/x-…)`, `Running
/// tests/api.rs (…)`: the target; `Doc-tests name`.
static TARGET: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(?:Running ((?:unittests )?\S+) \(\S*deps[/\\]\S+\)|(Doc-tests \S+))$"));
static RUNNING: LazyLock<Regex> = LazyLock::new(|| re(r"^running \d+ tests?$"));
/// `test result: FAILED. 0 passed; 2 failed; …`.
static RESULT: LazyLock<Regex> =
    LazyLock::new(|| re(r"^test result: (?:ok|FAILED)\. \d+ passed; (\d+) failed;"));
/// `Summary [ 0.01s] 3 tests run: 1 passed, 2 failed, …` (`3/10 tests
/// run` when nextest cancelled the rest).
static NEXTEST_SUMMARY: LazyLock<Regex> =
    LazyLock::new(|| re(r"^Summary \[.*\] \d+(?:/\d+)? tests? run: "));
static NEXTEST_COUNT: LazyLock<Regex> =
    LazyLock::new(|| re(r"(\d+) (?:failed|timed out|exec failed)"));

/// One test binary's run.
#[derive(Default)]
struct Section {
    /// What cargo said it runs; `None` when it did not say (`-q`).
    target: Option<String>,
    names: BTreeSet<String>,
    /// Its `test result:` count of failures, once printed.
    counted: Option<usize>,
}

/// The sections of libtest output; `name_of` reads a failure's name from
/// a line.
fn sections(text: &str, name_of: impl Fn(&str) -> Option<String>) -> Vec<Section> {
    let mut out: Vec<Section> = Vec::new();
    let mut target = None;
    for line in text.lines().map(str::trim) {
        if let Some(c) = TARGET.captures(line) {
            target = c.get(1).or(c.get(2)).map(|m| m.as_str().to_owned());
        } else if RUNNING.is_match(line) {
            out.push(Section {
                target: target.take(),
                ..Section::default()
            });
        } else if let Some(c) = RESULT.captures(line) {
            if let Some(section) = out.last_mut() {
                let n = c[1].parse().unwrap_or(usize::MAX);
                section.counted = Some(section.counted.unwrap_or(0).saturating_add(n));
            }
        } else if let (Some(name), Some(section)) = (name_of(line), out.last_mut()) {
            section.names.insert(name);
        }
    }
    out
}

/// The failure to add to libtest's, if any (see the module notes).
pub(super) fn libtest_doubt(
    text: &str,
    name_of: impl Fn(&str) -> Option<String>,
) -> Option<RawFailure> {
    let sections = sections(text, name_of);
    let silent = sections.iter().filter(|s| s.counted.is_none()).count();
    let unread = sections
        .iter()
        .filter(|s| s.counted.is_some_and(|n| n > s.names.len()))
        .count();
    let mut targets: BTreeMap<&str, BTreeSet<Option<&str>>> = BTreeMap::new();
    for s in &sections {
        for name in &s.names {
            targets.entry(name).or_default().insert(s.target.as_deref());
        }
    }
    let shared: Vec<&str> = targets
        .iter()
        .filter(|(_, t)| t.len() > 1 || t.contains(&None) && sections.len() > 1)
        .map(|(name, _)| *name)
        .collect();
    let error = if !shared.is_empty() {
        format!(
            "`{}` failed in more than one test binary, and libtest's names do not say which",
            shared.join("`, `")
        )
    } else if unread > 0 {
        format!("{unread} test binaries counted more failed tests than closer could name")
    } else if silent > 0 {
        format!("{silent} test binaries ended without their result line")
    } else {
        return None;
    };
    Some(doubt(error))
}

/// The failure to add to nextest's, if any: `named` failures were read.
pub(super) fn nextest_doubt(text: &str, named: usize) -> Option<RawFailure> {
    let summary = text
        .lines()
        .map(str::trim)
        .rfind(|l| NEXTEST_SUMMARY.is_match(l));
    let Some(summary) = summary else {
        return Some(doubt("nextest printed no summary".to_owned()));
    };
    let counted = NEXTEST_COUNT
        .captures_iter(summary)
        .map(|c| c[1].parse::<usize>().unwrap_or(usize::MAX))
        .fold(0usize, usize::saturating_add);
    (counted > named).then(|| {
        doubt(format!(
            "nextest counted {counted} failed tests and closer could name {named} of them"
        ))
    })
}

fn doubt(error: String) -> RawFailure {
    RawFailure {
        test: None,
        location: None,
        error,
    }
}
