//! The repository config (`.github/closer.yml`): the commented example from
//! the docs and small configs, edited line by line and character by
//! character, plus YAML-shaped text built from its keys and YAML's syntax.
//!
//! Properties: an error names at least one problem, each with a message, on
//! a line the file has; no error repeats a comment, and one that repeats a
//! value (the unknown word it names) points at that value's line.

use std::sync::LazyLock;

use closer::config::repo_parse::parse_repo_config;
use fastrand::Rng;

use crate::driver::Target;
use crate::input;

pub const TARGET: Target = Target {
    name: "repo_config",
    one,
};

/// Planted in a comment, which no error may repeat.
const COMMENT: &str = "QzComment7f3e";
/// Planted as a value, which an error may name only at its own line.
const VALUE: &str = "QzValue7f3e";

const PIECES: &[&str] = &[
    "trigger_label",
    "agent",
    "completion",
    "type",
    "max_iterations",
    "confidence_threshold",
    "keyword",
    "handler",
    "dod",
    "task_types",
    "goals",
    "command",
    "pattern",
    "path",
    "url",
    "json_path",
    "expected",
    "contains",
    "status",
    "required",
    "timeout_secs",
    "close_on",
    "issue",
    "project",
    "iterate",
    "manual",
    "custom",
    "tests_pass",
    "no_secrets",
    "merged",
    ": ",
    ":",
    "\n",
    "\n  ",
    "  ",
    "- ",
    "{",
    "}",
    "[",
    "]",
    ", ",
    "~",
    "null",
    "true",
    "yes",
    "&a",
    "*a",
    "<<: *a",
    "!!str",
    "!!binary",
    "|",
    ">",
    "'",
    "\"",
    "#",
    "---",
    "...",
    "0x10",
    "1e9",
    "-1",
    ".inf",
    "%YAML 1.2",
    "? ",
];

const SMALL: &[&str] = &[
    "",
    "~",
    "agent: default\n",
    "completion:\n  type: custom\n",
    "dod:\n  - { type: response_contains, command: x, url: 'http://x', json_path: $.a }\n",
    "task_types:\n  bug:\n    goals:\n      - type: tests_pass\n        command: cargo test\n",
    "a: &x [*x]\n",
];

static EXAMPLE: LazyLock<String> = LazyLock::new(|| {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/closer.example.yml");
    std::fs::read_to_string(path).expect("docs/closer.example.yml")
});

fn one(rng: &mut Rng) {
    let text = match rng.u8(..8) {
        0 => input::text(rng, PIECES, 40),
        1 => String::from_utf8_lossy(&input::bytes(rng, 100)).into_owned(),
        2 | 3 => {
            let sample = input::pick(rng, SMALL);
            input::mutate_text(rng, sample, PIECES)
        }
        _ => input::mutate_text(rng, &EXAMPLE, PIECES),
    };
    let (text, planted) = plant(rng, &text);
    let Err(errors) = parse_repo_config(&text, ".github/closer.yml", &["default", "fast"]) else {
        return;
    };
    assert!(!errors.errors.is_empty(), "{text:?}");
    let lines = yaml_lines(&text).count() as u64 + 1;
    for e in &errors.errors {
        assert!(!e.message.trim().is_empty(), "{text:?}");
        assert!(
            e.line.is_none_or(|l| l <= lines),
            "{text:?}: line {:?} of {lines}",
            e.line
        );
        assert!(
            !e.message.contains(COMMENT),
            "a comment was echoed: {}",
            e.message
        );
        if e.message.contains(VALUE) {
            assert!(
                planted.contains(&e.line),
                "a value was echoed away from its line: {errors}\n--- from\n{text}"
            );
        }
    }
}

/// `text` with a comment canary added and one value (after `: `) replaced
/// by the value canary; the 1-based lines the value canary is on.
fn plant(rng: &mut Rng, text: &str) -> (String, Vec<Option<u64>>) {
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let at = rng.usize(..=lines.len());
    lines.insert(at, format!("# {COMMENT} {}", input::text(rng, PIECES, 3)));
    let spots: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].contains(": ") && !lines[i].trim_start().starts_with('#'))
        .collect();
    if !spots.is_empty() && rng.bool() {
        let i = spots[rng.usize(..spots.len())];
        let key_end = lines[i].find(": ").expect("a spot has a key");
        lines[i] = format!("{}: {VALUE}{}", &lines[i][..key_end], rng.u32(..));
    }
    let text = lines.join("\n");
    let planted = yaml_lines(&text)
        .enumerate()
        .filter(|(_, l)| l.contains(VALUE))
        .map(|(i, _)| Some(i as u64 + 1))
        .collect();
    (text, planted)
}

/// The lines of `text` as YAML counts them: a lone carriage return breaks
/// a line too (`str::lines` only splits at `\n`).
fn yaml_lines(text: &str) -> impl Iterator<Item = &str> {
    text.split("\r\n").flat_map(|part| part.split(['\n', '\r']))
}
