//! RSpec: its `N examples, M failures` summary, the numbered blocks under
//! `Failures:` (`1) Calc adds`, then `Failure/Error: …` and the message,
//! then `# ./spec/calc_spec.rb:5:in …`), and the `Failed examples:` list
//! (`rspec ./spec/calc_spec.rb:4 # Calc adds`), whichever formatter ran.
//! An example is named as that list names it (RSpec's `full_description`).
//!
//! Passes are not read: only `--format documentation` shows them, as a
//! tree whose top-level groups sit at the margin, where whatever an example
//! prints lands too, so a printed line cannot be told from a group and
//! would rename the examples under it (docs/verification.md).

use std::sync::LazyLock;

use regex::Regex;

use super::RawFailure;
use super::normalize::re;

static SUMMARY: LazyLock<Regex> = LazyLock::new(|| re(r"^\d+ examples?, \d+ failures?"));
static FAILED_EXAMPLE: LazyLock<Regex> =
    LazyLock::new(|| re(r"^rspec (\S+?)(?:\[[\d:]+\])? # (.+)$"));
static FAILURE_HEAD: LazyLock<Regex> = LazyLock::new(|| re(r"^\s+(\d+)\) (.+)$"));
static FRAME: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*# (?:\./)?([^\s:]+):(\d+)"));

/// Whether the output is RSpec's: its `N examples, M failures` summary.
pub(crate) fn detect(text: &str) -> bool {
    text.lines().any(|l| SUMMARY.is_match(l.trim()))
}

/// The examples of the `Failed examples:` list, each with the error of
/// its block under `Failures:`.
pub(crate) fn parse(text: &str) -> Vec<RawFailure> {
    let lines: Vec<&str> = text.lines().map(str::trim_end).collect();
    lines
        .iter()
        .filter_map(|l| FAILED_EXAMPLE.captures(l.trim()))
        .map(|c| {
            let test = c[2].trim().to_owned();
            let (error, frame) = block_of(&lines, &test);
            let location = frame.or_else(|| Some(c[1].trim_start_matches("./").to_owned()));
            RawFailure {
                test: Some(test),
                location,
                error,
            }
        })
        .collect()
}

/// The error of the `Failures:` block of `test`, and the first frame in
/// the project's own files.
fn block_of(lines: &[&str], test: &str) -> (String, Option<String>) {
    let Some(start) = lines.iter().position(|l| {
        FAILURE_HEAD
            .captures(l)
            .is_some_and(|c| c[2].trim() == test)
    }) else {
        return ("example failed".to_owned(), None);
    };
    let body: Vec<&str> = lines[start + 1..]
        .iter()
        .take_while(|l| !FAILURE_HEAD.is_match(l) && !l.starts_with("Finished in"))
        .map(|l| l.trim())
        .collect();
    let frame = body
        .iter()
        .filter(|l| !l.contains("/gems/"))
        .find_map(|l| FRAME.captures(l).map(|m| format!("{}:{}", &m[1], &m[2])));
    // The message under `Failure/Error: <the line that failed>`.
    let error = body
        .iter()
        .skip_while(|l| l.starts_with("Failure/Error:") || l.is_empty())
        .take_while(|l| !l.is_empty() && !l.starts_with('#'))
        .take(3)
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    match error.is_empty() {
        true => ("example failed".to_owned(), frame),
        false => (error, frame),
    }
}
