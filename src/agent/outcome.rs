//! What became of one agent run, by name: why it failed (denied a
//! permission, exited with a status, timed out, could not authenticate …)
//! and what it spent (tokens by kind, cost, per model), as the tool itself
//! reported it.
//!
//! A failure that every iteration would hit — the tool is not installed, it
//! cannot authenticate, it refuses to start — is *fatal*: the run fails at
//! once with that reason instead of burning its iterations. A failure of the
//! tool's model provider (it is down, overloaded, unreachable) is neither the
//! agent's nor the task's: the engine waits for the provider and runs the
//! iteration again, uncounted. It is read only from the tool's own error
//! (its structured error event, or the last line of its error output),
//! never from what the agent's commands printed.

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
    /// The tool's model provider could not be reached or said it is down
    /// (a 5xx, 529 overloaded, 429, refused connection, timeout), after the
    /// tool's own retries: the iteration is run again once it answers.
    ModelUnavailable {
        detail: String,
    },
    /// closer could not commit what the agent changed.
    CommitFailed {
        detail: String,
    },
    /// The agent killed its reaper, so what it started may outlive it and
    /// change the worktree while closer verifies it: where that is
    /// possible (no sandbox, Landlock below ABI 6) it is always possible.
    Escaped,
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
                | AgentFailure::Escaped
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
            AgentFailure::ModelUnavailable { detail } => {
                format!("the agent's model provider is unavailable: {detail}")
            }
            AgentFailure::CommitFailed { detail } => {
                format!("closer could not commit the agent's changes: {detail}")
            }
            AgentFailure::Escaped => "the agent killed the process closer watches it with, so \
                 processes it started may still be running and changing its worktree; closer \
                 verifies nothing such a process could change (run agents under bubblewrap, or \
                 Landlock ABI 6 or later, where an agent cannot do this)"
                .into(),
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

/// Words in a tool's own error that mean its model provider is down or
/// out of reach (one line, lower case).
const OUTAGE: &[&str] = &[
    "overloaded",
    "service unavailable",
    "temporarily unavailable",
    "bad gateway",
    "gateway timeout",
    "internal server error",
    "high demand",
    "too many requests",
    "connection refused",
    "econnrefused",
    "connection reset",
    "econnreset",
    "etimedout",
    "request timed out",
    "cannot connect to api",
    "waiting for network",
    "stream disconnected before completion",
];

/// Words after which a 429 or 5xx number is an HTTP status.
const STATUS_WORDS: &[&str] = &["status", "http", "code", "error", "http/1.1", "http/2"];

/// Words that make a 429 a matter of money, not of load: it stays an error.
const NOT_LOAD: &[&str] = &["quota", "billing", "credit"];

/// The provider outage named in one line of a tool's own error, if one is:
/// an HTTP status 429 or 5xx after a word like `status` (`unexpected status
/// 503`, `API Error: 529`), or a phrase from [`OUTAGE`]. A refused
/// credential is never an outage ([`fatal_cause`] names it).
pub fn outage_cause(line: &str) -> Option<AgentFailure> {
    let lower = line.to_lowercase();
    if fatal_cause(line).is_some() || NOT_LOAD.iter().any(|w| lower.contains(w)) {
        return None;
    }
    let words: Vec<&str> = lower
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| matches!(c, ':' | ',' | '(' | ')' | '[' | ']' | '.')))
        .collect();
    let status = words.windows(2).any(|pair| {
        STATUS_WORDS.contains(&pair[0])
            && pair[1]
                .parse::<u16>()
                .is_ok_and(|n| n == 429 || (500..600).contains(&n))
    });
    (status || OUTAGE.iter().any(|p| lower.contains(p))).then(|| AgentFailure::ModelUnavailable {
        detail: shorten(line.trim(), 300),
    })
}

/// Whether an HTTP status (or none: no answer at all) from the model
/// provider means it is down: 429, 5xx, 529.
pub fn outage_status(status: Option<u64>) -> bool {
    status.is_none_or(|s| s == 429 || (500..600).contains(&s))
}

/// The last non-empty line of `text` that is not a JSON object (a tool's
/// event stream carries what the agent's commands printed).
pub fn last_line(text: &str) -> Option<&str> {
    text.lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !is_event(l))
}

