//! `go test` output: `--- FAIL: TestName (0.00s)` followed by indented
//! `file_test.go:104: message` lines, and panics with their first stack frame
//! in the module.

use std::sync::LazyLock;

use regex::Regex;

use super::RawFailure;
use super::normalize::re;

static FAIL: LazyLock<Regex> = LazyLock::new(|| re(r"^(\s*)--- FAIL: (\S+) \("));
static MESSAGE: LazyLock<Regex> = LazyLock::new(|| re(r"^\s+([\w./-]+\.go):(\d+): (.*)$"));
static FRAME: LazyLock<Regex> = LazyLock::new(|| re(r"^\s+(\S+\.go):(\d+)"));

pub(crate) fn detect(text: &str) -> bool {
    text.lines().any(|l| FAIL.is_match(l))
}

pub(crate) fn parse(text: &str) -> Vec<RawFailure> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(c) = FAIL.captures(line) else {
            continue;
        };
        let name = c[2].to_owned();
        let mut location = None;
        let mut error = None;
        let mut has_subtest = false;
        for next in lines.iter().skip(i + 1) {
            if FAIL.is_match(next) {
                has_subtest = next.len() - next.trim_start().len() > c[1].len();
                break;
            }
            if let Some(m) = MESSAGE.captures(next) {
                location = Some(format!("{}:{}", &m[1], &m[2]));
                error = Some(m[3].to_owned());
                break;
            }
            if let Some(panic) = next.strip_prefix("panic: ") {
                error = Some(format!("panic: {}", panic.trim_end_matches(" [recovered]")));
                location = lines
                    .iter()
                    .skip(i + 1)
                    .filter(|l| !l.contains("/go/src/") && !l.contains("/libexec/src/"))
                    .find_map(|l| FRAME.captures(l).map(|f| format!("{}:{}", &f[1], &f[2])));
                break;
            }
            if next.starts_with("FAIL") || next.starts_with("ok ") {
                break;
            }
        }
        // A parent whose only failure is a failing subtest is named by the subtest.
        if has_subtest && error.is_none() {
            continue;
        }
        out.push(RawFailure {
            test: Some(name),
            location,
            error: error.unwrap_or_else(|| "test failed".into()),
        });
    }
    out
}
