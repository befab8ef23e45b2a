//! Finds the commands in a comment body: a line that starts (after optional
//! whitespace) with `/closer` or `@<app-slug>` (or `@<app-slug>[bot]`), then
//! the command word. Words after the command word are ignored, so
//! `/closer run please` is `run`. Only prose counts (see `markdown`).
//!
//! It must never act on a command: it returns values, the engine checks who
//! wrote them and what to do.

use std::collections::HashMap;

use super::markdown::prose_lines;
use super::{Command, CommandError};

/// The prefix every command may start with.
const PREFIX: &str = "/closer";

/// Every command line of `body`, in order: `Ok` for a known command, `Err`
/// for `/closer` alone or an unknown word (with a "did you mean").
///
/// `app_slug` is the App's slug without `[bot]` (`closer-bot`): `@closer-bot run` and
/// `@closer-bot[bot] run` are commands, `@closer-bot2 run` is not.
pub fn parse_commands(body: &str, app_slug: &str) -> Vec<Result<Command, CommandError>> {
    prose_lines(body)
        .iter()
        .filter_map(|line| parse_line(line, app_slug))
        .collect()
}

/// The commands an edit of a comment added: each command (or error) of
/// `body` runs once for every occurrence beyond the number of times it
/// appeared in `previous_body`. Editing a comment therefore never re-runs a
/// command it already had; adding a second `/closer run` runs one more; fixing
/// `/closer rerty` into `/closer retry` runs `retry`. Without a previous body
/// (a new comment) every command is new. Order follows `body`; the first
/// occurrences are the ones counted as old.
pub fn new_commands(
    previous_body: Option<&str>,
    body: &str,
    app_slug: &str,
) -> Vec<Result<Command, CommandError>> {
    let mut seen: HashMap<Result<Command, CommandError>, usize> = HashMap::new();
    for old in previous_body.map_or_else(Vec::new, |previous| parse_commands(previous, app_slug)) {
        *seen.entry(old).or_default() += 1;
    }
    parse_commands(body, app_slug)
        .into_iter()
        .filter(|command| match seen.get_mut(command) {
            Some(count) if *count > 0 => {
                *count -= 1;
                false
            }
            _ => true,
        })
        .collect()
}

/// Whether `body` has any line addressed to the bot, valid command or not:
/// when it does, the bot owes the author an answer.
pub fn is_addressed_to_bot(body: &str, app_slug: &str) -> bool {
    prose_lines(body)
        .iter()
        .any(|line| addressed_rest(line, app_slug).is_some())
}

/// Whether `body` mentions the App (`@<app-slug>` or `@<app-slug>[bot]`)
/// anywhere in its prose — not in code, quotes or hidden text.
pub fn mentions_bot(body: &str, app_slug: &str) -> bool {
    !app_slug.is_empty()
        && prose_lines(body)
            .iter()
            .any(|line| line_mentions(line, app_slug))
}

/// A request written to the App in a comment: the comment mentions it and
/// is not a command — no `/closer …` line, and no `@<app-slug> <word>`
/// line whose word is a command, is missing, or is close to one (those are
/// commands, or typos of one, answered with the help text). The request is
/// the whole comment, trimmed.
pub fn request(body: &str, app_slug: &str) -> Option<String> {
    let lines = prose_lines(body);
    let command_like = lines.iter().any(|line| {
        let line = line.trim_start();
        if strip_prefix_ignore_case(line, PREFIX).is_some()
            && addressed_rest(line, app_slug).is_some()
        {
            return true;
        }
        matches!(
            parse_line(line, app_slug),
            Some(Ok(_))
                | Some(Err(CommandError::Missing))
                | Some(Err(CommandError::Unknown {
                    suggestion: Some(_),
                    ..
                }))
        )
    });
    let mentioned = lines.iter().any(|line| line_mentions(line, app_slug));
    (mentioned && !command_like && !app_slug.is_empty()).then(|| body.trim().to_owned())
}

