//! Which text of a comment a reader sees as prose, line by line. A command is
//! only a command when its author wrote it to the bot, so text the markdown
//! renders as code (fenced, indented or inline), quotes someone else's words
//! (`>` block quotes, lazy continuation lines included) or hides (`<!-- -->`)
//! is dropped here.
//!
//! A small line scanner, not a full CommonMark parser: it must run in linear
//! time on any input and never panic. Where it is unsure it hides text: a
//! command that does not run is a smaller harm than one that runs unasked.
//! Known simplifications, all on the hiding side: an HTML comment or a code
//! span left open hides the rest of its line (and an open code span the rest
//! of its paragraph; an open comment the rest of the body), and a line right
//! after a block quote always continues the quote.

/// What stands in for a code span in a visible line: not whitespace, so
/// text after inline code never starts a line.
const CODE_SPAN: char = '\u{FFFC}';

/// The visible text of every prose line of `body`, in order. Lines that are
/// code, quoted or hidden are left out; code spans inside a line are replaced
/// by one placeholder character and HTML comments are removed.
pub(super) fn prose_lines(body: &str) -> Vec<String> {
    let mut scanner = Scanner::default();
    body.split('\n')
        .filter_map(|line| scanner.line(line.strip_suffix('\r').unwrap_or(line)))
        .collect()
}

/// An open fenced code block.
#[derive(Debug, Clone, Copy)]
struct Fence {
    /// `` ` `` or `~`.
    marker: u8,
    /// How many markers opened it; the closing run must be at least as long.
    len: usize,
    /// The deepest indentation (in columns) the closing fence may have.
    max_indent: usize,
}

/// Block-level state carried from one line to the next.
#[derive(Debug, Default)]
struct Scanner {
    fence: Option<Fence>,
    in_comment: bool,
    /// The length of the backtick run that opened a code span still open.
    open_span: Option<usize>,
    in_paragraph: bool,
    in_quote: bool,
    /// The content column of the list item the text is in, if any.
    list_indent: Option<usize>,
}

impl Scanner {
    /// The visible text of one line (without its line ending), if it is prose.
    fn line(&mut self, line: &str) -> Option<String> {
        if let Some(fence) = self.fence {
            if closes_fence(fence, line) {
                self.fence = None;
            }
            return None;
        }
        if self.in_comment {
            return Some(self.inline(line));
        }
        if line.trim().is_empty() {
            self.end_block();
            return None;
        }
        let (indent, rest) = split_indent(line);
        if !self.in_paragraph && !self.in_quote && indent >= self.base() + 4 {
            return None; // an indented code block
        }
        if indent < self.base() && starts_block(rest) {
            // A quote, fence or heading left of the item's content is not
            // in the item: the list has ended.
            self.list_indent = None;
        }
        let base = self.base();
        if rest.starts_with('>') {
            self.end_block();
            self.in_quote = true;
            return None;
        }
        if let Some(fence) = opens_fence(rest, base) {
            self.end_block();
            self.fence = Some(fence);
            return None;
        }
        if self.in_quote {
            return None; // a lazy continuation of the quote
        }
        if is_heading(rest) {
            // A heading is one line; what follows it starts a new block.
            let visible = self.inline(line);
            self.end_block();
            return Some(visible);
        }
        if let Some(content) = list_item_content(rest) {
            self.list_indent = Some(indent + content);
        } else if !self.in_paragraph && indent < base {
            self.list_indent = None;
        }
        self.in_paragraph = true;
        Some(self.inline(line))
    }

    /// The content column of the list item the text is in (0 outside lists).
    fn base(&self) -> usize {
        self.list_indent.unwrap_or(0)
    }

    /// A blank line or a new block ends the paragraph, its code spans and quotes.
    fn end_block(&mut self) {
        self.in_paragraph = false;
        self.in_quote = false;
        self.open_span = None;
    }

    /// The line with code spans replaced by [`CODE_SPAN`] and comments removed.
    fn inline(&mut self, line: &str) -> String {
        let bytes = line.as_bytes();
        let mut visible = String::new();
        let mut i = 0;
        let mut shown_from = 0;
        loop {
            if self.in_comment {
                match find(bytes, i, b"-->") {
                    Some(start) => {
                        self.in_comment = false;
                        i = start + 3;
                        shown_from = i;
                    }
                    None => return visible,
                }
            }
            if let Some(len) = self.open_span {
                match find_backtick_run(bytes, i, len) {
                    Some(end) => {
                        self.open_span = None;
                        visible.push(CODE_SPAN);
                        i = end;
                        shown_from = i;
                    }
                    None => return visible,
                }
            }
            let Some(&byte) = bytes.get(i) else { break };
            match byte {
                b'`' => {
                    visible.push_str(line.get(shown_from..i).unwrap_or(""));
                    let len = backtick_run(bytes, i);
                    self.open_span = Some(len);
                    i += len;
                }
                b'<' if bytes[i..].starts_with(b"<!--") => {
                    visible.push_str(line.get(shown_from..i).unwrap_or(""));
                    self.in_comment = true;
                    i += 4;
                }
                b'\\' if bytes.get(i + 1).is_some_and(u8::is_ascii_punctuation) => i += 2,
                _ => i += 1,
            }
        }
        visible.push_str(line.get(shown_from..).unwrap_or(""));
        visible
    }
}

/// The indentation of `line` in columns (tabs stop every four) and the rest.
fn split_indent(line: &str) -> (usize, &str) {
    let mut columns = 0;
    for (at, byte) in line.bytes().enumerate() {
        match byte {
            b' ' => columns += 1,
            b'\t' => columns = (columns / 4 + 1) * 4,
            _ => return (columns, &line[at..]),
        }
    }
    (columns, "")
}

