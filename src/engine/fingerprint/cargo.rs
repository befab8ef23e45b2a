//! `cargo test` (libtest) and `cargo nextest` output, and rustc's compile
//! errors (a build that fails names `error[E…]: … --> file:line:col`).
//!
//! What the runners count against what was named is checked in
//! `cargo_counts.rs`.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use super::normalize::re;
use super::{RawFailure, cargo_counts};

static PANIC: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^\s*thread '([^']+)'(?: \(\d+\))? panicked at ([^\s:]+):(\d+)(?::\d+)?:\s*(.*)$")
});
/// A libtest test name as its result line shows it: a path, or a doctest's
/// `file - item (line N)`, then the test's mode when it has one (` - should
/// panic`, ` - compile fail`, ` - compile`), which is not part of the name.
pub(super) const LIBTEST_NAME: &str =
    r"(\S+ - (?:.+? )?\(line \d+\)|\S+)(?: - (?:should panic|compile fail|compile))?";
static FAILED_VERBOSE: LazyLock<Regex> =
    LazyLock::new(|| re(&format!(r"^test {LIBTEST_NAME} \.\.\. FAILED")));
static FAILED_QUIET: LazyLock<Regex> = LazyLock::new(|| re(r"^(\S+) --- FAILED$"));
static STDOUT_BLOCK: LazyLock<Regex> = LazyLock::new(|| re(r"^---- (.+?) std(?:out|err) ----$"));
static NEXTEST_FAIL: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^\s*(?:FAIL|SIGSEGV|SIGABRT|TIMEOUT) \[\s*[\d.]+s\](?: \(\s*\d+/\d+\))? (\S+) (\S+)\s*$")
});
static COMPILE_ERROR: LazyLock<Regex> = LazyLock::new(|| re(r"^error(\[E\d+\])?: (.+)$"));
static ARROW: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*--> ([^\s:]+):(\d+):\d+"));

pub(crate) fn is_nextest(text: &str) -> bool {
    text.contains("Nextest run ID") || text.lines().any(|l| NEXTEST_FAIL.is_match(l))
}

pub(crate) fn is_cargo(text: &str) -> bool {
    text.contains("test result: FAILED")
        || text.contains("panicked at")
        || text.lines().any(|l| COMPILE_ERROR.is_match(l))
}

/// Panic messages by thread (= test) name: location and the first lines.
fn panics(text: &str) -> BTreeMap<String, (String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = BTreeMap::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = PANIC.captures(line) else {
            continue;
        };
        let mut message = vec![c[4].trim().to_owned()];
        for next in lines.iter().skip(i + 1).take(4) {
            let t = next.trim();
            if t.is_empty() || t.starts_with("stack backtrace") || t.starts_with("note:") {
                break;
            }
            message.push(t.to_owned());
        }
        let message = message
            .into_iter()
            .filter(|m| !m.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        found
            .entry(c[1].to_owned())
            .or_insert((format!("{}:{}", &c[2], &c[3]), message));
    }
    found
}

/// The first line of each `---- name stdout ----` block, for tests that fail
/// without a panic (a returned `Err`).
fn block_first_lines(text: &str) -> BTreeMap<String, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = BTreeMap::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some(c) = STDOUT_BLOCK.captures(line.trim()) {
            let first = lines
                .iter()
                .skip(i + 1)
                .map(|l| l.trim())
                .find(|l| !l.is_empty())
                .unwrap_or("")
                .to_owned();
            found.insert(c[1].to_owned(), first);
        }
    }
    found
}

fn failures_for(names: Vec<String>, text: &str) -> Vec<RawFailure> {
    let panics = panics(text);
    let blocks = block_first_lines(text);
    let mut seen = std::collections::BTreeSet::new();
    names
        .into_iter()
        .filter(|n| seen.insert(n.clone()))
        .map(|name| {
            let (location, error) = match panics.get(&name) {
                Some((loc, msg)) => (Some(loc.clone()), msg.clone()),
                None => (
                    None,
                    blocks
                        .get(&name)
                        .cloned()
                        .unwrap_or_else(|| "test failed".into()),
                ),
            };
            RawFailure {
                test: Some(name),
                location,
                error,
            }
        })
        .collect()
}

/// The test a libtest result line says failed.
fn failed_name(line: &str) -> Option<String> {
    FAILED_VERBOSE
        .captures(line.trim())
        .or_else(|| FAILED_QUIET.captures(line.trim()))
        .map(|c| c[1].to_owned())
}

/// libtest output (`cargo test`, quiet or not), else rustc compile errors.
pub(crate) fn parse(text: &str) -> Vec<RawFailure> {
    let mut names: Vec<String> = text.lines().filter_map(failed_name).collect();
    if names.is_empty() {
        names = text
            .lines()
            .filter_map(|l| STDOUT_BLOCK.captures(l.trim()).map(|c| c[1].to_owned()))
            .collect();
    }
    if names.is_empty() {
        return compile_errors(text);
    }
    let mut failures = failures_for(names, text);
    failures.extend(cargo_counts::libtest_doubt(text, failed_name));
    failures
}

/// `cargo nextest run` output: `FAIL [ 0.2s] (2/3) <binary> <test>`.
pub(crate) fn parse_nextest(text: &str) -> Vec<RawFailure> {
    let names: Vec<String> = text
        .lines()
        .filter_map(|l| NEXTEST_FAIL.captures(l).map(|c| c[2].to_owned()))
        .collect();
    if names.is_empty() {
        return compile_errors(text);
    }
    let mut failures = failures_for(names, text);
    failures.extend(cargo_counts::nextest_doubt(text, failures.len()));
    failures
}

/// `error[E0308]: mismatched types` followed by ` --> src/lib.rs:3:5`.
fn compile_errors(text: &str) -> Vec<RawFailure> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = COMPILE_ERROR.captures(line) else {
            continue;
        };
        let message = c[2].to_owned();
        if message.starts_with("could not compile") || message.starts_with("aborting due to") {
            continue;
        }
        let location = lines
            .iter()
            .skip(i + 1)
            .take(3)
            .find_map(|l| ARROW.captures(l).map(|a| format!("{}:{}", &a[1], &a[2])));
        let code = c.get(1).map_or("", |m| m.as_str());
        out.push(RawFailure {
            test: None,
            location,
            error: format!("error{code}: {message}"),
        });
    }
    out
}