/// `text` without its JSON event lines: what a tool said in its own words.
/// A tool's event stream carries what the agent's commands printed (tool
/// results), which must not pass for the tool's own error.
pub fn outside_events(text: &str) -> String {
    text.lines()
        .filter(|l| !is_event(l.trim()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A line that is a JSON object: an event of a tool's stream.
fn is_event(line: &str) -> bool {
    serde_json::from_str::<serde_json::Map<_, _>>(line).is_ok()
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

/// A cost from untrusted JSON: a finite non-negative number, else nothing;
/// counted as at most [`MAX_REPORTED_COST_USD`], so that sums of them stay
/// finite.
pub fn dollars(value: Option<&serde_json::Value>) -> Option<f64> {
    value
        .and_then(serde_json::Value::as_f64)
        .filter(|c| c.is_finite() && *c >= 0.0)
        .map(|c| c.min(MAX_REPORTED_COST_USD))
}

/// The most one cost an agent reports counts for: far above any budget,
/// and far enough below `f64::MAX` that no run's total becomes infinite.
pub const MAX_REPORTED_COST_USD: f64 = 1e12;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absurd_cost_counts_as_the_most_one_report_may_and_sums_stay_finite() {
        let huge = serde_json::json!(1e308);
        let counted = dollars(Some(&huge)).unwrap();
        assert_eq!(counted, MAX_REPORTED_COST_USD);
        assert!((counted + counted).is_finite());
        // The control: the reported value itself would not stay finite.
        assert!((1e308_f64 + 1e308).is_infinite());
        assert_eq!(dollars(Some(&serde_json::json!(0.031))), Some(0.031));
        assert_eq!(dollars(Some(&serde_json::json!(-1.0))), None);
    }

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

    /// The last words of each tool when its provider was down, as the
    /// pinned releases printed them (docs/agents.md).
    #[test]
    fn a_provider_outage_is_named_from_the_tools_own_last_words() {
        let outages = [
            // Claude Code's result sentences.
            "API Error: 503 Service Unavailable. This is a server-side issue, usually temporary — try again in a moment.",
            "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try again in a moment.",
            "API Error: Connection refused — a firewall or proxy may be blocking it (ECONNREFUSED)",
            "Request timed out. If the API is slow to answer, or a proxy or gateway holds responses, set API_TIMEOUT_MS above 3000.",
            // Codex's failed turns.
            "unexpected status 503 Service Unavailable: Service Unavailable, url: http://127.0.0.1:18603/v1/responses",
            "unexpected status 529 <unknown status code>: Overloaded, url: http://127.0.0.1:18629/v1/responses",
            "We’re currently experiencing high demand, which may cause temporary errors.",
            "exceeded retry limit, last status: 429 Too Many Requests",
            "Reconnecting... waiting for network (Connection failed: error sending request)",
            // OpenCode's, and what a wrapper script may say.
            "Cannot connect to API: Unable to connect. Is the computer able to access the url?",
            "Error: HTTP 502 Bad Gateway",
            "upstream error: status 500",
        ];
        for line in outages {
            assert!(
                matches!(
                    outage_cause(line),
                    Some(AgentFailure::ModelUnavailable { .. })
                ),
                "not an outage: {line}"
            );
        }
        let others = [
            // A refused key stays an authentication failure.
            "Failed to authenticate. API Error: 401 Incorrect API key provided",
            "unexpected status 401 Unauthorized: Incorrect API key provided",
            // Money, not load.
            "exceeded retry limit, last status: 429 Too Many Requests: You exceeded your current quota",
            // A bad request, and the agent's own task output.
            "API Error: 400 prompt is too long",
            "FAILED (failures=1)",
            "test_fetch failed: expected 200, got 503",
            "processed 500 records",
        ];
        for line in others {
            assert_eq!(outage_cause(line), None, "taken for an outage: {line}");
        }
        assert_eq!(
            outage_cause("API Error: 529 Overloaded.").map(|f| f.describe()),
            Some("the agent's model provider is unavailable: API Error: 529 Overloaded.".into())
        );
    }

    #[test]
    fn the_last_line_skips_json_events() {
        assert_eq!(
            last_line("started\nError: 503 Service Unavailable\n\n"),
            Some("Error: 503 Service Unavailable")
        );
        assert_eq!(
            last_line(
                "oops\n{\"type\":\"item.completed\",\"item\":{\"aggregated_output\":\"Connection refused\"}}\n"
            ),
            Some("oops")
        );
        assert_eq!(last_line("\n  \n"), None);
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
        // Waited out, never fatal.
        assert!(!AgentFailure::ModelUnavailable { detail: "x".into() }.fatal());
    }

    #[test]
    fn failures_stored_before_model_unavailable_existed_still_read() {
        let old = r#"{"kind":"exited","code":1,"tail":"boom"}"#;
        let read: AgentFailure = serde_json::from_str(old).unwrap();
        assert_eq!(
            read,
            AgentFailure::Exited {
                code: Some(1),
                tail: "boom".into()
            }
        );
        let down = AgentFailure::ModelUnavailable {
            detail: "API Error: 529".into(),
        };
        let json = serde_json::to_string(&down).unwrap();
        assert_eq!(
            json,
            r#"{"kind":"model_unavailable","detail":"API Error: 529"}"#
        );
        assert_eq!(serde_json::from_str::<AgentFailure>(&json).unwrap(), down);
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
