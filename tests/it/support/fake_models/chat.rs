//! OpenAI Chat Completions: `chat.completion.chunk`s with `delta.content`
//! or `delta.tool_calls` (the arguments in pieces), a chunk with the finish
//! reason, a usage chunk (cached tokens inside `prompt_tokens`), `[DONE]`.

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{CACHE_READ, INPUT, OUTPUT, Turn};

fn usage() -> Value {
    json!({"prompt_tokens": INPUT + CACHE_READ, "completion_tokens": OUTPUT,
        "total_tokens": INPUT + CACHE_READ + OUTPUT,
        "prompt_tokens_details": {"cached_tokens": CACHE_READ}})
}

/// The streamed answer.
pub fn stream(turn: &Turn, model: &str, n: u64) -> Response {
    let chunk = |choices: Value| {
        json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion.chunk", "created": 1,
            "model": model, "choices": choices})
    };
    let mut chunks = vec![chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": ""},
        "finish_reason": null}]),
    )];
    let finish = match turn {
        Turn::Tool { name, input } => {
            let args = input.to_string();
            let (a, b) = args.split_at(args.len() / 2);
            chunks.push(chunk(
                json!([{"index": 0, "delta": {"tool_calls": [{"index": 0,
                "id": format!("call_{n}"), "type": "function",
                "function": {"name": name, "arguments": a}}]}, "finish_reason": null}]),
            ));
            chunks.push(chunk(
                json!([{"index": 0, "delta": {"tool_calls": [{"index": 0,
                "function": {"arguments": b}}]}, "finish_reason": null}]),
            ));
            "tool_calls"
        }
        Turn::Text(text) | Turn::Status(_, text) => {
            chunks.push(chunk(
                json!([{"index": 0, "delta": {"content": text}, "finish_reason": null}]),
            ));
            "stop"
        }
    };
    chunks.push(chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
    ));
    let mut last = chunk(json!([]));
    last["usage"] = usage();
    chunks.push(last);
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    ([("content-type", "text/event-stream")], body).into_response()
}

/// The same answer, not streamed.
pub fn completion(turn: &Turn, model: &str, n: u64) -> Value {
    let text = match turn {
        Turn::Text(text) | Turn::Status(_, text) => text.clone(),
        Turn::Tool { .. } => String::new(),
    };
    json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"}], "usage": usage()})
}
