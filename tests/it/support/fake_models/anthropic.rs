//! Anthropic Messages, as Claude Code 2.1.330 asks for it: `POST
//! /v1/messages?beta=true` with `"stream": true` (the SDK appends
//! `/v1/messages` to `ANTHROPIC_BASE_URL`, so the base is the server's root).
//! The streamed answer: `message_start` (its usage), one content block —
//! `text_delta`s, or a `tool_use` whose input arrives as `input_json_delta`
//! pieces —, `content_block_stop`, `message_delta` (stop reason and the
//! final usage, all four counts as the real API sends them), `message_stop`.
//!
//! What Claude Code makes of it (see /work/research/claude.md):
//! - its `assistant` events carry `message_start`'s usage (one event per
//!   content block); the `result` adds up the final usage of every call,
//!   where `message_delta`'s counts replace `message_start`'s;
//! - a stream that ends before `message_stop` is asked again with
//!   `"stream": false` (and `max_tokens` 64000): [`message`] answers that,
//!   and the cut call's `message_start` usage counts too;
//! - every main-loop request offers tools (`Write`, `Edit`, `Bash`, …); with
//!   `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` nothing else is asked (no
//!   title, no quota probe, no `count_tokens`); without it there is also a
//!   `HEAD /api/hello` at the base URL, whose answer does not matter.

use serde_json::{Value, json};

use super::{CACHE_READ, CACHE_WRITE, INPUT, OUTPUT, Turn};

/// Claude Code's `Write`: creates or overwrites `file_path` (relative paths
/// resolve against the working directory) with `content`.
pub fn write_file(path: &str, content: &str) -> Turn {
    Turn::tool("Write", json!({"file_path": path, "content": content}))
}

/// Claude Code's `Edit`: replaces the one occurrence of `old` in `path`
/// with `new` (`replace_all` for every occurrence). 2.1.330 edits a file the
/// conversation has not read; an `old` not in the file is an error result
/// ("<tool_use_error>String to replace not found in file.").
pub fn edit_file(path: &str, old: &str, new: &str) -> Turn {
    Turn::tool(
        "Edit",
        json!({"file_path": path, "old_string": old, "new_string": new}),
    )
}

/// Claude Code's `Read` of a whole file.
pub fn read_file(path: &str) -> Turn {
    Turn::tool("Read", json!({"file_path": path}))
}

/// Claude Code's `Bash`: runs `command` with bash in the working directory
/// (`description` is what the tool shows; `timeout` in ms, at most 600000).
pub fn shell(command: &str) -> Turn {
    Turn::tool(
        "Bash",
        json!({"command": command, "description": "Run a command"}),
    )
}

/// The token counts one answer reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub cache_write: u64,
    pub cache_read: u64,
    pub output: u64,
}

impl Default for Usage {
    /// The distinctive counts every scripted answer reports.
    fn default() -> Usage {
        Usage {
            input: INPUT,
            cache_write: CACHE_WRITE,
            cache_read: CACHE_READ,
            output: OUTPUT,
        }
    }
}

impl Usage {
    /// The API's `usage` object with `output` output tokens.
    fn json(&self, output: u64) -> Value {
        json!({
            "input_tokens": self.input,
            "cache_creation_input_tokens": self.cache_write,
            "cache_read_input_tokens": self.cache_read,
            "output_tokens": output,
        })
    }
}

/// The streamed answer, with the default usage.
pub fn events(turn: &Turn, model: &str, n: u64) -> Vec<(&'static str, Value)> {
    events_with(turn, model, n, Usage::default())
}

/// The beginning of an answer, up to its first delta: what a stream cut off
/// mid-answer has delivered.
pub fn started(turn: &Turn, model: &str, n: u64, usage: Usage) -> Vec<(&'static str, Value)> {
    let mut events = opening(turn, model, n, usage);
    events.truncate(3);
    events
}

/// `message_start`, `content_block_start` and every delta.
fn opening(turn: &Turn, model: &str, n: u64, usage: Usage) -> Vec<(&'static str, Value)> {
    let (block, deltas) = match turn {
        Turn::Tool { name, input } => {
            // The input's JSON in two pieces, as the API streams it.
            let text = input.to_string();
            let mut cut = text.len() / 2;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            let (a, b) = text.split_at(cut);
            let delta = |piece: &str| json!({"type": "input_json_delta", "partial_json": piece});
            (
                json!({"type": "tool_use", "id": format!("toolu_{n}"), "name": name, "input": {}}),
                vec![delta(a), delta(b)],
            )
        }
        Turn::Text(text) | Turn::Status(_, text) => (
            json!({"type": "text", "text": ""}),
            vec![json!({"type": "text_delta", "text": text})],
        ),
    };
    let mut events = vec![
        (
            "message_start",
            json!({"type": "message_start", "message": {
                "id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null, "usage": usage.json(1)}}),
        ),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": block}),
        ),
    ];
    events.extend(deltas.into_iter().map(|delta| {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        )
    }));
    events
}

/// The streamed answer reporting `usage`.
pub fn events_with(turn: &Turn, model: &str, n: u64, usage: Usage) -> Vec<(&'static str, Value)> {
    let mut events = opening(turn, model, n, usage);
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push((
        "message_delta",
        json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason(turn), "stop_sequence": null},
            "usage": usage.json(usage.output)}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    events
}

fn stop_reason(turn: &Turn) -> &'static str {
    match turn {
        Turn::Tool { .. } => "tool_use",
        Turn::Text(_) | Turn::Status(..) => "end_turn",
    }
}

/// The same answer, not streamed, with the default usage.
pub fn message(turn: &Turn, model: &str, n: u64) -> Value {
    message_with(turn, model, n, Usage::default())
}

/// The same answer, not streamed, reporting `usage`.
pub fn message_with(turn: &Turn, model: &str, n: u64, usage: Usage) -> Value {
    let content = match turn {
        Turn::Tool { name, input } => {
            json!([{"type": "tool_use", "id": format!("toolu_{n}"), "name": name, "input": input}])
        }
        Turn::Text(text) | Turn::Status(_, text) => json!([{"type": "text", "text": text}]),
    };
    json!({"id": format!("msg_{n}"), "type": "message", "role": "assistant", "model": model,
        "content": content, "stop_reason": stop_reason(turn), "stop_sequence": null,
        "usage": usage.json(usage.output)})
}

/// The API's error body for an HTTP `status` (`{"type": "error", "error":
/// {"type", "message"}}`, the type as the API names it for that status).
pub fn error(status: u16, message: &str) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

/// Whether `request` is a turn of the agent's main loop: Claude Code
/// offers its tools on every one; anything else (a compaction summary, a
/// `count_tokens` body) leaves the script alone.
pub fn is_main_loop(request: &Value) -> bool {
    request
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
}
