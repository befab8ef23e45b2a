//! The bot's commands: the closed set of things a person can ask closer to do
//! from a comment (`/closer run`, `@<app-slug> retry`, ...), their help text
//! and the errors a mistyped command yields.
//!
//! This module only reads text. It must never decide whether the author may
//! use a command (the engine checks permissions) and never execute anything
//! from a comment: a command is one word matched against a fixed list.

mod markdown;
mod parser;
mod suggest;

pub use parser::{is_addressed_to_bot, mentions_bot, new_commands, parse_commands, request};

use std::fmt;

/// The longest unknown word kept in a [`CommandError::Unknown`], in characters.
const MAX_WORD_CHARS: usize = 32;

/// One command a person can give closer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Command {
    /// Start a run on the issue.
    Run,
    /// Restart a run that ended (failed, stopped or done), keeping its
    /// history.
    Retry,
    /// Stop the running run.
    Stop,
    /// Post where the run stands.
    Status,
}

impl Command {
    /// Every command, in the order the help text lists them.
    pub const fn all() -> [Command; 4] {
        [Command::Run, Command::Retry, Command::Stop, Command::Status]
    }

    /// The word that names the command (`run` in `/closer run`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Command::Run => "run",
            Command::Retry => "retry",
            Command::Stop => "stop",
            Command::Status => "status",
        }
    }

    /// One line saying what the command does, for the help text.
    ///
    /// An exhaustive `match`: a new variant does not compile until it has help.
    pub const fn description(self) -> &'static str {
        match self {
            Command::Run => "start working on this issue",
            Command::Retry => {
                "restart a run that ended (failed, stopped or done), keeping its history \
                 and continuing from its branch"
            }
            Command::Stop => "stop the current run",
            Command::Status => "show where the current run stands",
        }
    }

    /// The command a word names, compared without regard to case.
    pub fn from_word(word: &str) -> Option<Command> {
        Command::all()
            .into_iter()
            .find(|command| command.as_str().eq_ignore_ascii_case(word))
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A line addressed to the bot that is not a command it knows.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum CommandError {
    /// `/closer <word>` where `word` names no command. `word` is the author's
    /// text (cut to 32 characters): escape it before rendering it anywhere.
    Unknown {
        /// The word as written, without trailing punctuation.
        word: String,
        /// The command the author most likely meant, if one is close enough.
        suggestion: Option<Command>,
    },
    /// `/closer` with no word after it.
    Missing,
}

impl CommandError {
    /// The error for an unknown `word`, with a "did you mean" when one is close.
    pub(crate) fn unknown(word: &str) -> CommandError {
        CommandError::Unknown {
            word: word.chars().take(MAX_WORD_CHARS).collect(),
            suggestion: suggest::closest(word),
        }
    }
}

impl fmt::Display for CommandError {
    /// Plain text for logs; the posted comment is written by the comment module.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CommandError::Unknown {
                word,
                suggestion: Some(command),
            } => write!(
                f,
                "unknown command {word:?}, did you mean {:?}?",
                command.as_str()
            ),
            CommandError::Unknown {
                word,
                suggestion: None,
            } => write!(f, "unknown command {word:?}"),
            CommandError::Missing => f.write_str("a command word is missing after /closer"),
        }
    }
}

impl std::error::Error for CommandError {}

/// The help text (markdown) listing every command and what it does.
pub fn help() -> String {
    let mut text = String::from(
        "Write a command at the start of a line, as `/closer <command>` or `@<app> <command>`:\n\n",
    );
    for command in Command::all() {
        text.push_str(&format!(
            "- `/closer {}`: {}\n",
            command.as_str(),
            command.description()
        ));
    }
    text.push_str(
        "\nCommands in code blocks, inline code, quotes and HTML comments are ignored.\n",
    );
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_round_trips_through_its_word() {
        for command in Command::all() {
            assert_eq!(Command::from_word(command.as_str()), Some(command));
            assert_eq!(
                Command::from_word(&command.as_str().to_uppercase()),
                Some(command)
            );
        }
        let mut words: Vec<_> = Command::all().iter().map(|c| c.as_str()).collect();
        words.dedup();
        assert_eq!(words.len(), Command::all().len(), "words are distinct");
    }

    #[test]
    fn help_names_every_command() {
        let help = help();
        for command in Command::all() {
            assert!(help.contains(&format!("`/closer {}`", command.as_str())));
            assert!(help.contains(command.description()));
        }
        insta::assert_snapshot!(help, @r"
        Write a command at the start of a line, as `/closer <command>` or `@<app> <command>`:

        - `/closer run`: start working on this issue
        - `/closer retry`: restart a run that ended (failed, stopped or done), keeping its history and continuing from its branch
        - `/closer stop`: stop the current run
        - `/closer status`: show where the current run stands

        Commands in code blocks, inline code, quotes and HTML comments are ignored.
        ");
    }

    #[test]
    fn unknown_words_are_cut_and_display_quotes_them() {
        let long = "x".repeat(100);
        let CommandError::Unknown { word, suggestion } = CommandError::unknown(&long) else {
            panic!("expected Unknown");
        };
        assert_eq!(word.chars().count(), MAX_WORD_CHARS);
        assert_eq!(suggestion, None);
        assert_eq!(
            CommandError::unknown("rerty").to_string(),
            "unknown command \"rerty\", did you mean \"retry\"?"
        );
        assert_eq!(
            CommandError::unknown("zzz").to_string(),
            "unknown command \"zzz\""
        );
    }
}