/// The fence `rest` opens (```` ``` ```` or `~~~`, three or more, with an
/// optional info string), given the container's content column `base`.
fn opens_fence(rest: &str, base: usize) -> Option<Fence> {
    let marker = *rest.as_bytes().first()?;
    if marker != b'`' && marker != b'~' {
        return None;
    }
    let len = rest.bytes().take_while(|&b| b == marker).count();
    if len < 3 || (marker == b'`' && rest[len..].contains('`')) {
        return None;
    }
    Some(Fence {
        marker,
        len,
        max_indent: base + 3,
    })
}

/// Whether `line` closes `fence`: as many markers or more, then nothing but
/// spaces and tabs (after a no-break space or a form feed it is code).
fn closes_fence(fence: Fence, line: &str) -> bool {
    let (indent, rest) = split_indent(line);
    let len = rest.bytes().take_while(|&b| b == fence.marker).count();
    let nothing_after = rest[len..].bytes().all(|b| b == b' ' || b == b'\t');
    indent <= fence.max_indent && len >= fence.len && nothing_after
}

/// Whether `rest` starts a block that ends a paragraph and, left of a list
/// item's content, the list: a quote, a fence or a heading.
fn starts_block(rest: &str) -> bool {
    rest.starts_with('>') || opens_fence(rest, 0).is_some() || is_heading(rest)
}

/// Whether `rest` is an ATX heading (`#` to `######`, then a space or nothing).
fn is_heading(rest: &str) -> bool {
    let hashes = rest.bytes().take_while(|&b| b == b'#').count();
    (1..=6).contains(&hashes) && matches!(rest.as_bytes().get(hashes), None | Some(b' ' | b'\t'))
}

/// Where the content of a list item starts, relative to its marker, when
/// `rest` starts with one (`- `, `* `, `+ `, `1. `, `1) `).
fn list_item_content(rest: &str) -> Option<usize> {
    let bytes = rest.as_bytes();
    let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    let marker_len = match bytes.first()? {
        b'-' | b'*' | b'+' => 1,
        _ if (1..=9).contains(&digits) && matches!(bytes.get(digits), Some(b'.' | b')')) => {
            digits + 1
        }
        _ => return None,
    };
    let spaces = bytes[marker_len..]
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count();
    match spaces {
        0 if marker_len == bytes.len() => Some(marker_len + 1),
        0 => None,
        1..=4 => Some(marker_len + spaces),
        _ => Some(marker_len + 1),
    }
}

/// The length of the backtick run starting at `at`.
fn backtick_run(bytes: &[u8], at: usize) -> usize {
    bytes[at..].iter().take_while(|&&b| b == b'`').count()
}

/// The end of the first run of exactly `len` backticks at or after `from`.
fn find_backtick_run(bytes: &[u8], from: usize, len: usize) -> Option<usize> {
    let mut i = from;
    while i < bytes.len() {
        if bytes[i] == b'`' {
            let run = backtick_run(bytes, i);
            if run == len {
                return Some(i + run);
            }
            i += run;
        } else {
            i += 1;
        }
    }
    None
}

/// The start of the first `needle` at or after `from`.
fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|window| window == needle)
        .map(|at| from + at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prose(body: &str) -> Vec<String> {
        prose_lines(body)
    }

    #[test]
    fn plain_lines_pass_through() {
        assert_eq!(prose("a\nb\r\nc"), ["a", "b", "c"]);
    }

    #[test]
    fn code_spans_become_one_placeholder() {
        assert_eq!(prose("x `code` y"), ["x \u{FFFC} y"]);
        assert_eq!(prose("``a ` b`` c"), ["\u{FFFC} c"]);
        assert_eq!(prose(r"\`not code\` z"), [r"\`not code\` z"]);
    }

    #[test]
    fn a_code_span_left_open_hides_the_rest_of_its_paragraph() {
        assert_eq!(
            prose("a `open\nb\nc` d\n\ne"),
            ["a ", "", "\u{FFFC} d", "e"]
        );
    }

    #[test]
    fn comments_are_removed_across_lines() {
        assert_eq!(prose("a <!-- b --> c"), ["a  c"]);
        assert_eq!(prose("<!--\nx\n\n```\n-->y"), ["", "", "", "", "y"]);
    }

    #[test]
    fn list_items_and_their_indented_lines_are_prose() {
        assert_eq!(prose("- a\n\n    b"), ["- a", "    b"]);
        assert_eq!(prose("- a\n\nb\n\n    c"), ["- a", "b"]);
        assert_eq!(prose("1. a\n\n        code"), ["1. a"]);
    }

    #[test]
    fn list_item_content_columns() {
        assert_eq!(list_item_content("- a"), Some(2));
        assert_eq!(list_item_content("-"), Some(2));
        assert_eq!(list_item_content("-a"), None);
        assert_eq!(list_item_content("12) a"), Some(4));
        assert_eq!(list_item_content("1234567890. a"), None);
        assert_eq!(list_item_content("-      a"), Some(2));
    }

    #[test]
    fn a_heading_ends_its_block() {
        assert_eq!(
            prose("# T\n    code\n#x\n    lazy"),
            ["# T", "#x", "    lazy"]
        );
        assert!(is_heading("###### six"));
        assert!(!is_heading("####### seven"));
    }

    #[test]
    fn tabs_indent_to_the_next_stop() {
        assert_eq!(split_indent("\tx"), (4, "x"));
        assert_eq!(split_indent("  \tx"), (4, "x"));
        assert_eq!(split_indent("   "), (3, ""));
    }
}
