//! `codex`: `codex exec [resume <thread>] --json --skip-git-repo-check -c
//! sandbox_mode="workspace-write" -c approval_policy="never" -` (prompt on
//! stdin), with `CODEX_HOME` in the run's own HOME. The tool prints JSON
//! Lines events: `thread.started`, `turn.started`, `item.started` /
//! `item.completed` (items of type `agent_message`, `command_execution`,
//! `file_change`, `reasoning`, `error` notices, …), `turn.completed` with
//! `usage` (the thread's running total), `turn.failed` / `error`. The last
//! `agent_message` is the final message.
//!
//! When its model provider is down Codex retries (`request_max_retries`,
//! `stream_max_retries` of the provider, 4 and 5 by default: about 25 s),
//! announcing each retry as an `error` event `Reconnecting... 2/5 (…)`,
//! then fails the turn in its own words: `unexpected status 503 Service
//! Unavailable: …`, `unexpected status 529 <unknown status code>:
//! Overloaded`, `exceeded retry limit, last status: 429 Too Many
//! Requests`, and for a 500 `We’re currently experiencing high demand, …`;
//! these are read with the shared outage words. A refused connection is
//! never given up on: `Reconnecting... waiting for network (Connection
//! failed: …)` comes 0, 5, 15, 35, 75 s into it and then every minute, so
//! closer stops the tool after
//! [`UNREACHABLE_NOTICES`](crate::agent::adapter::UNREACHABLE_NOTICES) of them.
//!
//! Why these flags: by default `exec` runs in a read-only sandbox and the
//! edit is refused; `workspace-write` lets the agent write the worktree
//! (closer commits, so git metadata may stay read-only) and `never` makes
//! a command that needs more fail instead of waiting for an approval nobody
//! gives. `--full-auto` is gone from 0.169; `exec resume` takes no
//! `--sandbox` flag, hence the config overrides.

use serde_json::Value;

use crate::agent::adapter::{
    AgentAdapter, AgentRequest, Interpretation, Invocation, Observation, Progress, file_name,
    json_events, plain, short_command, tool_argv,
};
use crate::agent::outcome::{AgentFailure, AgentUsage, Tokens, count, outage_cause};
use crate::config::agents::{AdapterKind, AgentConfig};

/// Codex's own directory in the run's HOME (`CODEX_HOME`), made by closer.
pub(crate) const CODEX_HOME: &str = ".codex";

/// The Codex CLI adapter.
#[derive(Debug, Clone, Copy)]
pub struct Codex;

/// A transient error Codex recovers from by itself (the stream reconnects).
const RECOVERED: &str = "Reconnecting";

/// Codex cannot connect to its provider and waits for the network.
const NO_NETWORK: &str = "Reconnecting... waiting for network";

impl AgentAdapter for Codex {
    fn kind(&self) -> AdapterKind {
        AdapterKind::Codex
    }

    fn invocation(&self, config: &AgentConfig, request: &AgentRequest) -> Invocation {
        let mut flags = vec!["exec"];
        if let Some(thread) = &request.resume {
            flags.extend(["resume", thread.as_str()]);
        }
        flags.extend([
            "--json",
            "--skip-git-repo-check",
            // As config overrides: `exec resume` takes no `--sandbox` flag.
            "-c",
            "sandbox_mode=\"workspace-write\"",
            "-c",
            "approval_policy=\"never\"",
            // No traffic closer does not need (chatgpt.com, github.com).
            "-c",
            "analytics.enabled=false",
            "-c",
            "features.plugins=false",
            "-",
        ]);
        Invocation {
            argv: tool_argv(config, "codex", &flags),
            stdin: request.prompt.clone().into_bytes(),
            env: request
                .home
                .iter()
                .map(|h| {
                    (
                        "CODEX_HOME".to_owned(),
                        h.join(".codex").display().to_string(),
                    )
                })
                .collect(),
        }
    }

