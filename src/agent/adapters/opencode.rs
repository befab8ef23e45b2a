//! `opencode`: `opencode run --format json`, prompt on stdin. The tool prints
//! JSON Lines events `{type, timestamp, sessionID, part | error}` with types
//! `step_start`, `text`, `tool_use`, `step_finish`, `error`; the text parts
//! make the final message, `step_finish` parts carry tokens and cost.

use crate::agent::adapter::{
    AgentAdapter, AgentRequest, Interpretation, Invocation, json_events, plain, tool_argv,
};
use crate::config::agents::{AdapterKind, AgentConfig};

/// The OpenCode adapter.
#[derive(Debug, Clone, Copy)]
pub struct Opencode;

impl AgentAdapter for Opencode {
    fn kind(&self) -> AdapterKind {
        AdapterKind::Opencode
    }

    fn invocation(&self, config: &AgentConfig, request: &AgentRequest) -> Invocation {
        Invocation {
            argv: tool_argv(config, "opencode", &["run", "--format", "json"]),
            stdin: request.prompt.clone().into_bytes(),
        }
    }

    fn interpret(&self, stdout: &str) -> Interpretation {
        let events = json_events(stdout);
        if events.is_empty() {
            return plain(stdout);
        }
        let of_type = |t: &'static str| {
            events
                .iter()
                .filter(move |v| v.get("type").and_then(|x| x.as_str()) == Some(t))
        };
        let message = of_type("text")
            .filter_map(|v| v.pointer("/part/text").and_then(|t| t.as_str()))
            .collect::<Vec<_>>()
            .join("\n");
        let error = of_type("error")
            .map(|v| {
                v.pointer("/error/data/message")
                    .or_else(|| v.pointer("/error/message"))
                    .or_else(|| v.pointer("/error/name"))
                    .and_then(|m| m.as_str())
                    .unwrap_or("opencode reported an error")
                    .to_owned()
            })
            .next_back();
        let tokens: Vec<serde_json::Value> = of_type("step_finish")
            .filter_map(|v| v.pointer("/part/tokens").cloned())
            .collect();
        let cost: f64 = of_type("step_finish")
            .filter_map(|v| v.pointer("/part/cost").and_then(|c| c.as_f64()))
            .sum();
        let session = events.iter().find_map(|v| {
            v.get("sessionID")
                .and_then(|s| s.as_str())
                .map(str::to_owned)
        });
        Interpretation {
            structured: serde_json::json!({
                "message": message,
                "session_id": session,
                "tokens": tokens,
                "cost": cost,
            }),
            message,
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = r#"{"type":"step_start","timestamp":1767036059338,"sessionID":"ses_494719016ffe85dkDMj0FPRbHK","part":{"id":"prt_1","sessionID":"ses_494719016ffe85dkDMj0FPRbHK","messageID":"msg_1","type":"step-start"}}
{"type":"tool_use","timestamp":1767036061199,"sessionID":"ses_494719016ffe85dkDMj0FPRbHK","part":{"id":"prt_2","type":"tool","tool":"bash","state":{"status":"completed","input":{"command":"ls"},"output":"src\n"}}}
{"type":"text","timestamp":1767036064268,"sessionID":"ses_494719016ffe85dkDMj0FPRbHK","part":{"id":"prt_3","type":"text","text":"Added the missing test.","time":{"start":1767036064265,"end":1767036064265}}}
{"type":"step_finish","timestamp":1767036064273,"sessionID":"ses_494719016ffe85dkDMj0FPRbHK","part":{"id":"prt_4","type":"step-finish","reason":"stop","cost":0.002,"tokens":{"input":671,"output":8,"reasoning":0,"cache":{"read":21415,"write":0}}}}
"#;

    #[test]
    fn joins_text_parts_and_sums_cost() {
        let i = Opencode.interpret(RUN);
        assert_eq!(i.message, "Added the missing test.");
        assert_eq!(i.structured["session_id"], "ses_494719016ffe85dkDMj0FPRbHK");
        assert_eq!(i.structured["tokens"][0]["input"], 671);
        assert!(i.error.is_none());
    }

    #[test]
    fn an_error_event_is_an_error() {
        let out = r#"{"type":"error","timestamp":1,"sessionID":"s","error":{"name":"ProviderAuthError","data":{"message":"no API key"}}}"#;
        assert_eq!(Opencode.interpret(out).error.as_deref(), Some("no API key"));
    }
}
