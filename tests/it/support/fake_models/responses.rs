//! OpenAI Responses, as Codex 0.169 parses it (`codex-api` `sse/responses.rs`):
//! `response.created`, `response.output_item.added`,
//! `response.output_text.delta` (messages), `response.output_item.done`
//! (a `message`, a `function_call` or a `custom_tool_call`),
//! `response.completed` with usage (cached tokens counted inside
//! `input_tokens`, as OpenAI does). Codex needs `response.completed` before
//! the stream ends; without it, it retries ("Reconnecting... 1/5").
//!
//! A tool whose input is a JSON string is a custom (freeform) tool and is
//! called with a `custom_tool_call` carrying the raw text — Codex's
//! `apply_patch` for the catalogued models (`gpt-5.5`, …); any other input is
//! a function call whose `arguments` is the JSON as a string (`exec_command`).
//! A `function_call` to `apply_patch` is refused by Codex ("incompatible
//! payload"), so the shape matters.

use serde_json::{Value, json};

use super::{CACHE_READ, INPUT, OUTPUT, Turn};

/// Codex's file tool: a patch adding `path` with `content` (relative paths
/// resolve against the working directory).
pub fn write_file(path: &str, content: &str) -> Turn {
    let mut patch = format!("*** Begin Patch\n*** Add File: {path}\n");
    for line in content.lines() {
        patch.push('+');
        patch.push_str(line);
        patch.push('\n');
    }
    patch.push_str("*** End Patch\n");
    apply_patch(&patch)
}

/// Codex's `apply_patch` with a patch in its own format (`*** Begin Patch`,
/// `*** Update File: …`, `@@`, `-`/`+` lines, `*** End Patch`).
pub fn apply_patch(patch: &str) -> Turn {
    Turn::tool("apply_patch", Value::String(patch.to_owned()))
}

/// Codex's shell tool: `exec_command` runs `cmd` with `bash -lc` in the
/// working directory.
pub fn shell(cmd: &str) -> Turn {
    Turn::tool("exec_command", json!({ "cmd": cmd }))
}

/// The usage every answer reports.
pub fn usage() -> Value {
    json!({
        "input_tokens": INPUT + CACHE_READ,
        "input_tokens_details": {"cached_tokens": CACHE_READ},
        "output_tokens": OUTPUT,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": INPUT + CACHE_READ + OUTPUT,
    })
}

/// The output item a turn produces.
fn item(turn: &Turn, n: u64) -> Value {
    match turn {
        Turn::Tool {
            name,
            input: Value::String(text),
        } => json!({"type": "custom_tool_call", "id": format!("ctc_{n}"),
            "call_id": format!("call_{n}"), "name": name, "input": text,
            "status": "completed"}),
        Turn::Tool { name, input } => json!({"type": "function_call", "id": format!("fc_{n}"),
            "call_id": format!("call_{n}"), "name": name, "arguments": input.to_string(),
            "status": "completed"}),
        Turn::Text(text) | Turn::Status(_, text) => json!({"type": "message",
            "id": format!("msg_{n}"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}),
    }
}

/// The start of an answer, up to its first text delta: what a stream cut
/// off mid-response has delivered.
pub fn started(turn: &Turn, n: u64) -> Vec<(&'static str, Value)> {
    let id = format!("resp_{n}");
    let item = item(turn, n);
    let added = match turn {
        // A message starts empty; its text arrives as deltas.
        Turn::Text(_) | Turn::Status(..) => {
            let mut empty = item.clone();
            empty["status"] = json!("in_progress");
            empty["content"] = json!([]);
            empty
        }
        Turn::Tool { .. } => item.clone(),
    };
    let mut events = vec![
        (
            "response.created",
            json!({"type": "response.created",
            "response": {"id": id, "object": "response", "status": "in_progress", "output": []}}),
        ),
        (
            "response.output_item.added",
            json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
        ),
    ];
    if let Turn::Text(text) = turn {
        events.push((
            "response.output_text.delta",
            json!({"type": "response.output_text.delta",
            "item_id": format!("msg_{n}"), "output_index": 0, "content_index": 0, "delta": text}),
        ));
    }
    events
}

/// The streamed answer.
pub fn events(turn: &Turn, n: u64) -> Vec<(&'static str, Value)> {
    let item = item(turn, n);
    let mut events = started(turn, n);
    events.push((
        "response.output_item.done",
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
    ));
    events.push((
        "response.completed",
        json!({"type": "response.completed", "response": {
            "id": format!("resp_{n}"), "object": "response", "status": "completed",
            "output": [item], "usage": usage()}}),
    ));
    events
}
