//! Faults the fake can inject, for the retry tests: the next N requests
//! (optionally only those with a given method and path prefix) answer with a
//! server error, a rate limit, or hang, or are carried out and then answered
//! with a server error or not at all. Injected answers are recorded like
//! any other request.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// What a faulty answer looks like.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// A bare 5xx.
    Status(u16),
    /// 403 "You have exceeded a secondary rate limit" with `retry-after`.
    SecondaryRateLimit { retry_after_secs: u64 },
    /// 403 secondary rate limit naming no time at all.
    SecondaryRateLimitNoHeader,
    /// 429 with `retry-after`.
    TooManyRequests { retry_after_secs: u64 },
    /// 403 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset`.
    PrimaryRateLimit { reset_epoch_secs: u64 },
    /// HTTP 200 with a GraphQL `errors` entry of this `type` (e.g.
    /// `FORBIDDEN`, `RATE_LIMITED`), as GitHub's GraphQL API answers.
    GraphQlError { kind: String, message: String },
    /// Receive the request, then answer nothing for this long (a dropped
    /// answer as the client sees it, when its timeout is shorter).
    Hang(Duration),
    /// Carry the request out, then answer this 5xx instead of its answer:
    /// GitHub does this when its front end times out on a request the API
    /// behind it completed (probot/probot#921: a comment posted four times).
    AfterApplying(u16),
    /// Carry the request out, then answer nothing for this long: the
    /// moment a crash loses the answer to a write GitHub made.
    HangAfterApplying(Duration),
    /// Wait this long, then carry the request out and answer as usual: a
    /// slow answer, which writes made meanwhile overtake, carried out even
    /// when the client stops waiting for it.
    Delay(Duration),
    /// HTTP 200 whose body streams this many bytes (no `content-length`):
    /// a broken proxy or a hostile host.
    HugeBody(usize),
    /// HTTP 200 with this body instead of the answer: a read GitHub serves
    /// from a replica that has not caught up with a write (the body taken
    /// before the write).
    Stale(serde_json::Value),
}

impl Fault {
    /// Applies to the next `n` matching requests.
    pub fn times(self, n: u32) -> FaultRule {
        FaultRule {
            fault: self,
            method: None,
            path_prefix: None,
            path_exact: false,
            body_contains: None,
            remaining: n,
        }
    }
}

/// A fault and the requests it applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRule {
    pub fault: Fault,
    pub method: Option<String>,
    pub path_prefix: Option<String>,
    /// The path must be `path_prefix` itself, not only start with it.
    pub path_exact: bool,
    pub body_contains: Option<String>,
    pub remaining: u32,
}

impl From<Fault> for FaultRule {
    fn from(fault: Fault) -> Self {
        fault.times(1)
    }
}

impl FaultRule {
    /// Only requests with this method (`"POST"`).
    pub fn method(mut self, method: &str) -> Self {
        self.method = Some(method.to_owned());
        self
    }

    /// Only requests whose path starts with this.
    pub fn path(mut self, prefix: &str) -> Self {
        self.path_prefix = Some(prefix.to_owned());
        self
    }

    /// Only requests to this very path (a pull request, not its files).
    pub fn only_path(mut self, path: &str) -> Self {
        self.path_prefix = Some(path.to_owned());
        self.path_exact = true;
        self
    }

    /// Only requests whose body contains this (one comment among others).
    pub fn body(mut self, text: &str) -> Self {
        self.body_contains = Some(text.to_owned());
        self
    }

    pub fn matches(&self, method: &str, path: &str, body: &str) -> bool {
        self.remaining > 0
            && self
                .method
                .as_deref()
                .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && self
                .path_prefix
                .as_deref()
                .is_none_or(|p| path == p || !self.path_exact && path.starts_with(p))
            && self
                .body_contains
                .as_deref()
                .is_none_or(|text| body.contains(text))
    }
}

/// Takes one use of the first matching rule.
pub fn take(rules: &mut Vec<FaultRule>, method: &str, path: &str, body: &str) -> Option<Fault> {
    let rule = rules.iter_mut().find(|r| r.matches(method, path, body))?;
    rule.remaining -= 1;
    let fault = rule.fault.clone();
    rules.retain(|r| r.remaining > 0);
    Some(fault)
}

/// The answer a fault gives (for [`Fault::AfterApplying`], what replaces the
/// real answer).
pub async fn respond(fault: Fault) -> Response {
    match fault {
        Fault::Status(code) | Fault::AfterApplying(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            (status, axum::Json(json!({ "message": "Server Error" }))).into_response()
        }
        Fault::SecondaryRateLimit { retry_after_secs } => {
            let mut resp = secondary_limit(StatusCode::FORBIDDEN);
            set(&mut resp, "retry-after", &retry_after_secs.to_string());
            resp
        }
        Fault::SecondaryRateLimitNoHeader => secondary_limit(StatusCode::FORBIDDEN),
        Fault::TooManyRequests { retry_after_secs } => {
            let mut resp = secondary_limit(StatusCode::TOO_MANY_REQUESTS);
            set(&mut resp, "retry-after", &retry_after_secs.to_string());
            resp
        }
        Fault::PrimaryRateLimit { reset_epoch_secs } => {
            let body = json!({ "message": "API rate limit exceeded for installation ID 1." });
            let mut resp = (StatusCode::FORBIDDEN, axum::Json(body)).into_response();
            set(&mut resp, "x-ratelimit-remaining", "0");
            set(
                &mut resp,
                "x-ratelimit-reset",
                &reset_epoch_secs.to_string(),
            );
            resp
        }
        Fault::Stale(body) => (StatusCode::OK, axum::Json(body)).into_response(),
        Fault::GraphQlError { kind, message } => {
            let body = json!({ "data": null, "errors": [{ "type": kind, "message": message }] });
            (StatusCode::OK, axum::Json(body)).into_response()
        }
        Fault::HugeBody(bytes) => {
            let chunk = axum::body::Bytes::from(vec![b' '; 1 << 20]);
            let chunks = bytes.div_ceil(1 << 20);
            let stream = futures_util::stream::iter(
                (0..chunks).map(move |_| Ok::<_, std::io::Error>(chunk.clone())),
            );
            (StatusCode::OK, axum::body::Body::from_stream(stream)).into_response()
        }
        Fault::Hang(how_long) | Fault::HangAfterApplying(how_long) => {
            tokio::time::sleep(how_long).await;
            (StatusCode::GATEWAY_TIMEOUT, "hung").into_response()
        }
        // Answered by the handler, after the wait (`routes::answer`).
        Fault::Delay(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

fn secondary_limit(status: StatusCode) -> Response {
    let body = json!({
        "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
        "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api"
    });
    (status, axum::Json(body)).into_response()
}

fn set(resp: &mut Response, name: &'static str, value: &str) {
    if let Ok(v) = HeaderValue::from_str(value) {
        resp.headers_mut().insert(name, v);
    }
}
