//! Noise removal for failure text, so the same failure seen in two runs reads
//! the same: colours, timestamps, durations, temp paths, addresses, hex ids,
//! epoch-sized numbers, thread ids and line numbers inside messages.
//!
//! It must never remove what tells two failures apart: assertion values,
//! test names and file names stay.

use std::sync::LazyLock;

use regex::Regex;

/// Compiles one of closer's built-in patterns (constants of the source: a
/// typo fails every test at once, so this cannot fail on external input).
pub(crate) fn re(pattern: &str) -> Regex {
    Regex::new(pattern).unwrap_or_else(|e| panic!("bad built-in pattern {pattern}: {e}"))
}

static ANSI: LazyLock<Regex> = LazyLock::new(|| re(r"\x1b\[[0-9;?]*[A-Za-z]"));
static ISO_TIME: LazyLock<Regex> = LazyLock::new(|| {
    re(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
});
static CLOCK: LazyLock<Regex> = LazyLock::new(|| re(r"\b\d{1,2}:\d{2}:\d{2}(?:\.\d+)?\b"));
static UUID: LazyLock<Regex> = LazyLock::new(|| {
    re(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")
});
static TEMP_PATH: LazyLock<Regex> = LazyLock::new(|| {
    re(r#"(?:/private)?(?:/tmp|/var/tmp|/var/folders|/dev/shm)(?:/[^\s:'"`),\]]*)?"#)
});
static ADDRESS: LazyLock<Regex> = LazyLock::new(|| re(r"\b0x[0-9a-fA-F]+\b"));
static HEX_ID: LazyLock<Regex> = LazyLock::new(|| re(r"\b[0-9a-fA-F]{8,}\b"));
static DURATION: LazyLock<Regex> =
    LazyLock::new(|| re(r"\b\d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s|sec|secs|seconds|m|min)\b"));
static BIG_NUMBER: LazyLock<Regex> = LazyLock::new(|| re(r"\b\d{10,}(?:\.\d+)?\b"));
static THREAD_ID: LazyLock<Regex> = LazyLock::new(|| re(r"(thread '[^']*') \(\d+\)"));
static PID: LazyLock<Regex> = LazyLock::new(|| re(r"(?i)\b(pid|process)([ =:#]+)\d+"));
static LINE_COL: LazyLock<Regex> = LazyLock::new(|| re(r"(\.[A-Za-z]{1,5}):\d+(?::\d+)?"));
static SPACES: LazyLock<Regex> = LazyLock::new(|| re(r"\s+"));

/// Removes terminal colour codes.
pub fn strip_ansi(text: &str) -> String {
    ANSI.replace_all(text, "").into_owned()
}

/// Replaces `root` (the worktree) by `.` so absolute paths compare across runs.
pub fn relative_to(text: &str, root: Option<&str>) -> String {
    match root {
        Some(root) if !root.is_empty() && root != "/" => {
            text.replace(&format!("{root}/"), "").replace(root, ".")
        }
        _ => text.to_owned(),
    }
}

/// The noise-free form of an error message (one line, single spaces).
pub fn message(text: &str) -> String {
    let text = strip_ansi(text);
    let text = ISO_TIME.replace_all(&text, "<TIME>");
    let text = CLOCK.replace_all(&text, "<TIME>");
    let text = UUID.replace_all(&text, "<ID>");
    let text = TEMP_PATH.replace_all(&text, "<TMP>");
    let text = ADDRESS.replace_all(&text, "<ADDR>");
    let text = HEX_ID.replace_all(&text, |c: &regex::Captures<'_>| {
        let s = &c[0];
        let has_digit = s.bytes().any(|b| b.is_ascii_digit());
        let has_letter = s.bytes().any(|b| b.is_ascii_alphabetic());
        if has_digit && has_letter {
            "<HEX>".to_owned()
        } else {
            s.to_owned()
        }
    });
    let text = DURATION.replace_all(&text, "<DUR>");
    let text = BIG_NUMBER.replace_all(&text, "<N>");
    let text = THREAD_ID.replace_all(&text, "$1");
    let text = PID.replace_all(&text, "$1$2<N>");
    let text = LINE_COL.replace_all(&text, "$1:<L>");
    SPACES.replace_all(text.trim(), " ").into_owned()
}

/// A path as a stable key: temp prefixes and `./` removed.
pub fn path(path: &str) -> String {
    let p = TEMP_PATH.replace_all(path, "<TMP>");
    p.trim_start_matches("./").to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_noise_and_keeps_values() {
        let a = message(
            "\x1b[31mthread 'a' (21187) panicked: left: 4 right: 5 at /tmp/cfg-21185 in 0.15s \
             at 2026-02-14T21:45:10.123Z ptr 0x7ffd5e8a id 7f56b7e89f90 t=1795311266092 pid 4242 src/lib.rs:12:9",
        );
        assert_eq!(
            a,
            "thread 'a' panicked: left: 4 right: 5 at <TMP> in <DUR> at <TIME> ptr <ADDR> id <HEX> \
             t=<N> pid <N> src/lib.rs:<L>"
        );
    }

    #[test]
    fn plain_words_and_small_numbers_stay() {
        assert_eq!(
            message("expected 200   got 404 for deadbeef"),
            "expected 200 got 404 for deadbeef"
        );
    }
}
