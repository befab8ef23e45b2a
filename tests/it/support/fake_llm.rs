//! A fake LLM server on 127.0.0.1:0 speaking both wire formats
//! (`POST /v1/chat/completions` for openai with base URL `<addr>/v1`, and
//! `POST /v1/messages` for anthropic with base URL `<addr>`). Each test
//! scripts the replies in order and reads back every request it received.
//! An unscripted request gets a 500 naming the problem, so a test that asks
//! more than it expected fails loudly.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

/// One scripted reply.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A structured answer, wrapped in the wire format of the route asked.
    Answer(Value),
    /// Content that is not JSON (openai: message content; anthropic: tool input as a string).
    NotJson(String),
    /// The answer cut off at the token limit.
    Truncated,
    /// The model refuses.
    Refusal(String),
    /// An HTTP error with a JSON body, optionally with `retry-after`.
    Status {
        status: u16,
        message: String,
        retry_after: Option<String>,
    },
    /// A 200 whose body is not JSON at all.
    GarbageBody(String),
    /// A 200 whose body is an error, not an answer (a proxy or a
    /// compatible server failing upstream).
    ErrorBody(String),
    /// A structured answer wrapped in a Markdown code fence (openai: the
    /// message content; anthropic has no such form and gets the answer).
    Fenced(Value),
    /// Wait, then give the inner reply.
    Slow(Duration, Box<Reply>),
}

impl Reply {
    /// A completion-check answer.
    pub fn closer(all_complete: bool, confidence: f64, pending: &[&str]) -> Reply {
        Reply::Answer(json!({
            "checklist": [{"id": "impl", "description": "implemented", "completed": all_complete, "evidence": "diff"}],
            "allComplete": all_complete,
            "summary": if all_complete { "all done" } else { "work left" },
            "pendingActions": pending,
            "confidence": confidence,
        }))
    }

    /// HTTP `status` with a provider-style error body.
    pub fn status(status: u16, message: &str) -> Reply {
        Reply::Status {
            status,
            message: message.to_owned(),
            retry_after: None,
        }
    }
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// `/v1/chat/completions` or `/v1/messages`.
    pub path: String,
    /// The headers.
    pub headers: HeaderMap,
    /// The JSON body (`null` if it was not JSON).
    pub body: Value,
}

impl Recorded {
    /// The user prompt, in either format.
    pub fn prompt(&self) -> String {
        let messages = self.body["messages"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        messages
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    requests: Vec<Recorded>,
}

/// The running server.
pub struct FakeLlm {
    addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    _task: tokio::task::JoinHandle<()>,
}

impl FakeLlm {
    /// Starts a server on a free port.
    pub async fn start() -> FakeLlm {
        let script = Arc::new(Mutex::new(Script::default()));
        let app = Router::new()
            .route("/v1/chat/completions", post(openai))
            .route("/v1/messages", post(anthropic))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        FakeLlm {
            addr,
            script,
            _task: task,
        }
    }

    /// The base URL for the openai backend.
    pub fn openai_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The base URL for the anthropic backend.
    pub fn anthropic_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues replies, served in order.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.script.lock().unwrap().replies.extend(replies);
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.script.lock().unwrap().requests.clone()
    }

    /// Replies not yet served.
    pub fn unused(&self) -> usize {
        self.script.lock().unwrap().replies.len()
    }

    /// Drops the replies not yet served (a story's next act scripts anew).
    pub fn forget_unused(&self) {
        self.script.lock().unwrap().replies.clear();
    }
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        self._task.abort();
    }
}

#[derive(Clone, Copy)]
enum Wire {
    OpenAi,
    Anthropic,
}

async fn openai(State(s): State<Arc<Mutex<Script>>>, headers: HeaderMap, body: Bytes) -> Response {
    serve(s, "/v1/chat/completions", headers, body, Wire::OpenAi).await
}

async fn anthropic(
    State(s): State<Arc<Mutex<Script>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    serve(s, "/v1/messages", headers, body, Wire::Anthropic).await
}

