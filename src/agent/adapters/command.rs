//! `command`: any operator-configured argv. Prompt on stdin and in
//! `CLOSER_PROMPT_FILE`; a JSON object on stdout is the structured output,
//! anything else becomes `{"message": stdout}`. Never runs a command the
//! operator did not configure. Usage is read from the object's `usage`
//! (`input_tokens`, `output_tokens`, `cache_creation_input_tokens`,
//! `cache_read_input_tokens`, or only `total_tokens`) and `total_cost_usd`
//! (or `cost_usd`, `cost`); a
//! `session_id` is handed back as `CLOSER_RESUME` next iteration.

use serde_json::Value;

use crate::agent::adapter::{AgentAdapter, AgentRequest, Interpretation, Invocation, plain};
use crate::agent::outcome::{AgentUsage, Tokens, count, dollars};
use crate::config::agents::{AdapterKind, AgentConfig};

/// The `command` adapter.
#[derive(Debug, Clone, Copy)]
pub struct CommandAdapter;

impl AgentAdapter for CommandAdapter {
    fn kind(&self) -> AdapterKind {
        AdapterKind::Command
    }

    fn invocation(&self, config: &AgentConfig, request: &AgentRequest) -> Invocation {
        Invocation {
            argv: config.command.clone(),
            stdin: request.prompt.clone().into_bytes(),
            env: request
                .resume
                .iter()
                .map(|s| ("CLOSER_RESUME".to_owned(), s.clone()))
                .collect(),
        }
    }

    fn interpret(&self, stdout: &str) -> Interpretation {
        match serde_json::from_str::<serde_json::Value>(stdout.trim()) {
            Ok(value @ serde_json::Value::Object(_)) => Interpretation {
                message: value
                    .get("message")
                    .and_then(|m| m.as_str())
                    .map_or_else(|| stdout.trim().to_owned(), str::to_owned),
                usage: usage(&value),
                session_id: value
                    .get("session_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                structured: value,
                failure: None,
            },
            _ => plain(stdout),
        }
    }
}

/// The object's `usage` and its cost (`total_cost_usd`, `cost_usd` or
/// `cost`); a lone `total_tokens` counts as input.
fn usage(value: &Value) -> AgentUsage {
    let u = value.get("usage");
    let field = |k: &str| count(u.and_then(|u| u.get(k)));
    let mut tokens = Tokens {
        input: field("input_tokens"),
        output: field("output_tokens"),
        cache_write: field("cache_creation_input_tokens"),
        cache_read: field("cache_read_input_tokens"),
    };
    if tokens.total() == 0 {
        tokens.input = field("total_tokens");
    }
    AgentUsage {
        tokens,
        cost_usd: ["total_cost_usd", "cost_usd", "cost"]
            .iter()
            .find_map(|k| dollars(value.get(*k))),
        models: Default::default(),
        session_total: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_object_is_the_structured_output() {
        let i = CommandAdapter.interpret("{\"message\": \"done\", \"files\": 2}\n");
        assert_eq!(i.message, "done");
        assert_eq!(i.structured["files"], 2);
    }

    #[test]
    fn anything_else_is_wrapped_as_a_message() {
        for out in ["fixed it\n", "[1, 2]", "{broken"] {
            let i = CommandAdapter.interpret(out);
            assert_eq!(i.structured, serde_json::json!({ "message": out.trim() }));
            assert!(i.failure.is_none());
        }
    }
}
