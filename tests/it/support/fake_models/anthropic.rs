//! Anthropic Messages: `message_start` (with usage), a content block
//! (`text_delta`s, or a `tool_use` whose input arrives as `input_json_delta`
//! pieces), `message_delta` (stop reason, output tokens), `message_stop`.

use serde_json::{Value, json};

use super::{CACHE_READ, CACHE_WRITE, INPUT, OUTPUT, Turn};

fn usage(output: u64) -> Value {
    json!({
        "input_tokens": INPUT,
        "cache_creation_input_tokens": CACHE_WRITE,
        "cache_read_input_tokens": CACHE_READ,
        "output_tokens": output,
    })
}

/// The streamed answer.
pub fn events(turn: &Turn, model: &str, n: u64) -> Vec<(&'static str, Value)> {
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {
            "id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage(1)}}),
    )];
    let stop = match turn {
        Turn::Tool { name, input } => {
            let text = input.to_string();
            let (a, b) = text.split_at(text.len() / 2);
            events.push(("content_block_start", json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "tool_use", "id": format!("toolu_{n}"), "name": name, "input": {}}})));
            for piece in [a, b] {
                events.push((
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": piece}}),
                ));
            }
            "tool_use"
        }
        Turn::Text(text) | Turn::Status(_, text) => {
            events.push((
                "content_block_start",
                json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}),
            ));
            events.push((
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": text}}),
            ));
            "end_turn"
        }
    };
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push((
        "message_delta",
        json!({"type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": OUTPUT}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    events
}

/// The same answer, not streamed.
pub fn message(turn: &Turn, model: &str, n: u64) -> Value {
    let (content, stop) = match turn {
        Turn::Tool { name, input } => (
            json!([{"type": "tool_use", "id": format!("toolu_{n}"), "name": name, "input": input}]),
            "tool_use",
        ),
        Turn::Text(text) | Turn::Status(_, text) => {
            (json!([{"type": "text", "text": text}]), "end_turn")
        }
    };
    json!({"id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage(OUTPUT)})
}
