//! `go test` output: `--- FAIL: TestName (0.00s)` followed by indented
//! `file_test.go:104: message` lines, and panics with their first stack frame
//! in the module.
//!
//! A package can fail without any `--- FAIL:` line: it does not build
//! (`FAIL\tpkg [build failed]`, vet's checks included), its `TestMain` or
//! an `init` panics, a test calls `os.Exit`, or the `-timeout` panic ends
//! the binary. Each such package result line is a failure of its own with
//! no test name (decision 251), so it is never taken for a tolerated
//! test's failure in another package.

use std::sync::LazyLock;

use regex::Regex;

use super::RawFailure;
use super::normalize::re;

static FAIL: LazyLock<Regex> = LazyLock::new(|| re(r"^(\s*)--- FAIL: (\S+) \("));
static MESSAGE: LazyLock<Regex> = LazyLock::new(|| re(r"^\s+([\w./-]+\.go):(\d+): (.*)$"));
static FRAME: LazyLock<Regex> = LazyLock::new(|| re(r"^\s+(\S+\.go):(\d+)"));
/// A package's result line, as `go test` writes it (a tab after the word,
/// which a test's own log line or another tool's `FAIL pkg.TestX` lacks):
/// `ok  \tpkg\t0.1s`, `FAIL\tpkg\t0.1s`, `FAIL\tpkg [build failed]`,
/// `?   \tpkg\t[no test files]`.
static RESULT: LazyLock<Regex> =
    LazyLock::new(|| re(r"^(ok|FAIL|\?) *\t(\S+)(?: \[([^\]]+)\])?(?:\t|$)"));
/// A compiler or vet error under a `# pkg` heading: `b/b.go:3:9:
/// undefined: foo`.
static BUILD_ERROR: LazyLock<Regex> = LazyLock::new(|| re(r"^(\S+\.go):(\d+)(?::\d+)?: (.*)$"));

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
    out.extend(unnamed_package_failures(&lines));
    out
}

/// The packages that failed without naming a failing test (see the module
/// notes): one failure each, with the compiler's first error (printed
/// under `# pkg` when the build failed, wherever in the output) or the
/// panic that ended the binary (printed in the package's own block).
fn unnamed_package_failures(lines: &[&str]) -> Vec<RawFailure> {
    let build_errors = build_errors(lines);
    let mut out = Vec::new();
    let (mut named, mut panic) = (false, None);
    for line in lines {
        if FAIL.is_match(line) {
            named = true;
        } else if let Some(c) = RESULT.captures(line) {
            // The `-timeout` panic names no failing test even beside
            // failures that do: it stands for itself.
            let timed_out = panic
                .as_deref()
                .is_some_and(|p: &str| p.starts_with("panic: test timed out"));
            if &c[1] == "FAIL" && (!named || timed_out) {
                let package = &c[2];
                let why = c.get(3).map_or("failed", |m| m.as_str());
                let (location, detail) = match build_errors.get(package) {
                    Some((location, error)) => (Some(location.clone()), Some(error.clone())),
                    None => (None, panic.take()),
                };
                let error = match detail {
                    Some(detail) => format!("package {package} {why}: {detail}"),
                    None => format!("package {package} {why} without naming a failing test"),
                };
                out.push(RawFailure {
                    test: None,
                    location,
                    error,
                });
            }
            (named, panic) = (false, None);
        } else if let Some(p) = line.strip_prefix("panic: ").filter(|_| panic.is_none()) {
            panic = Some(format!("panic: {}", p.trim_end_matches(" [recovered]")));
        }
    }
    out
}

/// The first compiler or vet error under each `# pkg` heading, by package.
fn build_errors(lines: &[&str]) -> std::collections::HashMap<String, (String, String)> {
    let mut found = std::collections::HashMap::new();
    let mut package: Option<&str> = None;
    for line in lines {
        if let Some(heading) = line.strip_prefix("# ") {
            package = heading.split_whitespace().next();
        } else if let (Some(p), Some(m)) = (package, BUILD_ERROR.captures(line)) {
            found
                .entry(p.to_owned())
                .or_insert_with(|| (format!("{}:{}", &m[1], &m[2]), m[3].to_owned()));
            package = None;
        }
    }
    found
}
