//! What became of one agent run, by name: why it failed (denied a
//! permission, exited with a status, timed out, could not authenticate …)
//! and what it spent (tokens by kind, cost, per model), as the tool itself
//! reported it.
//!
//! A failure that every iteration would hit — the tool is not installed, it
//! cannot authenticate, it refuses to start — is *fatal*: the run fails at
//! once with that reason instead of burning its iterations.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Why an agent run is a failed iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AgentFailure {
    /// The tool's program could not be started.
    NotInstalled {
        program: String,
        detail: String,
    },
    /// closer could not set the run up (prompt file, HOME).
    NotStarted {
        detail: String,
    },
    /// No sandbox is available and the operator did not choose to run
    /// agents unconfined.
    NoSandbox {
        detail: String,
    },
    /// The model provider refused the credentials (401, "Invalid API key",
    /// "Not logged in").
    Authentication {
        detail: String,
    },
    /// The tool refused to start (a flag it does not know, running as root).
    RefusedToStart {
        detail: String,
    },
    /// The tool denied the agent what it tried to do, e.g. `edit calc.py`.
    PermissionDenied {
        denied: Vec<String>,
    },
    /// A non-zero exit (or a signal) with the tail of its output.
    Exited {
        code: Option<i32>,
        tail: String,
    },
    TimedOut {
        secs: u64,
    },
    /// Exit 0 and nothing said.
    EmptyReport,
    /// The tool reported an error of its own.
    ToolError {
        detail: String,
    },
    /// The run was stopped while the agent worked.
    Stopped,
    /// closer could not commit what the agent changed.
    CommitFailed {
        detail: String,
    },
}

impl AgentFailure {
    /// Every iteration would hit it: the run fails at once.
    pub fn fatal(&self) -> bool {
        matches!(
            self,
            AgentFailure::NotInstalled { .. }
                | AgentFailure::NoSandbox { .. }
                | AgentFailure::Authentication { .. }
                | AgentFailure::RefusedToStart { .. }
        )
    }

    /// The failure in a sentence, for the status comment and the diagnosis.
    pub fn describe(&self) -> String {
        match self {
            AgentFailure::NotInstalled { program, detail } => {
                format!("the agent's tool `{program}` could not be started: {detail}")
            }
            AgentFailure::NotStarted { detail } => {
                format!("closer could not start the agent: {detail}")
            }
            AgentFailure::NoSandbox { detail } => {
                format!("closer will not run the agent without a sandbox: {detail}")
            }
            AgentFailure::Authentication { detail } => {
                format!("the agent could not authenticate with its model provider: {detail}")
            }
            AgentFailure::RefusedToStart { detail } => {
                format!("the agent's tool refused to start: {detail}")
            }
            AgentFailure::PermissionDenied { denied } => {
                format!("the agent was denied permission to {}", denied.join(", "))
            }
            AgentFailure::Exited {
                code: Some(code),
                tail,
            } if tail.is_empty() => {
                format!("the agent exited with status {code}")
            }
            AgentFailure::Exited {
                code: Some(code),
                tail,
            } => {
                format!("the agent exited with status {code}: {tail}")
            }
            AgentFailure::Exited { code: None, .. } => "the agent was killed by a signal".into(),
            AgentFailure::TimedOut { secs } => format!(
                "the agent timed out after {secs} s; it and everything it started were killed"
            ),
            AgentFailure::EmptyReport => "the agent ended without a report".into(),
            AgentFailure::ToolError { detail } => {
                format!("the agent's tool reported an error: {detail}")
            }
            AgentFailure::Stopped => {
                "the run was stopped; the agent's processes were killed".into()
            }
            AgentFailure::CommitFailed { detail } => {
                format!("closer could not commit the agent's changes: {detail}")
            }
        }
    }
}

impl std::fmt::Display for AgentFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// Words in a tool's output that mean the credentials were refused.
const AUTHENTICATION: &[&str] = &[
    "invalid api key",
    "invalid x-api-key",
    "incorrect api key",
    "authentication_error",
    "authentication failed",
    "401 unauthorized",
    "status 401",
    "not logged in",
    "please run /login",
    "missing api key",
    "api key is missing",
];

/// Words that mean the tool refused its command line or its environment.
const REFUSED: &[&str] = &[
    "cannot be used with root",
    "unknown option",
    "unexpected argument",
    "unrecognized option",
    "unrecognized argument",
    "unknown flag",
];