/// Whether one visible line holds a mention of the App, as GitHub reads a
/// mention: `@` not inside a word, the slug, optionally `[bot]`, then no
/// further login character.
fn line_mentions(line: &str, app_slug: &str) -> bool {
    let bytes = line.as_bytes();
    line.match_indices('@').any(|(at, _)| {
        let inside_word =
            at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        let Some(after) = mention_rest(&line[at..], app_slug) else {
            return false;
        };
        let next = after.chars().next();
        !inside_word && !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    })
}

/// The command on one visible line, if the line is addressed to the bot.
fn parse_line(line: &str, app_slug: &str) -> Option<Result<Command, CommandError>> {
    let rest = addressed_rest(line, app_slug)?;
    let word = rest
        .split_whitespace()
        .next()
        .map(|word| word.trim_end_matches(|c: char| c.is_ascii_punctuation()))
        .unwrap_or("");
    Some(match word {
        "" => Err(CommandError::Missing),
        word => Command::from_word(word).ok_or_else(|| CommandError::unknown(word)),
    })
}

/// What follows the address (`/closer`, `@slug`, `@slug[bot]`, each with an
/// optional `:` or `,`) when `line` starts with one; the address must end at
/// whitespace or the end of the line, so `/closerrun` is not addressed.
fn addressed_rest<'a>(line: &'a str, app_slug: &str) -> Option<&'a str> {
    let line = line.trim_start();
    let after = strip_prefix_ignore_case(line, PREFIX).or_else(|| mention_rest(line, app_slug))?;
    let after = after.strip_prefix([':', ',']).unwrap_or(after);
    match after.chars().next() {
        None => Some(after),
        Some(c) if c.is_whitespace() => Some(after),
        Some(_) => None,
    }
}

/// What follows `@<app_slug>` or `@<app_slug>[bot]` at the start of `line`.
fn mention_rest<'a>(line: &'a str, app_slug: &str) -> Option<&'a str> {
    if app_slug.is_empty() {
        return None;
    }
    let after = line.strip_prefix('@')?;
    let after = strip_prefix_ignore_case(after, app_slug)?;
    Some(strip_prefix_ignore_case(after, "[bot]").unwrap_or(after))
}

