//! Reading a unified diff: the lines a run added, with their file and line
//! number in the new version, for the secret scanner. Binary patches are
//! skipped; parsing never fails on odd input, it just finds fewer lines.

use serde::{Deserialize, Serialize};

/// One added line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddedLine {
    pub path: String,
    /// 1-based line number in the new file.
    pub line: u32,
    pub text: String,
}

/// The added lines of `git diff` output (any context size).
pub fn parse_added(unified: &str) -> Vec<AddedLine> {
    let mut out = Vec::new();
    let mut path: Option<String> = None;
    let mut next_line: u32 = 0;
    let mut in_hunk = false;
    for line in unified.lines() {
        if line.starts_with("diff --git ") {
            path = None;
            in_hunk = false;
        } else if let Some(p) = line.strip_prefix("+++ ") {
            path = p.strip_prefix("b/").map(str::to_owned);
            in_hunk = false;
        } else if line.starts_with("GIT binary patch") {
            in_hunk = false;
            path = None;
        } else if let Some(header) = line.strip_prefix("@@ ") {
            next_line = header
                .split_whitespace()
                .find_map(|part| part.strip_prefix('+'))
                .and_then(|range| range.split(',').next())
                .and_then(|start| start.parse().ok())
                .unwrap_or(0);
            in_hunk = path.is_some();
        } else if in_hunk {
            if let Some(text) = line.strip_prefix('+') {
                if let Some(p) = &path {
                    out.push(AddedLine {
                        path: p.clone(),
                        line: next_line,
                        text: text.to_owned(),
                    });
                }
                next_line = next_line.saturating_add(1);
            } else if line.starts_with(' ') {
                next_line = next_line.saturating_add(1);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_added_lines_in_the_new_file() {
        let diff = "diff --git a/src/a.rs b/src/a.rs\nindex 1..2 100644\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1,3 +1,4 @@\n fn a() {}\n-fn b() {}\n+fn b2() {}\n+fn c() {}\n fn d() {}\ndiff --git a/img.png b/img.png\nGIT binary patch\nliteral 3\n+abc\n\ndiff --git a/old.txt b/old.txt\n--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n";
        let added = parse_added(diff);
        let got: Vec<(&str, u32, &str)> = added
            .iter()
            .map(|a| (a.path.as_str(), a.line, a.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [("src/a.rs", 2, "fn b2() {}"), ("src/a.rs", 3, "fn c() {}")]
        );
    }

    /// Found by the fuzz target `diff` (tests/fuzz): a hunk that starts at
    /// the last line number a `u32` holds overflowed the counter.
    #[test]
    fn a_hunk_at_the_largest_line_number_does_not_overflow() {
        let diff = "+++ b/x\n@@ -1 +4294967295,3 @@\n+a\n b\n+c\n";
        let added = parse_added(diff);
        let lines: Vec<u32> = added.iter().map(|a| a.line).collect();
        assert_eq!(lines, [u32::MAX, u32::MAX]);
    }
}
