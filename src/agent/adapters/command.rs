//! `command`: any operator-configured argv. Prompt on stdin and in
//! `CLOSER_PROMPT_FILE`; a JSON object on stdout is the structured output,
//! anything else becomes `{"message": stdout}`. Never runs a command the
//! operator did not configure.

use crate::agent::adapter::{AgentAdapter, AgentRequest, Interpretation, Invocation, plain};
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
        }
    }

    fn interpret(&self, stdout: &str) -> Interpretation {
        match serde_json::from_str::<serde_json::Value>(stdout.trim()) {
            Ok(value @ serde_json::Value::Object(_)) => Interpretation {
                message: value
                    .get("message")
                    .and_then(|m| m.as_str())
                    .map_or_else(|| stdout.trim().to_owned(), str::to_owned),
                structured: value,
                error: None,
            },
            _ => plain(stdout),
        }
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
            assert!(i.error.is_none());
        }
    }
}