/// `text` without `prefix`, compared without regard to ASCII case.
fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use Command::{Retry, Run, Status, Stop};

    const SLUG: &str = "closer-bot";

    type Parsed = Result<Command, CommandError>;

    fn unknown(word: &str, suggestion: Option<Command>) -> Result<Command, CommandError> {
        Err(CommandError::Unknown {
            word: word.to_string(),
            suggestion,
        })
    }

    const MISSING: Result<Command, CommandError> = Err(CommandError::Missing);

    #[test]
    fn a_mention_with_words_that_are_no_command_is_a_request() {
        let asked = "@closer-bot please also update the docs";
        assert_eq!(request(asked, SLUG).as_deref(), Some(asked));
        let inline = "Looks good. Hey @closer-bot[bot], handle negative numbers too.";
        assert_eq!(request(inline, SLUG).as_deref(), Some(inline));
        // Commands, typos of commands and `/closer` lines are not requests.
        for not_a_request in [
            "@closer-bot run",
            "@closer-bot stat",
            "@closer-bot",
            "/closer please do it",
            "@closer-bot2 please do it",
            "mail me at me@closer-bot.example",
            "`@closer-bot please`",
            "> @closer-bot please",
            "nothing for the bot",
        ] {
            assert_eq!(request(not_a_request, SLUG), None, "{not_a_request}");
        }
        assert!(mentions_bot("thanks @Closer-Bot!", SLUG));
        assert!(!mentions_bot("thanks @closer-bots", SLUG));
    }

    #[test]
    fn table() {
        let cases: Vec<(&str, &str, Vec<Parsed>)> = vec![
            ("nothing", "thanks, looks good", vec![]),
            ("empty body", "", vec![]),
            ("run", "/closer run", vec![Ok(Run)]),
            ("retry", "/closer retry", vec![Ok(Retry)]),
            ("stop", "/closer stop", vec![Ok(Stop)]),
            ("status", "/closer status", vec![Ok(Status)]),
            ("mention", "@closer-bot run", vec![Ok(Run)]),
            (
                "mention with [bot]",
                "@closer-bot[bot] stop",
                vec![Ok(Stop)],
            ),
            (
                "mention with colon",
                "@closer-bot: status",
                vec![Ok(Status)],
            ),
            ("mention case", "@Closer-Bot RETRY", vec![Ok(Retry)]),
            ("word case", "/closer RuN", vec![Ok(Run)]),
            ("prefix case", "/CLOSER run", vec![Ok(Run)]),
            ("leading spaces", "   /closer run", vec![Ok(Run)]),
            (
                "leading tab in a paragraph",
                "hi\n\t/closer run",
                vec![Ok(Run)],
            ),
            (
                "trailing words ignored",
                "/closer run please",
                vec![Ok(Run)],
            ),
            ("trailing punctuation", "/closer retry.", vec![Ok(Retry)]),
            ("two spaces", "/closer  run", vec![Ok(Run)]),
            ("trailing whitespace", "/closer run   \t", vec![Ok(Run)]),
            (
                "several in order",
                "/closer status\nsome text\n@closer-bot stop\n/closer run",
                vec![Ok(Status), Ok(Stop), Ok(Run)],
            ),
            (
                "the same twice",
                "/closer run\n/closer run",
                vec![Ok(Run), Ok(Run)],
            ),
            ("not at line start", "please /closer run", vec![]),
            ("glued word", "/closerrun", vec![]),
            ("prefix of a longer path", "/closer/run", vec![]),
            ("another user", "@closer-bot2 run", vec![]),
            ("a user containing the slug", "@my-closer-bot run", vec![]),
            ("email-like", "mail closer-bot@example.com run", vec![]),
            ("email at line start", "closer-bot@example.com run", vec![]),
            ("mention not at start", "cc @closer-bot run", vec![]),
            ("alone", "/closer", vec![MISSING]),
            ("alone with spaces", "/closer   ", vec![MISSING]),
            ("mention alone", "@closer-bot", vec![MISSING]),
            (
                "unknown with suggestion",
                "/closer rerty",
                vec![unknown("rerty", Some(Retry))],
            ),
            (
                "transposed stop",
                "/closer sotp",
                vec![unknown("sotp", Some(Stop))],
            ),
            (
                "unknown without suggestion",
                "/closer deploy",
                vec![unknown("deploy", None)],
            ),
            (
                "help is unknown",
                "/closer help",
                vec![unknown("help", None)],
            ),
            ("fenced backticks", "```\n/closer run\n```", vec![]),
            ("fenced tildes", "~~~\n/closer run\n~~~", vec![]),
            (
                "fence with info string",
                "```sh\n/closer run\n```\n/closer stop",
                vec![Ok(Stop)],
            ),
            (
                "after a closed fence",
                "```\ncode\n```\n/closer run",
                vec![Ok(Run)],
            ),
            ("unclosed fence", "```\ncode\n\n/closer run", vec![]),
            (
                "shorter inner fence",
                "````\n```\n/closer run\n```\n/closer stop\n````\n/closer status",
                vec![Ok(Status)],
            ),
            (
                "no-break space after a closing fence",
                "```\n```\u{a0}\n/closer run\n```",
                vec![],
            ),
            (
                "form feed after a closing fence",
                "~~~\n~~~\u{c}\n/closer run\n~~~",
                vec![],
            ),
            (
                "spaces and tabs after a closing fence",
                "```\ncode\n``` \t\n/closer run",
                vec![Ok(Run)],
            ),
            (
                "tilde does not close backticks",
                "```\n~~~\n/closer run\n```",
                vec![],
            ),
            (
                "fence in a list item",
                "- a\n  ```\n  /closer run\n  ```",
                vec![],
            ),
            (
                "not a fence, an unclosed span: hides the paragraph",
                "``` a`b\n/closer run\n\n/closer stop",
                vec![Ok(Stop)],
            ),
            ("indented code", "text\n\n    /closer run", vec![]),
            ("indented code by tab", "\t/closer run", vec![]),
            ("four spaces at start", "    /closer run", vec![]),
            (
                "list continuation",
                "- item\n\n    /closer run",
                vec![Ok(Run)],
            ),
            (
                "indented code after a fence ended the list",
                "- item\n```\nx\n```\n\n    /closer stop",
                vec![],
            ),
            (
                "indented code after a quote ended the list",
                "- a\n> q\n\n    /closer run",
                vec![],
            ),
            (
                "indented code after a heading ended the list",
                "- a\n# h\n\n    /closer run",
                vec![],
            ),
            (
                "list continuation after a fence in the item",
                "- item\n  ```\n  x\n  ```\n\n    /closer stop",
                vec![Ok(Stop)],
            ),
            (
                "list continuation after a quote in the item",
                "- a\n  > q\n\n    /closer run",
                vec![Ok(Run)],
            ),
            (
                "lazy paragraph continuation",
                "text\n    /closer run",
                vec![Ok(Run)],
            ),
            ("list marker is not a command", "- /closer run", vec![]),
            ("inline code", "`/closer run`", vec![]),
            ("inline double backticks", "`` /closer run ``", vec![]),
            ("text after inline code", "`x` /closer run", vec![]),
            (
                "inline code spanning lines",
                "see `the\n/closer run` command",
                vec![],
            ),
            ("quote", "> /closer run", vec![]),
            ("nested quote", "> > /closer run", vec![]),
            ("indented quote", "  > /closer run", vec![]),
            ("lazy quote continuation", "> quoted\n/closer run", vec![]),
            (
                "quote then blank then command",
                "> quoted\n\n/closer run",
                vec![Ok(Run)],
            ),
            ("html comment", "<!-- /closer run -->", vec![]),
            (
                "html comment over lines",
                "<!--\n/closer run\n\n/closer stop\n-->",
                vec![],
            ),
            (
                "after a comment",
                "<!-- hidden -->\n/closer run",
                vec![Ok(Run)],
            ),
            (
                "rest of the comment line",
                "<!--\nx --> /closer run",
                vec![Ok(Run)],
            ),
            ("unclosed comment", "<!--\n/closer run", vec![]),
            (
                "comment inside code",
                "```\n<!--\n```\n/closer run",
                vec![Ok(Run)],
            ),
            (
                "crlf",
                "hello\r\n/closer run\r\n/closer stop\r\n",
                vec![Ok(Run), Ok(Stop)],
            ),
            (
                "crlf fence",
                "```\r\n/closer run\r\n```\r\n/closer stop",
                vec![Ok(Stop)],
            ),
            (
                "unicode around",
                "héllo 🦀\n/closer run ✨\n日本語",
                vec![Ok(Run)],
            ),
            (
                "unicode word",
                "/closer rün",
                vec![unknown("rün", Some(Run))],
            ),
            (
                "non-breaking space before",
                "\u{a0}/closer run",
                vec![Ok(Run)],
            ),
            ("unicode after prefix", "/closer🦀 run", vec![]),
            ("heading", "# /closer run", vec![]),
        ];
        assert!(cases.len() >= 40);
        for (name, body, expected) in cases {
            assert_eq!(
                parse_commands(body, SLUG),
                expected,
                "case {name}: {body:?}"
            );
            assert_eq!(
                is_addressed_to_bot(body, SLUG),
                !expected.is_empty(),
                "is_addressed_to_bot, case {name}: {body:?}"
            );
        }
    }

    #[test]
    fn the_help_text_and_error_texts_address_no_one() {
        assert!(!is_addressed_to_bot(&super::super::help(), SLUG));
    }

    #[test]
    fn an_empty_slug_matches_no_mention() {
        assert_eq!(parse_commands("@ run\n@run", ""), vec![]);
        assert_eq!(parse_commands("/closer run", ""), vec![Ok(Run)]);
    }

    #[test]
    fn new_commands_on_edits() {
        let cases: Vec<(&str, Option<&str>, &str, Vec<Parsed>)> = vec![
            (
                "new comment",
                None,
                "/closer run\n/closer stop",
                vec![Ok(Run), Ok(Stop)],
            ),
            ("unchanged", Some("/closer run"), "/closer run", vec![]),
            (
                "text edited around",
                Some("/closer run"),
                "Typo fixed.\n/closer run",
                vec![],
            ),
            (
                "one added",
                Some("/closer run"),
                "/closer run\n/closer run",
                vec![Ok(Run)],
            ),
            (
                "another added",
                Some("/closer run"),
                "/closer run\n/closer stop",
                vec![Ok(Stop)],
            ),
            (
                "typo fixed",
                Some("/closer rerty"),
                "/closer retry",
                vec![Ok(Retry)],
            ),
            (
                "a new typo answers again",
                Some("/closer rerty"),
                "/closer rerty\n/closer sotp",
                vec![unknown("sotp", Some(Stop))],
            ),
            (
                "removed",
                Some("/closer run\n/closer stop"),
                "/closer stop",
                vec![],
            ),
            (
                "moved out of code",
                Some("```\n/closer run\n```"),
                "/closer run",
                vec![Ok(Run)],
            ),
            (
                "moved into code",
                Some("/closer run"),
                "```\n/closer run\n```",
                vec![],
            ),
            (
                "case changed only",
                Some("/closer run"),
                "/closer RUN",
                vec![],
            ),
            (
                "mention form of the same",
                Some("/closer run"),
                "@closer-bot run",
                vec![],
            ),
            (
                "previous was empty",
                Some(""),
                "/closer status",
                vec![Ok(Status)],
            ),
        ];
        for (name, previous, body, expected) in cases {
            assert_eq!(new_commands(previous, body, SLUG), expected, "case {name}");
        }
    }

    #[test]
    fn large_inputs_are_linear_and_never_panic() {
        const SIZE: usize = 1 << 20;
        let shapes: Vec<(&str, String)> = vec![
            ("one long line", "a".repeat(SIZE)),
            ("one long word", format!("/closer {}", "r".repeat(SIZE))),
            ("command lines", "/closer run\n".repeat(SIZE / 12)),
            (
                "backtick runs",
                (1..1400).map(|n| "`".repeat(n) + " ").collect(),
            ),
            ("backtick lines", "` x\n".repeat(SIZE / 4)),
            ("comment openers", "<!-- ".repeat(SIZE / 5)),
            ("fence lines", "```\n".repeat(SIZE / 4)),
            ("quotes", "> ".repeat(SIZE / 2)),
            ("list items", "- a\n  ".repeat(SIZE / 6)),
            ("newlines", "\n".repeat(SIZE)),
            ("crlf", "\r\n".repeat(SIZE / 2)),
            ("escapes", "\\".repeat(SIZE)),
        ];
        for (name, body) in shapes {
            let started = Instant::now();
            let commands = parse_commands(&body, SLUG);
            let edited = new_commands(Some(&body), &body, SLUG);
            let elapsed = started.elapsed();
            assert!(edited.is_empty(), "{name}: an unchanged body adds nothing");
            assert!(
                elapsed < Duration::from_secs(5),
                "{name}: {elapsed:?} for {} bytes",
                body.len()
            );
            if name == "command lines" {
                assert_eq!(commands.len(), SIZE / 12);
            }
        }
    }

    #[test]
    fn random_input_never_panics_and_keeps_the_invariants() {
        const PIECES: &[&str] = &[
            "/closer",
            "/CLOSER",
            " run",
            " retry",
            " stop",
            " status",
            " rerty",
            "@closer-bot",
            "@closer-bot[bot]",
            "[bot]",
            "\n",
            "\r\n",
            "\r",
            " ",
            "  ",
            "    ",
            "\t",
            "`",
            "``",
            "```",
            "~~~",
            ">",
            "> ",
            "<!--",
            "-->",
            "<",
            "!",
            "-",
            "- ",
            "1. ",
            "\\",
            "é",
            "🦀",
            "\u{a0}",
            "x",
            "run",
            ":",
            ",",
            "#",
        ];
        let mut rng = fastrand::Rng::with_seed(0x00c1_05e7);
        for _ in 0..5000 {
            let len = rng.usize(0..40);
            let mut body = String::new();
            for _ in 0..len {
                if rng.u8(..) < 16 {
                    body.push(rng.char(..));
                } else {
                    body.push_str(PIECES[rng.usize(..PIECES.len())]);
                }
            }
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
        }
    }
}
