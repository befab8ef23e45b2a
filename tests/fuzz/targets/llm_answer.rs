//! LLM answers, as the Messages API (Anthropic) and chat completions
//! (OpenAI-compatible) return them: well-formed answers with fields removed,
//! retyped or replaced, tool inputs and message contents that are JSON,
//! JSON-in-a-string or prose, and raw bytes; read the way the HTTP layer
//! reads them (bytes → JSON) and then by each backend's `parse_answer`.
//!
//! Properties: an accepted answer's value is exactly the JSON the model
//! gave; an error's text stays short (an excerpt, never the whole answer).

use std::sync::LazyLock;

use closer::llm::{anthropic, openai};
use fastrand::Rng;
use serde_json::{Value, json};

use crate::driver::Target;
use crate::input;

pub const TARGET: Target = Target {
    name: "llm_answer",
    one,
};

const TOOL: &str = "completion_check";

const PIECES: &[&str] = &[
    "tool_use",
    "text",
    "completion_check",
    "max_tokens",
    "refusal",
    "end_turn",
    "stop",
    "length",
    "content_filter",
    "{\"allComplete\": true}",
    "{",
    "}",
    "[",
    "]",
    ":",
    ",",
    "\"",
    "null",
    "choices",
    "message",
    "content",
    "input",
    "usage",
];

static ANTHROPIC: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
        "content": [
            {"type": "text", "text": "Checking the checklist."},
            {"type": "tool_use", "id": "t1", "name": TOOL,
             "input": {"allComplete": true, "confidence": 0.9, "items": [{"item": "a", "completed": true}]}}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 120, "output_tokens": 30}
    })
});

static OPENAI: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "id": "c1", "object": "chat.completion", "model": "gpt-x",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "{\"allComplete\": false, \"confidence\": 0.4}"}}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20}
    })
});

fn one(rng: &mut Rng) {
    let anthropic_side = rng.bool();
    let body = body(rng, if anthropic_side { &ANTHROPIC } else { &OPENAI });
    let Ok(answer) = serde_json::from_slice::<Value>(&body) else {
        return;
    };
    let result = if anthropic_side {
        anthropic::parse_answer(&answer, TOOL)
    } else {
        openai::parse_answer(&answer)
    };
    match result {
        Ok(parsed) => assert_eq!(parsed.value, given(&answer, anthropic_side), "{answer}"),
        Err(e) => assert!(e.to_string().chars().count() < 1_000, "{e}"),
    }
}

fn body(rng: &mut Rng, sample: &Value) -> Vec<u8> {
    match rng.u8(..8) {
        0 => input::bytes(rng, 200),
        1 => {
            let text = sample.to_string();
            input::mutate_chars(rng, &text, PIECES).into_bytes()
        }
        _ => {
            let mut value = sample.clone();
            input::mutate_json(rng, &mut value, PIECES);
            value.to_string().into_bytes()
        }
    }
}

/// The JSON the model gave: the named tool call's input (an object, or a
/// string holding JSON), or the first choice's content.
fn given(answer: &Value, anthropic_side: bool) -> Value {
    if anthropic_side {
        let call = answer["content"]
            .as_array()
            .and_then(|blocks| {
                blocks
                    .iter()
                    .find(|b| b["type"] == "tool_use" && b["name"] == TOOL)
            })
            .expect("an accepted answer has the call");
        match &call["input"] {
            Value::String(s) => serde_json::from_str(s).expect("accepted, so JSON"),
            other => other.clone(),
        }
    } else {
        let content = answer["choices"][0]["message"]["content"]
            .as_str()
            .expect("content");
        serde_json::from_str(content).expect("accepted, so JSON")
    }
}
