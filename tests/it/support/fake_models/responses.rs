//! OpenAI Responses: `response.created`, `response.output_item.added`,
//! `response.output_text.delta` (messages), `response.output_item.done`
//! (a `message` or a `function_call`), `response.completed` with usage
//! (cached tokens counted inside `input_tokens`).

use serde_json::{Value, json};

use super::{CACHE_READ, INPUT, OUTPUT, Turn};

/// The streamed answer.
pub fn events(turn: &Turn, n: u64) -> Vec<(&'static str, Value)> {
    let id = format!("resp_{n}");
    let item = match turn {
        Turn::Tool { name, input } => json!({"type": "function_call", "id": format!("fc_{n}"),
            "call_id": format!("call_{n}"), "name": name, "arguments": input.to_string(),
            "status": "completed"}),
        Turn::Text(text) | Turn::Status(_, text) => {
            json!({"type": "message", "id": format!("msg_{n}"),
            "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]})
        }
    };
    let mut events = vec![
        (
            "response.created",
            json!({"type": "response.created",
            "response": {"id": id, "object": "response", "status": "in_progress", "output": []}}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added",
            "output_index": 0, "item": item}),
        ),
    ];
    if let Turn::Text(text) = turn {
        events.push((
            "response.output_text.delta",
            json!({"type": "response.output_text.delta",
            "item_id": format!("msg_{n}"), "output_index": 0, "content_index": 0, "delta": text}),
        ));
    }
    events.push((
        "response.output_item.done",
        json!({"type": "response.output_item.done",
        "output_index": 0, "item": item}),
    ));
    events.push(("response.completed", json!({"type": "response.completed", "response": {
        "id": id, "object": "response", "status": "completed", "output": [item],
        "usage": {"input_tokens": INPUT + CACHE_READ, "input_tokens_details": {"cached_tokens": CACHE_READ},
            "output_tokens": OUTPUT, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": INPUT + CACHE_READ + OUTPUT}}})));
    events
}
