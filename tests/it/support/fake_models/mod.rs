//! Scripted model servers speaking the streaming wire formats the real
//! agent CLIs use, so the tools themselves can be driven in tests:
//! Anthropic Messages with SSE (Claude Code), OpenAI Responses with SSE
//! (Codex) and OpenAI Chat Completions with streamed tool calls (OpenCode).
//!
//! A test scripts the model's turns — a call of one of the tool's own tools
//! (its real name and input shape), a final text, an HTTP error — and reads
//! back every request. Each request of the agent's main loop (one that
//! offers tools) takes the next turn; a request beyond the script gets a
//! final text, so the tool ends cleanly. Side requests (title generation)
//! get a short text and leave the script alone.
//!
//! Every answer reports the same distinctive usage: 1,000 fresh input
//! tokens, 3,000 written to the prompt cache (Anthropic only), 40,000 read
//! from it and 200 output tokens.

#![allow(dead_code)]

pub mod anthropic;
pub mod chat;
pub mod responses;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

/// Fresh (uncached) input tokens per answer.
pub const INPUT: u64 = 1_000;
/// Tokens written to the prompt cache per answer (Anthropic).
pub const CACHE_WRITE: u64 = 3_000;
/// Tokens read from the prompt cache per answer.
pub const CACHE_READ: u64 = 40_000;
/// Output tokens per answer.
pub const OUTPUT: u64 = 200;

/// One scripted model turn.
#[derive(Debug, Clone)]
pub enum Turn {
    /// The model calls one of the tool's own tools.
    Tool { name: String, input: Value },
    /// The model's final answer.
    Text(String),
    /// An HTTP error with a provider-style body.
    Status(u16, String),
}

impl Turn {
    pub fn tool(name: &str, input: Value) -> Turn {
        Turn::Tool {
            name: name.to_owned(),
            input,
        }
    }

    pub fn text(text: &str) -> Turn {
        Turn::Text(text.to_owned())
    }

    /// The credentials refused.
    pub fn unauthorized() -> Turn {
        Turn::Status(401, "Incorrect API key provided".to_owned())
    }
}

/// Which wire format a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wire {
    Anthropic,
    Responses,
    Chat,
}

struct Shared {
    wire: Wire,
    script: Mutex<VecDeque<Turn>>,
    /// Turns that repeat forever once the script is used up (e.g. 401s).
    repeat: Mutex<Option<Turn>>,
    requests: Mutex<Vec<Value>>,
    served: Mutex<u64>,
}

/// A scripted model server on 127.0.0.1.
pub struct FakeModel {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FakeModel {
    /// Starts a server answering with `script`, in order.
    pub async fn start(wire: Wire, script: Vec<Turn>) -> FakeModel {
        let shared = Arc::new(Shared {
            wire,
            script: Mutex::new(script.into()),
            repeat: Mutex::new(None),
            requests: Mutex::new(Vec::new()),
            served: Mutex::new(0),
        });
        let app = Router::new()
            .route("/v1/messages", post(answer))
            .route("/v1/messages/count_tokens", post(count_tokens))
            .route("/v1/responses", post(answer))
            .route("/v1/chat/completions", post(answer))
            .route("/v1/models", get(models))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeModel { addr, shared }
    }

    /// Answers every request with `turn` once the script is used up.
    pub fn then_always(&self, turn: Turn) {
        *self.shared.repeat.lock().unwrap() = Some(turn);
    }

    /// Stops answering with the repeated turn: the provider is back.
    pub fn stop_repeating(&self) {
        *self.shared.repeat.lock().unwrap() = None;
    }

    /// Adds turns to the script.
    pub fn push(&self, turns: impl IntoIterator<Item = Turn>) {
        self.shared.script.lock().unwrap().extend(turns);
    }

    /// Where the tool is pointed: the root for Anthropic, `/v1` for OpenAI.
    pub fn base_url(&self) -> String {
        match self.shared.wire {
            Wire::Anthropic => format!("http://{}", self.addr),
            Wire::Responses | Wire::Chat => format!("http://{}/v1", self.addr),
        }
    }

    /// Every request body received, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The requests of the agent's main loop (those offering tools).
    pub fn main_requests(&self) -> Vec<Value> {
        self.requests().into_iter().filter(offers_tools).collect()
    }

    /// How many scripted answers were given.
    pub fn served(&self) -> u64 {
        *self.shared.served.lock().unwrap()
    }
}

fn offers_tools(request: &Value) -> bool {
    request
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty())
}

async fn answer(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.requests.lock().unwrap().push(request.clone());
    let turn = if offers_tools(&request) {
        *shared.served.lock().unwrap() += 1;
        let next = shared.script.lock().unwrap().pop_front();
        next.or_else(|| shared.repeat.lock().unwrap().clone())
            .unwrap_or_else(|| Turn::text("(script exhausted)"))
    } else {
        Turn::text("Title")
    };
    if let Turn::Status(status, message) = &turn {
        return error(shared.wire, *status, message);
    }
    let streaming = request.get("stream").and_then(Value::as_bool) == Some(true);
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("test-model");
    let n = *shared.served.lock().unwrap();
    match (shared.wire, streaming) {
        (Wire::Anthropic, true) => sse(anthropic::events(&turn, model, n)),
        (Wire::Anthropic, false) => axum::Json(anthropic::message(&turn, model, n)).into_response(),
        (Wire::Responses, _) => sse(responses::events(&turn, n)),
        (Wire::Chat, true) => chat::stream(&turn, model, n),
        (Wire::Chat, false) => axum::Json(chat::completion(&turn, model, n)).into_response(),
    }
}

/// An HTTP error as the provider words it: Anthropic's error types
/// (`authentication_error`, `overloaded_error`, `rate_limit_error`,
/// `api_error`) or OpenAI's (`invalid_api_key`, `server_error`). A 429 or
/// 5xx says how soon to retry (`retry-after-ms`, which OpenCode honours),
/// so a tool's own retries stay quick.
fn error(wire: Wire, status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = match (wire, status) {
        (Wire::Anthropic, 401 | 403) => "authentication_error",
        (Wire::Anthropic, 529) => "overloaded_error",
        (Wire::Anthropic, 429) => "rate_limit_error",
        (Wire::Anthropic, _) => "api_error",
        (_, 401 | 403) => "invalid_api_key",
        (_, _) => "server_error",
    };
    let body = match wire {
        Wire::Anthropic => json!({"type": "error", "error": {"type": body, "message": message}}),
        _ if body == "invalid_api_key" => {
            json!({"error": {"message": message, "type": "invalid_request_error", "code": body}})
        }
        _ => json!({"error": {"message": message, "type": body, "code": null}}),
    };
    match status {
        429 | 500.. => (code, [("retry-after-ms", "10")], axum::Json(body)).into_response(),
        _ => (code, axum::Json(body)).into_response(),
    }
}

/// `event:`/`data:` pairs as one SSE body.
fn sse(events: Vec<(&'static str, Value)>) -> Response {
    let body: String = events
        .into_iter()
        .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
        .collect();
    ([("content-type", "text/event-stream")], body).into_response()
}

async fn count_tokens() -> axum::Json<Value> {
    axum::Json(json!({"input_tokens": INPUT}))
}

async fn models() -> axum::Json<Value> {
    axum::Json(json!({"object": "list", "data": [{"id": "test-model", "object": "model"}]}))
}
