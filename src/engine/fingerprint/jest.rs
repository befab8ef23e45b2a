//! jest output (`● Suite › test` blocks, `at … (file:line:col)` frames) and
//! vitest output (` FAIL  file > suite > test` then the error and
//! `❯ file:line:col`). Colours are stripped before parsing.

use std::sync::LazyLock;

use regex::Regex;

use super::RawFailure;
use super::normalize::re;

static JEST_HEADER: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*● (.+)$"));
static JEST_FRAME: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*at .*?\(?([^\s()]+):(\d+):\d+\)?$"));
static VITEST_FAIL: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*FAIL\s+(\S+) > (.+)$"));
static VITEST_LOC: LazyLock<Regex> = LazyLock::new(|| re(r"^\s*❯ ([^\s:]+):(\d+):\d+"));

pub(crate) fn is_jest(text: &str) -> bool {
    text.lines().any(|l| JEST_HEADER.is_match(l))
        && (text.contains("Tests:") || text.contains("Test Suites:"))
}

pub(crate) fn is_vitest(text: &str) -> bool {
    text.contains("Test Files") && text.lines().any(|l| VITEST_FAIL.is_match(l))
}

pub(crate) fn parse(text: &str) -> Vec<RawFailure> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = JEST_HEADER.captures(line) else {
            continue;
        };
        let test = c[1].trim().to_owned();
        let body: Vec<&str> = lines
            .iter()
            .skip(i + 1)
            .take_while(|l| !JEST_HEADER.is_match(l) && !l.starts_with("Test Suites:"))
            .copied()
            .collect();
        let error = body
            .iter()
            .map(|l| l.trim())
            .skip_while(|l| l.is_empty())
            .take_while(|l| !l.is_empty())
            .take(3)
            .collect::<Vec<_>>()
            .join(" ");
        let location = body
            .iter()
            .filter(|l| !l.contains("node_modules"))
            .find_map(|l| {
                JEST_FRAME
                    .captures(l)
                    .map(|m| format!("{}:{}", &m[1], &m[2]))
            });
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
    out
}

pub(crate) fn parse_vitest(text: &str) -> Vec<RawFailure> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = VITEST_FAIL.captures(line) else {
            continue;
        };
        let file = c[1].to_owned();
        let test = format!("{file} > {}", c[2].trim());
        let body: Vec<&str> = lines
            .iter()
            .skip(i + 1)
            .take_while(|l| !VITEST_FAIL.is_match(l) && !l.contains("Test Files"))
            .copied()
            .collect();
        let error = body
            .iter()
            .map(|l| l.trim())
            .find(|l| !l.is_empty())
            .unwrap_or("test failed")
            .to_owned();
        let location = body.iter().find_map(|l| {
            VITEST_LOC
                .captures(l)
                .map(|m| format!("{}:{}", &m[1], &m[2]))
        });
        out.push(RawFailure {
            test: Some(test),
            location,
            error,
        });
    }
    out
}