    /// Commands and file changes as activity; a wait for the network as
    /// the provider out of reach.
    fn observe(&self, line: &str) -> Option<Observation> {
        let event: Value = serde_json::from_str(line).ok()?;
        let message = event.get("message").and_then(Value::as_str);
        if let Some(waiting) = message.filter(|m| m.starts_with(NO_NETWORK)) {
            return Some(Observation::Unreachable(waiting.to_owned()));
        }
        let item = event.get("item");
        let item_type = item.and_then(|i| i.get("type")).and_then(Value::as_str);
        let activity = match (event.get("type")?.as_str()?, item_type) {
            ("item.started", Some("command_execution")) => {
                let command = item?.get("command")?.as_str()?;
                format!("running `{}`", short_command(command))
            }
            ("item.started" | "item.completed", Some("file_change")) => {
                let paths: Vec<&str> = item?
                    .get("changes")?
                    .as_array()?
                    .iter()
                    .filter_map(|c| c.get("path").and_then(Value::as_str))
                    .map(file_name)
                    .collect();
                format!("editing {}", paths.join(", "))
            }
            _ => return None,
        };
        Some(Observation::Progress(Progress {
            activity: Some(activity),
            tokens: 0,
        }))
    }

    fn version_argv(&self, config: &AgentConfig) -> Option<Vec<String>> {
        Some(tool_argv(config, "codex", &["--version"]))
    }

