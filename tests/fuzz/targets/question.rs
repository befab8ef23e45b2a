//! The question detector, over agent reports assembled from the phrases it
//! weighs, code blocks, quotes and lists it must look past, and edited
//! examples of asking and not asking.
//!
//! Properties: the score is within [0, 1] and asking means a score at the
//! threshold; a failed run is an error with no signals; an explicit
//! question always asks; the verdict does not depend on trailing spaces.

use closer::engine::question::{AnswerStatus, THRESHOLD, detect};
use fastrand::Rng;

use crate::driver::Target;
use crate::input;

pub const TARGET: Target = Target {
    name: "question",
    one,
};

const PIECES: &[&str] = &[
    "?",
    "? ",
    "Should I",
    "Which",
    "Do you want",
    "Would you like me to",
    "Could you clarify",
    "Please confirm",
    "Let me know",
    "I will",
    "I have",
    "Done.",
    "```",
    "```\n",
    "`x?`",
    "> ",
    "\n",
    "\n\n",
    "- ",
    "1. ",
    "    ",
    "Sollen wir",
    "¿",
    "？",
    "est-ce que",
    "http://x?y=1",
    "if x? then",
    "// why?",
    "# why?",
    "before I",
    "or",
    "PostgreSQL",
    "SQLite",
    ", ",
    ". ",
];

const REPORTS: &[&str] = &[
    "Which database should the new service use, PostgreSQL or SQLite?",
    "Fixed the parser. All tests pass.",
    "Would you like me to also update the CHANGELOG?",
    "```rust\nlet x = y?;\n```\nDone: the error is propagated.",
    "> Should we drop it?\n\nI kept the table; nothing to decide.",
    "The migration will drop the `sessions` table. Please confirm before I run it.",
];

fn one(rng: &mut Rng) {
    let output = match rng.u8(..3) {
        0 => {
            let sample = input::pick(rng, REPORTS);
            input::mutate_text(rng, sample, PIECES)
        }
        1 => String::from_utf8_lossy(&input::bytes(rng, 200)).into_owned(),
        _ => input::text(rng, PIECES, 40),
    };
    let verdict = detect(&output, false, &[]);
    assert!(
        (0.0..=1.0).contains(&verdict.score),
        "{output:?}: {}",
        verdict.score
    );
    if verdict.is_asking() {
        assert!(verdict.score >= THRESHOLD - 0.005, "{output:?}");
    }
    let failed = detect(&output, true, &[]);
    assert!(failed.status == AnswerStatus::Error && failed.signals.is_empty());
    let explicit = input::text(rng, PIECES, 3);
    if !explicit.trim().is_empty() {
        let asked = detect(&output, false, &[explicit]);
        assert!(
            asked.is_asking(),
            "an explicit question did not ask: {output:?}"
        );
    }
    let padded = detect(&format!("{output}  \n"), false, &[]);
    assert_eq!(padded.status, verdict.status, "{output:?}");
}
