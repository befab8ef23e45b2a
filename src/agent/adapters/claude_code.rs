//! `claude-code`: `claude -p --output-format json`, prompt on stdin. The tool
//! prints one JSON object (`type: "result"`, `subtype`, `is_error`, `result`,
//! `session_id`, `total_cost_usd`, `usage`, …); `result` is the final message.

use crate::agent::adapter::{
    AgentAdapter, AgentRequest, Interpretation, Invocation, plain, tool_argv,
};
use crate::config::agents::{AdapterKind, AgentConfig};

/// The Claude Code adapter.
#[derive(Debug, Clone, Copy)]
pub struct ClaudeCode;

impl AgentAdapter for ClaudeCode {
    fn kind(&self) -> AdapterKind {
        AdapterKind::ClaudeCode
    }

    fn invocation(&self, config: &AgentConfig, request: &AgentRequest) -> Invocation {
        Invocation {
            argv: tool_argv(config, "claude", &["-p", "--output-format", "json"]),
            stdin: request.prompt.clone().into_bytes(),
        }
    }

    fn interpret(&self, stdout: &str) -> Interpretation {
        // The result object is the last JSON line (older versions may print others first).
        let parsed = stdout
            .lines()
            .rev()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line.trim()).ok())
            .find(|v| v.get("type").and_then(|t| t.as_str()) == Some("result"));
        let Some(value) = parsed else {
            return plain(stdout);
        };
        let message = value
            .get("result")
            .and_then(|r| r.as_str())
            .unwrap_or_default()
            .to_owned();
        let is_error = value.get("is_error").and_then(|e| e.as_bool()) == Some(true)
            || value
                .get("subtype")
                .and_then(|s| s.as_str())
                .is_some_and(|s| s.starts_with("error"));
        let error = is_error.then(|| {
            let subtype = value
                .get("subtype")
                .and_then(|s| s.as_str())
                .unwrap_or("error");
            format!("claude reported {subtype}")
        });
        Interpretation {
            message,
            structured: value,
            error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_result_object() {
        let out = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":2712,"num_turns":3,"result":"Fixed the parser.","session_id":"4b5c","total_cost_usd":0.031,"usage":{"input_tokens":12,"output_tokens":40}}"#;
        let i = ClaudeCode.interpret(out);
        assert_eq!(i.message, "Fixed the parser.");
        assert_eq!(i.structured["session_id"], "4b5c");
        assert!(i.error.is_none());
    }

    #[test]
    fn an_error_subtype_is_an_error() {
        let out = r#"{"type":"result","subtype":"error_max_turns","is_error":true,"num_turns":30,"session_id":"x"}"#;
        let i = ClaudeCode.interpret(out);
        assert_eq!(i.error.as_deref(), Some("claude reported error_max_turns"));
    }

    #[test]
    fn non_json_output_becomes_a_message() {
        let i = ClaudeCode.interpret("Error: not logged in\n");
        assert_eq!(i.structured["message"], "Error: not logged in");
    }
}
