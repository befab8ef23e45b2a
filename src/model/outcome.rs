//! How a run ended, in one line: `completed`, `failed: <why>` or
//! `stopped: <why>`.

use std::fmt;

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Verified and closed (or merged).
    Completed,
    /// Ended without a verified result; the diagnosis says more.
    Failed(String),
    /// A person stopped it (closed the issue, `/closer stop`).
    Stopped(String),
}

impl Outcome {
    /// Reads the stored line; `None` when it is none of the three forms.
    pub fn parse(text: &str) -> Option<Outcome> {
        if text == "completed" {
            return Some(Outcome::Completed);
        }
        if let Some(why) = text.strip_prefix("failed: ") {
            return Some(Outcome::Failed(why.to_owned()));
        }
        text.strip_prefix("stopped: ")
            .map(|why| Outcome::Stopped(why.to_owned()))
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Completed => f.write_str("completed"),
            Outcome::Failed(why) => write!(f, "failed: {why}"),
            Outcome::Stopped(why) => write!(f, "stopped: {why}"),
        }
    }
}
