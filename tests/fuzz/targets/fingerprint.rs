//! Every fingerprint parser (cargo, nextest, go, pytest, unittest, jest,
//! vitest, mocha, RSpec, TAP and the generic fallback): real runner outputs from the
//! fixtures edited, spliced into one another and coloured, TAP-shaped text,
//! and raw bytes; through `parse_failures` (each parser is tried in turn, so
//! every one of them sees every input that looks like its runner),
//! `passed_tests` and `started_tests`.
//!
//! Properties: a failed command always yields at least one failure, each
//! with a 16-hex-digit fingerprint; colour codes change nothing; the set
//! hash does not depend on order.

use std::sync::LazyLock;

use closer::engine::fingerprint::{parse_failures, passed_tests, set_hash, started_tests};
use fastrand::Rng;

use crate::driver::Target;
use crate::input;

pub const TARGET: Target = Target {
    name: "fingerprint",
    one,
};

const PIECES: &[&str] = &[
    "test ",
    " ... ",
    "FAILED",
    "ok",
    "ok ",
    "not ok ",
    "PASS",
    "FAIL",
    "--- FAIL: ",
    "=== RUN",
    "panicked at ",
    "src/lib.rs:10:5",
    ":",
    "::",
    "E   ",
    "> ",
    "●",
    "›",
    "✓",
    "×",
    "1..",
    "# ",
    "AssertionError",
    "error[E0308]",
    "-->",
    "thread '",
    "' panicked",
    "failures:",
    "\n",
    "    ",
    "Traceback (most recent call last):",
    "File \"",
    "\", line ",
    "FAIL:",
    "ERROR:",
    "Tests:",
    "/tmp/fp/",
    "\u{1b}[31m",
    "\u{1b}[0m",
    "\t",
    "______ ",
    " ______",
    "✔",
    "  3 passing (12ms)",
    "  2 failing",
    "  1) ",
    "Failure/Error: ",
    "5 examples, 2 failures",
    "rspec ./spec/a_spec.rb:4 # ",
    "# ./spec/a_spec.rb:5:in",
];

const TAP: &str = "TAP version 13\n1..4\nok 1 - adds\nnot ok 2 - subtracts\n  ---\n  message: 'expected 1'\n  ...\nok 3 # SKIP\nnot ok 4 - divides # TODO\n";

static SAMPLES: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut samples: Vec<String> = super::fixtures("fingerprint", ".txt")
        .into_iter()
        .map(|(_, text)| text)
        .collect();
    samples.push(TAP.to_owned());
    samples
});

fn one(rng: &mut Rng) {
    let output = output(rng);
    let root = (rng.u8(..4) == 0).then_some("/tmp/fp");
    let failures = parse_failures("cargo test", &output, root);
    assert!(
        !failures.is_empty(),
        "a failed command yielded no failure: {output:?}"
    );
    for f in &failures {
        assert!(
            f.fingerprint.len() == 16 && f.fingerprint.bytes().all(|b| b.is_ascii_hexdigit()),
            "{f:?}"
        );
    }
    let coloured = colour(rng, &output);
    assert_eq!(
        parse_failures("cargo test", &coloured, root),
        failures,
        "{output:?}"
    );
    let forward = set_hash(failures.iter().map(|f| f.fingerprint.as_str()));
    let backward = set_hash(failures.iter().rev().map(|f| f.fingerprint.as_str()));
    assert_eq!(forward, backward);
    let _ = passed_tests(&output);
    let _ = started_tests(&output);
}

fn output(rng: &mut Rng) -> String {
    let sample = &SAMPLES[rng.usize(..SAMPLES.len())];
    match rng.u8(..8) {
        0 => String::from_utf8_lossy(&input::bytes(rng, 300)).into_owned(),
        1 => input::text(rng, PIECES, 60),
        2 => {
            let other = &SAMPLES[rng.usize(..SAMPLES.len())];
            let cut = |s: &str, rng: &mut Rng| {
                let at = rng.usize(..=s.len());
                (0..=at).rev().find(|&i| s.is_char_boundary(i)).unwrap_or(0)
            };
            let (a, b) = (cut(sample, rng), cut(other, rng));
            format!("{}{}", &sample[..a], &other[b..])
        }
        _ => input::mutate_text(rng, sample, PIECES),
    }
}

/// `text` with SGR colour codes at a few line starts and ends.
fn colour(rng: &mut Rng, text: &str) -> String {
    text.split('\n')
        .map(|line| {
            if rng.u8(..4) == 0 {
                format!("\u{1b}[1;31m{line}\u{1b}[0m")
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
