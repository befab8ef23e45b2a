//! The issue's own task list: the `- [ ]` / `- [x]` lines of its body. They
//! are acceptance criteria the completion check's checklist must cover, one item each.
//! Only tasks a reader sees count: lines inside fenced code blocks are
//! examples and lines inside HTML comments (`<!-- … -->`, common in issue
//! templates) are hidden, so both are skipped. Fences are read as
//! `comment::markdown` reads them (a fence closes only with the same
//! character, at least as many times, and nothing but spaces and tabs after
//! it), at any indentation so a fence inside a list item counts too.

use serde::{Deserialize, Serialize};

use crate::comment::markdown::{Fence, fence_of};

/// One task-list line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskListItem {
    /// The text after the box.
    pub text: String,
    /// Whether the box is ticked in the issue.
    pub checked: bool,
}

/// The task-list lines of a markdown body, in order.
pub fn parse_task_list(body: &str) -> Vec<TaskListItem> {
    let mut hidden = Hidden::default();
    body.lines()
        .filter_map(|line| hidden.visible(line.trim_start()))
        .filter_map(|line| task(&line))
        .collect()
}

/// Where a line is hidden from the reader: in an open code fence or an
/// open HTML comment.
#[derive(Default)]
struct Hidden {
    fence: Option<Fence>,
    in_comment: bool,
}

impl Hidden {
    /// The visible text of one line, given without its indentation: `None`
    /// inside a fence or a comment, on a fence line, and on a line that
    /// opens an HTML block with `<!--`; comments within a line removed.
    fn visible(&mut self, t: &str) -> Option<String> {
        if let Some(fence) = self.fence {
            if fence.is_closed_by(t) {
                self.fence = None;
            }
            return None;
        }
        if self.in_comment {
            // The line that ends an HTML block belongs to it, all of it.
            self.in_comment = !t.contains("-->");
            return None;
        }
        if let Some((fence, _)) = fence_of(t) {
            self.fence = Some(fence);
            return None;
        }
        if let Some(rest) = t.strip_prefix("<!--") {
            self.in_comment = !rest.contains("-->");
            return None;
        }
        Some(without_comments(t))
    }
}

/// `line` without the `<!-- … -->` comments closed on it. A `<!--` that is
/// not closed on its line and does not start it opens no comment: the next
/// line (a task, say) starts a new block, so GitHub shows the `<!--` as text.
fn without_comments(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find("<!--") {
        let Some(len) = rest[start + 4..].find("-->") else {
            break;
        };
        out.push_str(&rest[..start]);
        rest = &rest[start + 4 + len + 3..];
    }
    out.push_str(rest);
    out
}

/// The task on one visible line, if it is a task-list item with text.
fn task(t: &str) -> Option<TaskListItem> {
    let rest = if let Some(r) = t.strip_prefix(['-', '*', '+']) {
        r
    } else {
        let digits = t.chars().take_while(char::is_ascii_digit).count();
        match t[digits..].strip_prefix(['.', ')']) {
            Some(r) if digits > 0 => r,
            _ => return None,
        }
    };
    let rest = rest.strip_prefix(' ')?.trim_start();
    let (checked, text) = rest.strip_prefix("[ ]").map(|r| (false, r)).or_else(|| {
        rest.strip_prefix("[x]")
            .or_else(|| rest.strip_prefix("[X]"))
            .map(|r| (true, r))
    })?;
    let text = text.trim();
    (!text.is_empty()).then(|| TaskListItem {
        text: text.to_owned(),
        checked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(body: &str) -> Vec<(String, bool)> {
        parse_task_list(body)
            .into_iter()
            .map(|i| (i.text, i.checked))
            .collect()
    }

    fn open(items: &[&str]) -> Vec<(String, bool)> {
        items.iter().map(|t| ((*t).to_owned(), false)).collect()
    }

    #[test]
    fn task_lines_are_found_outside_code() {
        let body = "Intro\n- [ ] add tests\n  * [x] write docs\n1. [X] numbered\n- [] not a box\n- [ ]\n```\n- [ ] in code\n```\n+ [ ]   spaced  ";
        let items = parse_task_list(body);
        let texts: Vec<_> = items.iter().map(|i| (i.text.as_str(), i.checked)).collect();
        assert_eq!(
            texts,
            vec![
                ("add tests", false),
                ("write docs", true),
                ("numbered", true),
                ("spaced", false)
            ]
        );
    }

    /// A line that starts with three backticks but has one in its info
    /// string is inline code, not a fence. Before, it toggled "in a fence"
    /// and the tasks after it were dropped.
    #[test]
    fn an_inline_code_line_opens_no_fence() {
        let body = "```x``` is inline\n- [ ] a real task\n- [ ] another";
        assert_eq!(texts(body), open(&["a real task", "another"]));
    }

    /// A shorter fence inside a longer one is code, and does not close it;
    /// a closing fence of another character does not either.
    #[test]
    fn a_nested_fence_is_code() {
        let body = "````md\n```\n- [ ] example\n```\n- [ ] still example\n````\n- [ ] real\n~~~\n```\n- [ ] tilde example\n~~~~\n- [ ] also real";
        assert_eq!(texts(body), open(&["real", "also real"]));
        // A fence inside a list item, indented, still hides its lines.
        assert_eq!(
            texts("- [ ] a\n    ```\n    - [ ] x\n    ```"),
            open(&["a"])
        );
    }

    /// Tasks in an HTML comment are invisible on GitHub: not criteria.
    #[test]
    fn a_commented_out_task_is_no_criterion() {
        let body = "<!-- - [ ] hidden on one line -->\n- [ ] shown <!-- with a note -->\n- [ ] <!-- fill me in -->";
        assert_eq!(texts(body), open(&["shown"]));
    }

    #[test]
    fn a_task_in_a_multi_line_comment_is_no_criterion() {
        let body = "<!--\nTemplate:\n- [ ] hidden\n```\n-->\n- [ ] shown\n  <!-- note\n  - [ ] hidden too\n  --> - [ ] still in the comment's block\n- [x] done";
        assert_eq!(
            texts(body),
            vec![("shown".to_owned(), false), ("done".to_owned(), true)]
        );
        // The control: a `<!--` closed nowhere after the line start hides
        // nothing but itself.
        assert_eq!(texts("text <!-- open\n- [ ] shown"), open(&["shown"]));
    }
}
