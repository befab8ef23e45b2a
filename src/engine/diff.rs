//! Reading a unified diff: the lines a run added, with their file and line
//! number in the new version, for the secret scanner. Binary patches are
//! skipped; parsing never fails on odd input, it just finds fewer lines. It
//! stops at a limit on added lines, each of which costs a copy of its path
//! and text: a diff past it is refused, not half-read.

use serde::{Deserialize, Serialize};

/// One added line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddedLine {
    pub path: String,
    /// 1-based line number in the new file.
    pub line: u32,
    pub text: String,
}

/// More added lines than a reader takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyLines {
    pub limit: usize,
}

/// The added lines of `git diff` output (any context size), at most
/// `max_lines` of them. Inside a hunk its header's line counts decide what
/// a line is, so an added line that reads `++ x` (shown as `+++ x`) is an
/// added line, not a file header.
pub fn parse_added(unified: &str, max_lines: usize) -> Result<Vec<AddedLine>, TooManyLines> {
    let mut out = Vec::new();
    let mut path: Option<String> = None;
    let mut hunk: Option<Hunk> = None;
    for line in unified.lines() {
        if let (Some(h), Some(p)) = (hunk.as_mut().filter(|h| h.open()), &path)
            && h.take(line, p, &mut out)
        {
            if out.len() > max_lines {
                return Err(TooManyLines { limit: max_lines });
            }
            continue;
        }
        hunk = None;
        if line.starts_with("diff --git ") || line.starts_with("GIT binary patch") {
            path = None;
        } else if let Some(p) = line.strip_prefix("+++ ") {
            path = p.strip_prefix("b/").map(str::to_owned);
        } else if let Some(header) = line.strip_prefix("@@ ") {
            hunk = Hunk::from_header(header);
        }
    }
    Ok(out)
}

/// Where the parser is inside a hunk: the next new line's number, and how
/// many old and new lines the hunk's header says are still to come.
struct Hunk {
    next_line: u32,
    old_left: u64,
    new_left: u64,
}

impl Hunk {
    /// From `-a,b +c,d @@ …` (a missing count is 1).
    fn from_header(header: &str) -> Option<Hunk> {
        let range = |prefix: char| {
            let part = header
                .split_whitespace()
                .find_map(|p| p.strip_prefix(prefix))?;
            let (start, count) = part.split_once(',').unwrap_or((part, "1"));
            Some((start.parse::<u32>().ok()?, count.parse::<u64>().ok()?))
        };
        let (_, old_left) = range('-')?;
        let (next_line, new_left) = range('+')?;
        Some(Hunk {
            next_line,
            old_left,
            new_left,
        })
    }

    fn open(&self) -> bool {
        self.old_left > 0 || self.new_left > 0
    }

    /// Reads one line of the hunk; `false` when the line is not one (the
    /// hunk ended early: the diff was cut or its counts are wrong).
    fn take(&mut self, line: &str, path: &str, out: &mut Vec<AddedLine>) -> bool {
        match line.as_bytes().first() {
            Some(b'+') => {
                out.push(AddedLine {
                    path: path.to_owned(),
                    line: self.next_line,
                    text: line[1..].to_owned(),
                });
                self.new_left = self.new_left.saturating_sub(1);
                self.next_line = self.next_line.saturating_add(1);
            }
            Some(b'-') => self.old_left = self.old_left.saturating_sub(1),
            // A context line; an empty one is a context line whose space
            // an editor or a mail client stripped.
            Some(b' ') | None => {
                self.old_left = self.old_left.saturating_sub(1);
                self.new_left = self.new_left.saturating_sub(1);
                self.next_line = self.next_line.saturating_add(1);
            }
            // `\ No newline at end of file`
            Some(b'\\') => {}
            Some(_) => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_added_lines_in_the_new_file() {
        let diff = "diff --git a/src/a.rs b/src/a.rs\nindex 1..2 100644\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -1,3 +1,4 @@\n fn a() {}\n-fn b() {}\n+fn b2() {}\n+fn c() {}\n fn d() {}\ndiff --git a/img.png b/img.png\nGIT binary patch\nliteral 3\n+abc\n\ndiff --git a/old.txt b/old.txt\n--- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-gone\n";
        let added = parse_added(diff, 100).unwrap();
        let got: Vec<(&str, u32, &str)> = added
            .iter()
            .map(|a| (a.path.as_str(), a.line, a.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [("src/a.rs", 2, "fn b2() {}"), ("src/a.rs", 3, "fn c() {}")]
        );
        assert_eq!(parse_added(diff, 1), Err(TooManyLines { limit: 1 }));
        assert_eq!(parse_added(diff, 2).unwrap().len(), 2);
    }

    /// Found by the fuzz target `diff` (tests/fuzz): a hunk that starts at
    /// the last line number a `u32` holds overflowed the counter.
    #[test]
    fn a_hunk_at_the_largest_line_number_does_not_overflow() {
        let diff = "+++ b/x\n@@ -1 +4294967295,3 @@\n+a\n b\n+c\n";
        let added = parse_added(diff, usize::MAX).unwrap();
        let lines: Vec<u32> = added.iter().map(|a| a.line).collect();
        assert_eq!(lines, [u32::MAX, u32::MAX]);
    }

    /// Found by the fuzz target `secrets` (tests/fuzz): an added line that
    /// begins with `++ ` reads `+++ ` in the diff, and was taken for a file
    /// header, so a credential on it went unscanned.
    #[test]
    fn an_added_line_that_looks_like_a_file_header_is_an_added_line() {
        let diff =
            "diff --git a/.env b/.env\n--- a/.env\n+++ b/.env\n@@ -0,0 +1,2 @@\n+a\n+++ token\n";
        let added = parse_added(diff, usize::MAX).unwrap();
        let got: Vec<(&str, u32, &str)> = added
            .iter()
            .map(|a| (a.path.as_str(), a.line, a.text.as_str()))
            .collect();
        assert_eq!(got, [(".env", 1, "a"), (".env", 2, "++ token")]);
        // The control: after the hunk's two lines, the same text is a header.
        let next = format!("{diff}diff --git a/b b/b\n--- a/b\n+++ b/b\n@@ -0,0 +1 @@\n+x\n");
        assert_eq!(
            parse_added(&next, usize::MAX)
                .unwrap()
                .last()
                .map(|a| a.path.as_str()),
            Some("b")
        );
    }
}
