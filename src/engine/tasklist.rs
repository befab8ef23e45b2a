//! The issue's own task list: the `- [ ]` / `- [x]` lines of its body. They
//! are acceptance criteria the completion check's checklist must cover, one item each.
//! Lines inside fenced code blocks are examples, not tasks, and are skipped.

use serde::{Deserialize, Serialize};

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
    let mut items = Vec::new();
    let mut in_fence = false;
    for line in body.lines() {
        let t = line.trim_start();
        if t.starts_with("```") || t.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let rest = if let Some(r) = t.strip_prefix(['-', '*', '+']) {
            r
        } else {
            let digits = t.chars().take_while(char::is_ascii_digit).count();
            match t[digits..].strip_prefix(['.', ')']) {
                Some(r) if digits > 0 => r,
                _ => continue,
            }
        };
        let Some(rest) = rest.strip_prefix(' ') else {
            continue;
        };
        let rest = rest.trim_start();
        let checked = rest.strip_prefix("[ ]").map(|r| (false, r)).or_else(|| {
            rest.strip_prefix("[x]")
                .or_else(|| rest.strip_prefix("[X]"))
                .map(|r| (true, r))
        });
        if let Some((checked, text)) = checked {
            let text = text.trim();
            if !text.is_empty() {
                items.push(TaskListItem {
                    text: text.to_owned(),
                    checked,
                });
            }
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