async fn serve(
    s: Arc<Mutex<Script>>,
    path: &str,
    headers: HeaderMap,
    body: Bytes,
    wire: Wire,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let tool = body["tools"][0]["name"]
        .as_str()
        .unwrap_or("tool")
        .to_owned();
    let reply = {
        let mut script = s.lock().unwrap();
        script.requests.push(Recorded {
            path: path.to_owned(),
            headers,
            body,
        });
        script.replies.pop_front()
    };
    let Some(mut reply) = reply else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "fake LLM: no scripted reply left",
        )
            .into_response();
    };
    while let Reply::Slow(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    render(reply, wire, &tool)
}

fn render(reply: Reply, wire: Wire, tool: &str) -> Response {
    let usage_openai = json!({"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120});
    let usage_anthropic = json!({"input_tokens": 100, "output_tokens": 20});
    let ok = |v: Value| (StatusCode::OK, axum::Json(v)).into_response();
    match (reply, wire) {
        (Reply::Answer(v), Wire::OpenAi) => {
            ok(json!({"id": "c1", "model": "fake-gpt", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": v.to_string(), "refusal": null}, "finish_reason": "stop"}],
            "usage": usage_openai}))
        }
        (Reply::Answer(v), Wire::Anthropic) => ok(
            json!({"id": "m1", "model": "fake-claude", "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": tool, "input": v}],
            "stop_reason": "tool_use", "usage": usage_anthropic}),
        ),
        (Reply::NotJson(t), Wire::OpenAi) => ok(json!({"model": "fake-gpt", "choices": [
            {"message": {"role": "assistant", "content": t}, "finish_reason": "stop"}], "usage": usage_openai})),
        (Reply::NotJson(t), Wire::Anthropic) => ok(json!({"model": "fake-claude",
            "content": [{"type": "tool_use", "id": "t1", "name": tool, "input": t}],
            "stop_reason": "tool_use", "usage": usage_anthropic})),
        (Reply::Truncated, Wire::OpenAi) => ok(json!({"model": "fake-gpt", "choices": [
            {"message": {"role": "assistant", "content": "{\"checklist\": ["}, "finish_reason": "length"}], "usage": usage_openai})),
        (Reply::Truncated, Wire::Anthropic) => ok(json!({"model": "fake-claude",
            "content": [{"type": "text", "text": "I was saying"}], "stop_reason": "max_tokens", "usage": usage_anthropic})),
        (Reply::Refusal(r), Wire::OpenAi) => ok(json!({"model": "fake-gpt", "choices": [
            {"message": {"role": "assistant", "content": null, "refusal": r}, "finish_reason": "stop"}], "usage": usage_openai})),
        (Reply::Refusal(r), Wire::Anthropic) => ok(json!({"model": "fake-claude",
            "content": [{"type": "text", "text": r}], "stop_reason": "refusal", "usage": usage_anthropic})),
        (
            Reply::Status {
                status,
                message,
                retry_after,
            },
            _,
        ) => {
            let code = StatusCode::from_u16(status).unwrap();
            let body =
                json!({"type": "error", "error": {"type": "fake_error", "message": message}});
            let mut response = (code, axum::Json(body)).into_response();
            if let Some(ra) = retry_after {
                response
                    .headers_mut()
                    .insert("retry-after", ra.parse().unwrap());
            }
            response
        }
        (Reply::GarbageBody(text), _) => (StatusCode::OK, text).into_response(),
        (Reply::ErrorBody(message), _) => ok(json!({
            "error": {"message": message, "type": "upstream_error", "code": 502}
        })),
        (Reply::Fenced(v), Wire::OpenAi) => {
            let fenced = format!("```json\n{v:#}\n```");
            ok(json!({"id": "c1", "model": "fake-gpt", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": fenced, "refusal": null}, "finish_reason": "stop"}],
            "usage": usage_openai}))
        }
        (Reply::Fenced(v), Wire::Anthropic) => render(Reply::Answer(v), Wire::Anthropic, tool),
        (Reply::Slow(..), _) => unreachable!("unwrapped in serve"),
    }
}
