//! The tests jest and vitest report as passed, named as `jest.rs` names
//! their failures, so that a test that passed at base and no longer runs is
//! noticed in JavaScript repositories too.
//!
//! - jest `--verbose`: under each `PASS file` / `FAIL file` line, the
//!   `describe` blocks and tests as a tree indented two spaces a level,
//!   `✓ name (5 ms)` for a pass (`√` on Windows consoles). A pass is named
//!   `Suite › Nested › name`, as jest's `● Suite › Nested › name` failure
//!   header names a failure. The tree ends at the first line back at the
//!   margin or at a `●` failure block.
//! - vitest `--reporter=verbose`: `✓ file > suite > name 1ms`, named
//!   `file > suite > name` as its `FAIL file > suite > name` line is.
//!
//! Without `--verbose` jest prints no test names for passing files: nothing
//! is read, and nothing can be told missing (docs/verification.md).

use std::sync::LazyLock;

use regex::Regex;

use super::normalize::re;

static JEST_FILE: LazyLock<Regex> = LazyLock::new(|| re(r"^\s?(?:PASS|FAIL)\s+\S"));
static DURATION: LazyLock<Regex> = LazyLock::new(|| re(r"\s+\(\d+(?:\.\d+)?\s*m?s\)$"));
/// A test file (`x.test.ts`, `x.spec.jsx`, …) then ` > ` and the names.
static VITEST_PASS: LazyLock<Regex> = LazyLock::new(|| {
    re(r"^\s*[✓√] (\S+\.(?:test|spec)\.[cm]?[jt]sx? > .+?)(?:\s+\d+(?:\.\d+)?\s*m?s)?$")
});

/// The passes in `text` (colours already stripped), in the order shown.
pub(super) fn passed(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    // The open `describe` blocks of the jest file being read, with their
    // indentation; `None` outside a file's tree.
    let mut tree: Option<Vec<(usize, String)>> = None;
    for line in text.lines().map(str::trim_end) {
        let content = line.trim_start();
        let indent = line.len() - content.len();
        // ` PASS  file` (the badge's padding) or `PASS file`.
        if indent <= 1 && JEST_FILE.is_match(line) {
            tree = Some(Vec::new());
            continue;
        }
        let in_tree = indent > 0 && !content.is_empty() && !content.starts_with('●');
        match tree.as_mut() {
            Some(open) if in_tree => {
                open.retain(|(at, _)| *at < indent);
                // What a test logged (`console.log` and its lines) is not
                // the tree, whatever it printed.
                let logged = open.first().is_some_and(|(_, d)| d.starts_with("console."));
                match test_line(content) {
                    Some(Some(_)) if logged => {}
                    Some(Some(name)) => names.push(jest_name(open, name)),
                    Some(None) => {}
                    None => open.push((indent, content.to_owned())),
                }
            }
            Some(_) if content.is_empty() => {}
            Some(_) => tree = None,
            None => {}
        }
        if tree.is_none()
            && let Some(c) = VITEST_PASS.captures(line)
        {
            names.push(c[1].to_owned());
        }
    }
    names
}

/// A jest tree line that is a test: `Some(Some(name))` for a pass,
/// `Some(None)` for a failure, a skip or a todo; `None` for a `describe`.
fn test_line(content: &str) -> Option<Option<&str>> {
    let (marker, rest) = content.split_once(' ')?;
    match marker {
        "✓" | "√" => Some(Some(
            DURATION.find(rest).map_or(rest, |m| &rest[..m.start()]),
        )),
        "✕" | "×" | "○" | "✎" => Some(None),
        _ => None,
    }
}

/// `Suite › Nested › name`.
fn jest_name(open: &[(usize, String)], name: &str) -> String {
    tree_name(open, name, " › ")
}

/// A test's name in a reporter's tree: the open blocks' titles and its
/// own, joined with `separator`.
pub(super) fn tree_name(open: &[(usize, String)], name: &str, separator: &str) -> String {
    open.iter()
        .map(|(_, d)| d.as_str())
        .chain([name.trim()])
        .collect::<Vec<_>>()
        .join(separator)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::fingerprint::parse_failures;

    const JEST: &str = "\
 PASS  src/sum.test.js
  console.log
    ✓ a line the test logged

      at Object.log (src/sum.test.js:3:11)

  sum
    ✓ adds 1 + 2 to equal 3 (5 ms)
    negatives
      ✓ adds -1 + 1 (1 ms)
      ○ skipped later
  ✓ top level test
 FAIL  src/calc.test.js
  calc
    ✕ divides (3 ms)
    ✓ multiplies

  ● calc › divides

    expect(received).toBe(expected) // Object.is equality

    Expected: 2
    Received: 3

      at Object.<anonymous> (src/calc.test.js:4:20)

Test Suites: 1 failed, 1 passed, 2 total
Tests:       1 failed, 4 passed, 1 skipped, 6 total
";

    /// jest's verbose tree gives the passes, named as its `●` headers name
    /// failures; skips and failures are not passes.
    #[test]
    fn jest_passes_are_named_as_its_failures_are() {
        assert_eq!(
            passed(JEST),
            [
                "sum › adds 1 + 2 to equal 3",
                "sum › negatives › adds -1 + 1",
                "top level test",
                "calc › multiplies",
            ]
        );
        let failures = parse_failures("npx jest --verbose", JEST, None);
        let failed: Vec<_> = failures.iter().filter_map(|f| f.test.as_deref()).collect();
        assert_eq!(failed, ["calc › divides"], "the same form as the failure's");
        // Without --verbose jest names no passing test.
        let quiet = " PASS  src/sum.test.js\n\nTest Suites: 1 passed, 1 total\nTests:       2 passed, 2 total\n";
        assert!(passed(quiet).is_empty());
    }

    /// vitest's verbose reporter, named as its `FAIL` lines name failures.
    #[test]
    fn vitest_passes_are_named_as_its_failures_are() {
        let out = " ✓ src/sum.test.ts > sum > adds 1 + 2 1ms\n × src/sum.test.ts > sum > divides 2ms\n ↓ src/sum.test.ts > sum > later\n ✓ src/sum.test.ts > top 0ms\n\n Test Files  1 failed (1)\n";
        assert_eq!(
            passed(out),
            [
                "src/sum.test.ts > sum > adds 1 + 2",
                "src/sum.test.ts > top"
            ]
        );
        // bun's `✓ Array.map > works [0.12ms]` names no test file: its
        // duration would make every name new at each run.
        assert!(passed(" ✓ Array.map > works [0.12ms]\n").is_empty());
    }
}
