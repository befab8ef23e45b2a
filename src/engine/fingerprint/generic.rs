//! The fallback for output no runner parser understands: the last lines that
//! look like errors (else the last lines at all), normalised, as one failure.

use super::RawFailure;

const KEYWORDS: &[&str] = &[
    "error",
    "fail",
    "panic",
    "exception",
    "fatal",
    "traceback",
    "denied",
    "not found",
];

pub(crate) fn parse(text: &str) -> Vec<RawFailure> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let errorish: Vec<&str> = lines
        .iter()
        .copied()
        .filter(|l| {
            let lower = l.to_lowercase();
            KEYWORDS.iter().any(|k| lower.contains(k))
        })
        .collect();
    let pick = if errorish.is_empty() {
        &lines
    } else {
        &errorish
    };
    let tail: Vec<&str> = pick.iter().rev().take(3).rev().copied().collect();
    let error = if tail.is_empty() {
        "failed without output".to_owned()
    } else {
        tail.join(" | ")
    };
    vec![RawFailure {
        test: None,
        location: None,
        error,
    }]
}