/// A fatal cause named in a failed run's output, if one is.
pub fn fatal_cause(output: &str) -> Option<AgentFailure> {
    let lower = output.to_lowercase();
    let line_with = |needle: &&str| {
        output
            .lines()
            .find(|l| l.to_lowercase().contains(needle))
            .map(|l| shorten(l.trim(), 300))
    };
    if let Some(detail) = AUTHENTICATION
        .iter()
        .filter(|n| lower.contains(**n))
        .find_map(line_with)
    {
        return Some(AgentFailure::Authentication { detail });
    }
    REFUSED
        .iter()
        .filter(|n| lower.contains(**n))
        .find_map(line_with)
        .map(|detail| AgentFailure::RefusedToStart { detail })
}

/// The last non-empty lines of `text`, at most `max` characters.
pub fn tail_lines(text: &str, lines: usize, max: usize) -> String {
    let kept: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let start = kept.len().saturating_sub(lines);
    shorten(&kept[start..].join(" | "), max)
}

fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

/// Tokens by kind, as the tool reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub input: u64,
    pub output: u64,
    /// Written to the provider's prompt cache (Anthropic's cache creation).
    pub cache_write: u64,
    /// Read from the provider's prompt cache.
    pub cache_read: u64,
}

impl Tokens {
    /// Every token the provider processed: what budgets count.
    pub fn total(&self) -> u64 {
        self.input
            .saturating_add(self.output)
            .saturating_add(self.cache_write)
            .saturating_add(self.cache_read)
    }

    pub fn add(&mut self, other: &Tokens) {
        self.input = self.input.saturating_add(other.input);
        self.output = self.output.saturating_add(other.output);
        self.cache_write = self.cache_write.saturating_add(other.cache_write);
        self.cache_read = self.cache_read.saturating_add(other.cache_read);
    }
}

/// What one agent run spent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentUsage {
    pub tokens: Tokens,
    /// US dollars, when the tool reports a cost.
    pub cost_usd: Option<f64>,
    /// Per model, when the tool says.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub models: BTreeMap<String, Tokens>,
    /// The tokens are the session's running total (Codex counts a resumed
    /// thread from its start), not this run's: the engine subtracts what it
    /// counted before.
    #[serde(default)]
    pub session_total: bool,
}

impl AgentUsage {
    /// This run's share of a session total, given the total counted before.
    pub fn since(&self, before: &Tokens) -> Tokens {
        Tokens {
            input: self.tokens.input.saturating_sub(before.input),
            output: self.tokens.output.saturating_sub(before.output),
            cache_write: self.tokens.cache_write.saturating_sub(before.cache_write),
            cache_read: self.tokens.cache_read.saturating_sub(before.cache_read),
        }
    }
}

/// A count from untrusted JSON: a non-negative integer, else nothing.
pub fn count(value: Option<&serde_json::Value>) -> u64 {
    value.and_then(serde_json::Value::as_u64).unwrap_or(0)
}

/// A cost from untrusted JSON: a finite non-negative number, else nothing.
pub fn dollars(value: Option<&serde_json::Value>) -> Option<f64> {
    value
        .and_then(serde_json::Value::as_f64)
        .filter(|c| c.is_finite() && *c >= 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_and_refusals_are_named_from_the_output() {
        let auth = fatal_cause("Error: 401 Unauthorized\n{\"error\":\"Invalid API key\"}");
        assert!(
            matches!(auth, Some(AgentFailure::Authentication { .. })),
            "{auth:?}"
        );
        let root = fatal_cause(
            "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons",
        );
        assert!(
            matches!(root, Some(AgentFailure::RefusedToStart { .. })),
            "{root:?}"
        );
        assert_eq!(fatal_cause("test failed: expected 5, got -1"), None);
    }

    #[test]
    fn fatal_failures_are_the_ones_every_iteration_would_hit() {
        assert!(AgentFailure::Authentication { detail: "x".into() }.fatal());
        assert!(
            !AgentFailure::Exited {
                code: Some(1),
                tail: String::new()
            }
            .fatal()
        );
        assert!(!AgentFailure::PermissionDenied { denied: vec![] }.fatal());
    }

    #[test]
    fn descriptions_name_the_cause() {
        let denied = AgentFailure::PermissionDenied {
            denied: vec!["edit calc.py".into()],
        };
        assert_eq!(
            denied.describe(),
            "the agent was denied permission to edit calc.py"
        );
        let exited = AgentFailure::Exited {
            code: Some(1),
            tail: "Invalid API key".into(),
        };
        assert_eq!(
            exited.describe(),
            "the agent exited with status 1: Invalid API key"
        );
    }

    #[test]
    fn every_token_counts() {
        let t = Tokens {
            input: 12,
            output: 40,
            cache_write: 3_000,
            cache_read: 77_000,
        };
        assert_eq!(t.total(), 80_052);
    }
}
