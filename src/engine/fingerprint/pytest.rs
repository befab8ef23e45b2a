//! pytest output (`____ name ____` sections with `E   ` lines and
//! `file.py:line: Error`, node ids from the short summary) and the standard
//! library's unittest output (`FAIL: test (module.Class.test)` + traceback).

use std::sync::LazyLock;

use regex::Regex;

use super::RawFailure;
use super::normalize::re;

static SECTION: LazyLock<Regex> = LazyLock::new(|| re(r"^_{3,} (.+?) _{3,}$"));
static RULE: LazyLock<Regex> = LazyLock::new(|| re(r"^={5,}"));
static LOCATION: LazyLock<Regex> = LazyLock::new(|| re(r"^([\w./\\-]+\.py):(\d+): \w+"));
static SUMMARY: LazyLock<Regex> = LazyLock::new(|| re(r"^(?:FAILED|ERROR) (\S+?)(?: - .*)?$"));
static UNITTEST: LazyLock<Regex> = LazyLock::new(|| re(r"^(FAIL|ERROR): (\S+) \((\S+)\)"));
static FILE_LINE: LazyLock<Regex> = LazyLock::new(|| re(r#"^\s*File "([^"]+)", line (\d+)"#));
static DASHES: LazyLock<Regex> = LazyLock::new(|| re(r"^(-{20,}|={20,})$"));

pub(crate) fn is_pytest(text: &str) -> bool {
    text.contains("= FAILURES =")
        || text.contains("short test summary info")
        || text.contains("= ERRORS =")
}

pub(crate) fn is_unittest(text: &str) -> bool {
    text.lines().any(|l| UNITTEST.is_match(l))
}

pub(crate) fn parse(text: &str) -> Vec<RawFailure> {
    let lines: Vec<&str> = text.lines().collect();
    let node_ids: Vec<String> = lines
        .iter()
        .filter_map(|l| SUMMARY.captures(l).map(|c| c[1].to_owned()))
        .collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = SECTION.captures(line) else {
            continue;
        };
        let header = c[1].to_owned();
        let body: Vec<&str> = lines
            .iter()
            .skip(i + 1)
            .take_while(|l| !SECTION.is_match(l) && !RULE.is_match(l))
            .copied()
            .collect();
        let error = body
            .iter()
            .filter_map(|l| l.strip_prefix('E'))
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .take(3)
            .collect::<Vec<_>>()
            .join(" ");
        let location = body
            .iter()
            .rev()
            .find_map(|l| LOCATION.captures(l).map(|m| format!("{}:{}", &m[1], &m[2])));
        let dotted = header.replace("::", ".");
        let test = node_ids
            .iter()
            .find(|id| id.replace("::", ".").ends_with(&dotted))
            .cloned()
            .unwrap_or(header);
        out.push(RawFailure {
            test: Some(test),
            location,
            error: if error.is_empty() {
                "test failed".into()
            } else {
                error
            },
        });
    }
    if out.is_empty() {
        // Collection errors and `-q --no-header` runs only have the summary.
        out = node_ids
            .into_iter()
            .map(|id| RawFailure {
                test: Some(id),
                location: None,
                error: "test failed".into(),
            })
            .collect();
    }
    out
}

pub(crate) fn parse_unittest(text: &str) -> Vec<RawFailure> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = UNITTEST.captures(line) else {
            continue;
        };
        let (method, id) = (&c[2], &c[3]);
        let test = if id.ends_with(method) {
            id.to_owned()
        } else {
            format!("{id}.{method}")
        };
        let body: Vec<&str> = lines
            .iter()
            .skip(i + 2)
            .take_while(|l| !DASHES.is_match(l))
            .copied()
            .collect();
        let location = body.iter().rev().find_map(|l| {
            FILE_LINE
                .captures(l)
                .map(|m| format!("{}:{}", &m[1], &m[2]))
        });
        let error = body
            .iter()
            .rev()
            .map(|l| l.trim())
            .find(|l| !l.is_empty())
            .unwrap_or("test failed")
            .to_owned();
        out.push(RawFailure {
            test: Some(test),
            location,
            error,
        });
    }
    out
}
