//! mocha's default `spec` reporter: the `describe` blocks and tests as a
//! tree indented two spaces a level (`✔ name (5ms)` a pass, `N) name` a
//! failure, `- name` pending), then `N passing (…)`, `N failing` and a
//! numbered block per failure: its titles one a line (`1) Suite` then
//! `Nested` … `test:`), the error, and its stack (`at … (file:line:col)`).
//!
//! A test is named by its titles joined with a space, as mocha's own
//! `fullTitle()` names it: `Suite Nested test`, the same in the tree (its
//! passes) and in the failure blocks.

use std::sync::LazyLock;

use regex::Regex;

use super::RawFailure;
use super::normalize::re;
use super::passed_js::tree_name;

static PASSING: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*\d+ passing \(\d+(?:\.\d+)?\s*m?s\)$"));
static FAILING: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*\d+ failing$"));
static FAILURE_HEAD: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*(\d+)\) (.+)$"));
static FRAME: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*at .*?\(?([^\s()]+):(\d+):\d+\)?$"));
static DURATION: LazyLock<Regex> = LazyLock::new(|| re(r"\s+\(\d+m?s\)$"));

/// Whether the output is mocha's: its `N passing (…)` summary.
pub(crate) fn detect(text: &str) -> bool {
    text.lines().any(|l| PASSING.is_match(l.trim_end()))
}

/// The failures of the numbered blocks after `N failing`.
pub(crate) fn parse(text: &str) -> Vec<RawFailure> {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    let Some(start) = lines.iter().position(|l| FAILING.is_match(l)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut i = start + 1;
    while i < lines.len() {
        let Some(c) = FAILURE_HEAD.captures(lines[i]) else {
            i += 1;
            continue;
        };
        let mut titles = vec![c[2].trim().to_owned()];
        // The titles go on, one a line, until one ends with `:`.
        while !titles.last().is_some_and(|t| t.ends_with(':')) {
            i += 1;
            match lines.get(i).map(|l| l.trim()) {
                Some(t) if !t.is_empty() && titles.len() < 32 => titles.push(t.to_owned()),
                _ => break,
            }
        }
        let test = titles.join(" ").trim_end_matches(':').to_owned();
        // Titles that ran to the end of the output leave no body.
        let body: Vec<&str> = lines
            .get(i + 1..)
            .unwrap_or_default()
            .iter()
            .take_while(|l| !FAILURE_HEAD.is_match(l))
            .copied()
            .collect();
        i += 1 + body.len();
        out.push(RawFailure {
            test: Some(test),
            location: location(&body),
            error: error(&body),
        });
    }
    out
}

/// The error's first lines, before its stack.
fn error(body: &[&str]) -> String {
    let error = body
        .iter()
        .map(|l| l.trim())
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty() && !FRAME.is_match(l))
        .take(3)
        .collect::<Vec<_>>()
        .join(" ");
    match error.is_empty() {
        true => "test failed".to_owned(),
        false => error,
    }
}

/// The first stack frame in the project's own files.
fn location(body: &[&str]) -> Option<String> {
    body.iter()
        .filter(|l| !l.contains("node_modules") && !l.contains("node:"))
        .find_map(|l| FRAME.captures(l).map(|m| format!("{}:{}", &m[1], &m[2])))
}

/// The passes of the tree, named as [`parse`] names failures. The tree is
/// what comes before the `N passing` line; lines at the margin are what
/// tests printed, not the tree.
pub(super) fn passed(text: &str) -> Vec<String> {
    if !detect(text) {
        return Vec::new();
    }
    let mut names = Vec::new();
    // The open `describe` blocks, with their indentation.
    let mut open: Vec<(usize, String)> = Vec::new();
    for line in text.lines().map(str::trim_end) {
        if PASSING.is_match(line) {
            break;
        }
        let content = line.trim_start();
        let indent = line.len() - content.len();
        if indent == 0 || content.is_empty() {
            continue;
        }
        open.retain(|(at, _)| *at < indent);
        match test_line(content) {
            Some(Some(name)) => names.push(tree_name(&open, name, " ")),
            Some(None) => {}
            None => open.push((indent, content.to_owned())),
        }
    }
    names
}

/// A tree line that is a test: `Some(Some(name))` for a pass, `Some(None)`
/// for a failure or a pending test; `None` for a `describe`.
fn test_line(content: &str) -> Option<Option<&str>> {
    if FAILURE_HEAD.is_match(content) {
        return Some(None);
    }
    let (marker, rest) = content.split_once(' ')?;
    match marker {
        "✔" | "✓" | "√" => Some(Some(
            DURATION.find(rest).map_or(rest, |m| &rest[..m.start()]),
        )),
        "-" => Some(None),
        _ => None,
    }
}
