//! The command parser, over comment bodies assembled from markdown's
//! building blocks and from mentions, plus real comment bodies changed a
//! little.
//!
//! Properties: a body is addressed to the bot exactly when it holds a
//! command; an unedited comment adds no command; an edit that only repeats
//! the text adds none either; a first version's commands are all new.

use closer::engine::command::{is_addressed_to_bot, new_commands, parse_commands};
use fastrand::Rng;

use crate::driver::Target;
use crate::input;

pub const TARGET: Target = Target {
    name: "command",
    one,
};

const SLUG: &str = "closer";

const PIECES: &[&str] = &[
    "@closer",
    "@closer ",
    "@Closer",
    "@closer[bot]",
    "@closerx",
    "/closer ",
    "closer:",
    "run",
    "stop",
    "help",
    "status",
    "retry",
    "answer",
    "resume",
    "dry-run",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\r\n",
    "```",
    "```\n",
    "~~~",
    "`",
    "    ",
    "\t",
    "> ",
    ">",
    "<!--",
    "-->",
    "<",
    "-",
    "- ",
    "* ",
    "1. ",
    "# ",
    "\\",
    "é",
    "🦀",
    "\u{a0}",
    ":",
    ",",
    "#12",
    "x",
];

const BODIES: &[&str] = &[
    "@closer run",
    "Please look.\n\n@closer stop\n",
    "```\n@closer run\n```\n> @closer run\n@closer status",
    "- @closer retry\n- item",
    "<!-- @closer run -->\n@closer help",
];

fn one(rng: &mut Rng) {
    let body = body(rng);
    let commands = parse_commands(&body, SLUG);
    assert_eq!(
        is_addressed_to_bot(&body, SLUG),
        !commands.is_empty(),
        "{body:?}"
    );
    assert_eq!(new_commands(None, &body, SLUG), commands, "{body:?}");
    assert!(
        new_commands(Some(&body), &body, SLUG).is_empty(),
        "{body:?}"
    );
    let doubled = format!("{body}\n\n{body}");
    assert!(
        new_commands(Some(&doubled), &body, SLUG).is_empty(),
        "{body:?}"
    );
    if rng.bool() {
        let before = input::mutate_text(rng, &body, PIECES);
        let _ = new_commands(Some(&before), &body, SLUG);
    }
}

fn body(rng: &mut Rng) -> String {
    match rng.u8(..4) {
        0 => {
            let sample = input::pick(rng, BODIES);
            input::mutate_text(rng, sample, PIECES)
        }
        1 => String::from_utf8_lossy(&input::bytes(rng, 120)).into_owned(),
        _ => input::text(rng, PIECES, 50),
    }
}
