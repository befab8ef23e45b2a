//! TAP (the Test Anything Protocol: `prove`, `node --test`, bats, many
//! shell harnesses): `not ok <n> - <name>` is a failure named `<name>`, with
//! the `#` diagnostic lines under it as its error.

use super::RawFailure;

/// Whether the output speaks TAP: a plan or a numbered result line.
pub(crate) fn detect(text: &str) -> bool {
    text.lines()
        .map(str::trim_start)
        .any(|l| l.starts_with("TAP version") || result_line(l).is_some() || is_plan(l))
}

pub(crate) fn parse(text: &str) -> Vec<RawFailure> {
    let mut failures: Vec<RawFailure> = Vec::new();
    let mut in_failure = false;
    for line in text.lines().map(str::trim_start) {
        match result_line(line) {
            Some((false, name)) => {
                failures.push(RawFailure {
                    test: Some(name),
                    location: None,
                    error: String::new(),
                });
                in_failure = true;
            }
            Some((true, _)) => in_failure = false,
            None => {
                if in_failure
                    && let (Some(last), Some(note)) = (failures.last_mut(), line.strip_prefix('#'))
                    && last.error.len() < 400
                {
                    if !last.error.is_empty() {
                        last.error.push_str(" | ");
                    }
                    last.error.push_str(note.trim());
                }
            }
        }
    }
    for f in &mut failures {
        if f.error.is_empty() {
            f.error = "not ok".to_owned();
        }
    }
    failures
}

/// `ok 3 - name` → `(true, "name")`; `not ok 4 name # TODO` → `(false, "name")`.
fn result_line(line: &str) -> Option<(bool, String)> {
    let (ok, rest) = match line.strip_prefix("not ok") {
        Some(rest) => (false, rest),
        None => (true, line.strip_prefix("ok")?),
    };
    let rest = rest.trim_start();
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let name = rest[digits..].trim_start().trim_start_matches('-').trim();
    let name = name.split(" # ").next().unwrap_or(name).trim();
    Some((ok, name.to_owned()))
}

fn is_plan(line: &str) -> bool {
    line.split_once("..")
        .is_some_and(|(a, b)| a == "1" && !b.is_empty() && b.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_ok_lines_are_named_failures_with_their_diagnostics() {
        let out = "TAP version 13\n1..3\nok 1 - tests/existing.sh\nnot ok 2 - tests/add.sh\n# expected 5, got -1\nnot ok 3 tests/legacy.sh # SKIP no\nok 4\n";
        assert!(detect(out));
        let f = parse(out);
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].test.as_deref(), Some("tests/add.sh"));
        assert_eq!(f[0].error, "expected 5, got -1");
        assert_eq!(f[1].test.as_deref(), Some("tests/legacy.sh"));
        assert_eq!(f[1].error, "not ok");
        assert!(!detect("error: okay then\n"));
    }
}
