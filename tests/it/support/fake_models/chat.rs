//! OpenAI Chat Completions, as OpenCode 1.18 (its bundled
//! `@ai-sdk/openai-compatible`) asks for it: `POST {baseURL}/chat/completions`
//! with `"stream": true` and `"stream_options": {"include_usage": true}`,
//! answered with `data: {chat.completion.chunk}` lines — a role chunk,
//! `delta.content` or `delta.tool_calls` (the first piece carries the call's
//! `id`, `type` and `function.name`, the following pieces only
//! `function.arguments`), a chunk with the `finish_reason` (`tool_calls` or
//! `stop`), a usage chunk with empty `choices`, then `data: [DONE]`.
//!
//! Usage as OpenAI reports it: cached tokens counted inside
//! `prompt_tokens` and repeated in `prompt_tokens_details.cached_tokens`.
//! OpenCode's `step_finish` then says `input` = prompt − cached,
//! `cache.read` = cached, `output` = completion − reasoning, and
//! `cache.write` = 0 (this wire has no cache-write field that the
//! openai-compatible provider reads).
//!
//! OpenCode's side request, the session title (`"You are a title
//! generator…"` as system message), is streamed too but offers no `tools`;
//! `FakeModel` answers it without consuming the script.
//! A request without `"stream": true` gets one `chat.completion`.

use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::{CACHE_READ, INPUT, OUTPUT, Turn};

/// OpenCode's file tool: `write` creates or overwrites `path` (relative
/// paths resolve against the working directory) with `content`.
pub fn write_file(path: &str, content: &str) -> Turn {
    Turn::tool("write", json!({"filePath": path, "content": content}))
}

/// OpenCode's `edit`: replaces the one occurrence of `old` in `path` by
/// `new` (no earlier `read` needed in 1.18.33).
pub fn edit_file(path: &str, old: &str, new: &str) -> Turn {
    Turn::tool(
        "edit",
        json!({"filePath": path, "oldString": old, "newString": new}),
    )
}

/// OpenCode's shell tool: `bash` runs `command` in the working directory.
/// Its schema is `{command, timeout?, workdir?}`; the `description` that
/// earlier releases required is accepted and ignored.
pub fn shell(command: &str) -> Turn {
    Turn::tool(
        "bash",
        json!({"command": command, "description": "Run a command"}),
    )
}

/// The usage every answer reports.
pub fn usage() -> Value {
    json!({"prompt_tokens": INPUT + CACHE_READ, "completion_tokens": OUTPUT,
        "total_tokens": INPUT + CACHE_READ + OUTPUT,
        "prompt_tokens_details": {"cached_tokens": CACHE_READ},
        "completion_tokens_details": {"reasoning_tokens": 0}})
}

/// `text` cut in up to three pieces (on character boundaries), the way a
/// model streams it.
fn pieces(text: &str) -> Vec<&str> {
    let cuts: Vec<usize> = text.char_indices().map(|(i, _)| i).collect();
    let at = |k: usize| cuts.get(cuts.len() * k / 3).copied().unwrap_or(text.len());
    let (a, b) = (at(1), at(2));
    [&text[..a], &text[a..b], &text[b..]]
        .into_iter()
        .filter(|p| !p.is_empty())
        .collect()
}

/// The streamed answer.
pub fn stream(turn: &Turn, model: &str, n: u64) -> Response {
    let chunk = |choices: Value| {
        json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion.chunk", "created": 1,
            "model": model, "choices": choices})
    };
    let delta = |delta: Value| chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]));
    let mut chunks = vec![delta(json!({"role": "assistant", "content": ""}))];
    let finish = match turn {
        Turn::Tool { name, input } => {
            let args = input.to_string();
            let mut parts = pieces(&args).into_iter();
            chunks.push(delta(
                json!({"tool_calls": [{"index": 0, "id": format!("call_{n}"),
                "type": "function",
                "function": {"name": name, "arguments": parts.next().unwrap_or("")}}]}),
            ));
            for part in parts {
                chunks.push(delta(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}),
                ));
            }
            "tool_calls"
        }
        Turn::Text(text) | Turn::Status(_, text) => {
            for part in pieces(text) {
                chunks.push(delta(json!({"content": part})));
            }
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
    let (message, finish) = match turn {
        Turn::Text(text) | Turn::Status(_, text) => {
            (json!({"role": "assistant", "content": text}), "stop")
        }
        Turn::Tool { name, input } => (
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": format!("call_{n}"), "type": "function",
                "function": {"name": name, "arguments": input.to_string()}}]}),
            "tool_calls",
        ),
    };
    json!({"id": format!("chatcmpl-{n}"), "object": "chat.completion", "created": 1, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage()})
}
