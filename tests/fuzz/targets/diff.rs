//! The diff parser, over diff-shaped text: file headers, hunk headers with
//! edge-case ranges, added, removed and context lines, binary patches and
//! "no newline" markers, assembled at random and edited; plus raw bytes.
//!
//! Properties: every added line the parser reports is a `+` line of the
//! input, in a file an input's `+++ b/` header names.

use closer::engine::diff::parse_added;
use fastrand::Rng;

use crate::driver::Target;
use crate::input;

pub const TARGET: Target = Target { name: "diff", one };

const PIECES: &[&str] = &[
    "+",
    "-",
    " ",
    "@@",
    "+++",
    "---",
    "b/",
    "a/",
    "\n",
    "diff --git",
    "x",
    "1",
    ",",
    "0",
];

fn one(rng: &mut Rng) {
    let text = match rng.u8(..8) {
        0 => String::from_utf8_lossy(&input::bytes(rng, 200)).into_owned(),
        1 => input::text(rng, PIECES, 60),
        _ => {
            let diff = diff(rng);
            if rng.bool() {
                input::mutate_text(rng, &diff, PIECES)
            } else {
                diff
            }
        }
    };
    let added = parse_added(&text, usize::MAX).expect("no limit");
    let plus_lines: std::collections::HashSet<&str> =
        text.lines().filter_map(|l| l.strip_prefix('+')).collect();
    for line in &added {
        assert!(
            plus_lines.contains(line.text.as_str()),
            "{line:?} is not in {text:?}"
        );
        assert!(
            text.contains(&format!("+++ b/{}", line.path)),
            "{line:?}: {text:?}"
        );
    }
}

/// A unified diff of a few files and hunks.
fn diff(rng: &mut Rng) -> String {
    let mut out = String::new();
    for _ in 0..rng.usize(1..=3) {
        let path = input::pick(rng, &["src/lib.rs", "a b.txt", "é/ü.md", "x", "", ".env"]);
        out.push_str(&format!("diff --git a/{path} b/{path}\n"));
        if rng.u8(..8) == 0 {
            out.push_str("GIT binary patch\nliteral 12\nzcmZ?wbhEHb\n\n");
            continue;
        }
        out.push_str(&format!("--- a/{path}\n+++ b/{path}\n"));
        for _ in 0..rng.usize(1..=3) {
            hunk(rng, &mut out);
        }
    }
    out
}

fn hunk(rng: &mut Rng, out: &mut String) {
    let start = match rng.u8(..4) {
        0 => input::pick(rng, input::EDGE_NUMBERS).to_owned(),
        _ => rng.u32(0..500).to_string(),
    };
    let len = rng.u32(0..6);
    out.push_str(&format!(
        "@@ -{start},{len} +{start},{len} @@ fn context()\n"
    ));
    for _ in 0..rng.usize(0..8) {
        let body = input::text(rng, &["let x = 1;", "ghp_", "+", "-", "@@ ", "+++ b/y"], 3);
        let mark = input::pick(rng, &["+", "-", " ", "\\ No newline at end of file", ""]);
        out.push_str(&format!("{mark}{body}\n"));
    }
}
