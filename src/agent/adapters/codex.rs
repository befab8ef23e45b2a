//! `codex`: `codex exec --json -` (prompt on stdin). The tool prints JSON
//! Lines events: `thread.started`, `turn.started`, `item.started` /
//! `item.completed` (items of type `agent_message`, `command_execution`,
//! `file_change`, `reasoning`, …), `turn.completed` with `usage`,
//! `turn.failed` / `error`. The last `agent_message` is the final message.

use crate::agent::adapter::{
    AgentAdapter, AgentRequest, Interpretation, Invocation, json_events, plain, tool_argv,
};
use crate::config::agents::{AdapterKind, AgentConfig};

/// The Codex CLI adapter.
#[derive(Debug, Clone, Copy)]
pub struct Codex;

impl AgentAdapter for Codex {
    fn kind(&self) -> AdapterKind {
        AdapterKind::Codex
    }

    fn invocation(&self, config: &AgentConfig, request: &AgentRequest) -> Invocation {
        Invocation {
            argv: tool_argv(config, "codex", &["exec", "--json", "-"]),
            stdin: request.prompt.clone().into_bytes(),
        }
    }

    fn interpret(&self, stdout: &str) -> Interpretation {
        let events = json_events(stdout);
        if events.is_empty() {
            return plain(stdout);
        }
        let kind = |v: &serde_json::Value| {
            v.get("type")
                .and_then(|t| t.as_str())
                .unwrap_or("")
                .to_owned()
        };
        let message = events
            .iter()
            .filter(|v| kind(v) == "item.completed")
            .filter_map(|v| v.get("item"))
            .filter(|item| item.get("type").and_then(|t| t.as_str()) == Some("agent_message"))
            .filter_map(|item| item.get("text").and_then(|t| t.as_str()))
            .next_back()
            .unwrap_or_default()
            .to_owned();
        let error = events
            .iter()
            .filter(|v| matches!(kind(v).as_str(), "turn.failed" | "error"))
            .map(|v| {
                v.pointer("/error/message")
                    .or_else(|| v.get("message"))
                    .and_then(|m| m.as_str())
                    .unwrap_or("codex reported an error")
                    .to_owned()
            })
            .next_back();
        let usage = events
            .iter()
            .filter(|v| kind(v) == "turn.completed")
            .filter_map(|v| v.get("usage").cloned())
            .next_back();
        let thread_id = events.iter().find_map(|v| {
            v.get("thread_id")
                .and_then(|t| t.as_str())
                .map(str::to_owned)
        });
        Interpretation {
            structured: serde_json::json!({
                "message": message,
                "thread_id": thread_id,
                "usage": usage,
                "events": events.len(),
            }),
            message,
            error,
        }
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
        assert_eq!(i.structured["usage"]["output_tokens"], 122);
        assert_eq!(
            i.structured["thread_id"],
            "0199a213-81c0-7800-8aa1-bbab2a035a53"
        );
        assert!(i.error.is_none());
    }

    #[test]
    fn a_failed_turn_is_an_error() {
        let out = "{\"type\":\"thread.started\",\"thread_id\":\"t\"}\n{\"type\":\"turn.failed\",\"error\":{\"message\":\"stream disconnected\"}}\n";
        assert_eq!(
            Codex.interpret(out).error.as_deref(),
            Some("stream disconnected")
        );
    }
}