    fn home_dirs(&self) -> &'static [&'static str] {
        &[CODEX_HOME]
    }

    fn interpret(&self, stdout: &str) -> Interpretation {
        let events = json_events(stdout);
        if events.is_empty() {
            return plain(stdout);
        }
        let kind = |v: &Value| {
            v.get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let message = events
            .iter()
            .filter(|v| kind(v) == "item.completed")
            .filter_map(|v| v.get("item"))
            .filter(|item| item.get("type").and_then(Value::as_str) == Some("agent_message"))
            .filter_map(|item| item.get("text").and_then(Value::as_str))
            .next_back()
            .unwrap_or_default()
            .to_owned();
        let thread_id = events.iter().find_map(|v| {
            v.get("thread_id")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
        Interpretation {
            structured: serde_json::json!({
                "message": message,
                "thread_id": thread_id,
                "events": events.len(),
            }),
            message,
            failure: failure(&events),
            usage: usage(&events),
            session_id: thread_id,
        }
    }
}

/// The last error that was not recovered from: a failed turn, or an error
/// event after the last completed turn that is not a reconnect notice; the
/// provider being down when its words say so.
fn failure(events: &[Value]) -> Option<AgentFailure> {
    let kind = |v: &Value| {
        v.get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let last_completed = events.iter().rposition(|v| kind(v) == "turn.completed");
    events
        .iter()
        .enumerate()
        .filter(|(i, v)| match kind(v).as_str() {
            "turn.failed" => true,
            "error" => last_completed.is_none_or(|done| *i > done),
            _ => false,
        })
        .map(|(_, v)| {
            v.pointer("/error/message")
                .or_else(|| v.get("message"))
                .and_then(Value::as_str)
                .unwrap_or("codex reported an error")
                .to_owned()
        })
        .rfind(|message| !message.starts_with(RECOVERED))
        .map(|detail| outage_cause(&detail).unwrap_or(AgentFailure::ToolError { detail }))
}

/// The last completed turn's usage: the thread's running total (a resumed
/// thread counts from its first turn, so the engine subtracts what it saw
/// before). OpenAI counts cached input inside `input_tokens`; it is moved
/// to `cache_read`, not added twice.
fn usage(events: &[Value]) -> AgentUsage {
    let Some(usage) = events
        .iter()
        .filter(|v| v.get("type").and_then(Value::as_str) == Some("turn.completed"))
        .filter_map(|v| v.get("usage"))
        .next_back()
    else {
        return AgentUsage::default();
    };
    let input = count(usage.get("input_tokens"));
    let cached = count(usage.get("cached_input_tokens")).min(input);
    let written = count(usage.get("cache_write_input_tokens")).min(input - cached);
    AgentUsage {
        tokens: Tokens {
            input: input - cached - written,
            output: count(usage.get("output_tokens")),
            cache_write: written,
            cache_read: cached,
        },
        session_total: true,
        ..AgentUsage::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = r#"{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Looking at tests**"}}
{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"src\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Fixed the off-by-one in parse()."}}
{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}
"#;

    #[test]
    fn takes_the_last_agent_message_and_usage() {
        let i = Codex.interpret(RUN);
        assert_eq!(i.message, "Fixed the off-by-one in parse().");
        assert_eq!(i.usage.tokens.output, 122);
        assert_eq!(i.usage.tokens.cache_read, 24448);
        assert_eq!(i.usage.tokens.total(), 24763 + 122);
        assert_eq!(
            i.session_id.as_deref(),
            Some("0199a213-81c0-7800-8aa1-bbab2a035a53")
        );
        assert!(i.failure.is_none());
    }

    #[test]
    fn a_recovered_reconnect_is_not_a_failure() {
        let out = format!(
            "{{\"type\":\"error\",\"message\":\"Reconnecting... 1/5 (stream disconnected before completion)\"}}\n{RUN}"
        );
        let i = Codex.interpret(&out);
        assert!(i.failure.is_none(), "{:?}", i.failure);
        assert_eq!(i.message, "Fixed the off-by-one in parse().");
    }

    /// The failed turns of the pinned release after its retries against a
    /// server answering 503, 529, 500 and 429 (one retry each).
    #[test]
    fn a_turn_failed_by_the_provider_being_down_is_named() {
        let failed = [
            "unexpected status 503 Service Unavailable: Service Unavailable, url: http://127.0.0.1:18603/v1/responses",
            "unexpected status 529 <unknown status code>: Overloaded, url: http://127.0.0.1:18629/v1/responses",
            "We’re currently experiencing high demand, which may cause temporary errors.",
            "exceeded retry limit, last status: 429 Too Many Requests",
        ];
        for message in failed {
            let out = format!(
                "{{\"type\":\"thread.started\",\"thread_id\":\"t\"}}\n{{\"type\":\"turn.started\"}}\n\
                 {{\"type\":\"error\",\"message\":\"Reconnecting... 1/1 ({message})\"}}\n\
                 {{\"type\":\"error\",\"message\":\"{message}\"}}\n\
                 {{\"type\":\"turn.failed\",\"error\":{{\"message\":\"{message}\"}}}}\n"
            );
            assert_eq!(
                Codex.interpret(&out).failure,
                Some(AgentFailure::ModelUnavailable {
                    detail: message.into()
                }),
                "{message}"
            );
        }
        // A 400 is the request's fault: its body, as Codex prints it.
        let bad = r#"{"type":"turn.failed","error":{"message":"{\"error\": {\"message\": \"err\", \"type\": \"server_error\", \"code\": null}}"}}"#;
        assert!(matches!(
            Codex.interpret(bad).failure,
            Some(AgentFailure::ToolError { .. })
        ));
    }

    /// A refused connection: Codex waits for the network without end; each
    /// notice is the provider out of reach, a reconnect that counts is not.
    #[test]
    fn a_wait_for_the_network_is_the_provider_out_of_reach() {
        let waiting = r#"{"type":"error","message":"Reconnecting... waiting for network (Connection failed: error sending request)"}"#;
        assert_eq!(
            Codex.observe(waiting),
            Some(Observation::Unreachable(
                "Reconnecting... waiting for network (Connection failed: error sending request)"
                    .into()
            ))
        );
        let retry = r#"{"type":"error","message":"Reconnecting... 1/5 (unexpected status 503 Service Unavailable: Service Unavailable)"}"#;
        assert_eq!(Codex.observe(retry), None);
    }

    /// A command the agent ran printed a refused connection: the turn
    /// completed, nothing failed.
    #[test]
    fn an_outage_in_a_command_the_agent_ran_is_not_the_providers() {
        let out = format!(
            "{{\"type\":\"item.completed\",\"item\":{{\"id\":\"item_9\",\"type\":\"command_execution\",\"command\":\"curl -s localhost:8080\",\"aggregated_output\":\"curl: (7) Failed to connect: Connection refused\\n503 Service Unavailable\\n\",\"exit_code\":7,\"status\":\"failed\"}}}}\n{RUN}"
        );
        let i = Codex.interpret(&out);
        assert_eq!(i.failure, None);
        assert_eq!(i.message, "Fixed the off-by-one in parse().");
    }

    #[test]
    fn a_failed_turn_is_an_error() {
        let out = "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n{\"type\":\"turn.failed\",\"error\":{\"message\":\"stream disconnected\"}}\n";
        assert_eq!(
            Codex.interpret(out).failure,
            Some(AgentFailure::ToolError {
                detail: "stream disconnected".into()
            })
        );
    }
}
