//! The fake's HTTP surface: one file per resource, plus the gate every
//! request passes (record it, maybe inject a fault, add rate-limit headers).

mod app;
mod comments;
mod git;
mod graphql;
mod issues;
mod labels;
mod moved;
mod pulls;
pub(super) mod push_rules;
mod repos;
mod reviews;

use std::sync::{Arc, Mutex, MutexGuard};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State as AxumState};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, delete, get, post};
use serde_json::{Value, json};

use super::faults::{self, Fault};
use super::json;
use super::state::{RecordedRequest, State};

/// The shared model, as handlers see it.
pub type Fake = Arc<Mutex<State>>;

/// What a handler answers; errors are GitHub-shaped answers too.
pub type Answer = Result<Response, Response>;

pub fn lock(fake: &Fake) -> MutexGuard<'_, State> {
    fake.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The API, served at the root (like api.github.com) and under `/api/v3`
/// (like GitHub Enterprise Server); GraphQL at `/graphql` and, like GHES,
/// at `/api/graphql`.
pub fn router(fake: Fake) -> Router {
    let api = api();
    Router::new()
        .nest("/api/v3", api.clone())
        .merge(api)
        .route("/graphql", post(graphql::handle))
        .route("/api/graphql", post(graphql::handle))
        .route("/git/{owner}/{repo}/{*rest}", any(git::handle))
        .fallback(|| async { (StatusCode::NOT_FOUND, axum::Json(json::error("Not Found"))) })
        .layer(middleware::from_fn_with_state(fake.clone(), gate))
        .with_state(fake)
}

fn api() -> Router<Fake> {
    let repo = "/repos/{owner}/{repo}";
    Router::new()
        .route("/app", get(app::get_app))
        .route(
            "/app/installations/{id}/access_tokens",
            post(app::create_token),
        )
        .route(repo, get(repos::get_repo))
        .route(
            &format!("{repo}/contents/{{*path}}"),
            get(repos::get_contents),
        )
        .route(
            &format!("{repo}/collaborators/{{user}}/permission"),
            get(repos::get_permission),
        )
        .route(
            &format!("{repo}/issues/{{number}}"),
            get(issues::get_issue).patch(issues::edit_issue),
        )
        .route(
            &format!("{repo}/issues/{{number}}/labels"),
            post(issues::add_labels),
        )
        .route(
            &format!("{repo}/issues/{{number}}/labels/{{name}}"),
            delete(issues::remove_label),
        )
        .route(
            &format!("{repo}/issues/{{number}}/reactions"),
            post(issues::react),
        )
        .route(
            &format!("{repo}/issues/{{number}}/comments"),
            get(comments::list).post(comments::create),
        )
        .route(
            &format!("{repo}/issues/comments/{{id}}"),
            axum::routing::patch(comments::edit),
        )
        .route(
            &format!("{repo}/issues/comments/{{id}}/reactions"),
            post(comments::react),
        )
        .route(
            &format!("{repo}/labels"),
            get(labels::list).post(labels::create),
        )
        .route(
            &format!("{repo}/pulls"),
            get(pulls::list).post(pulls::create),
        )
        .route(
            &format!("{repo}/pulls/{{number}}"),
            get(pulls::get).patch(pulls::update),
        )
        .route(
            &format!("{repo}/pulls/{{number}}/comments"),
            get(reviews::list_comments),
        )
        .route(
            &format!("{repo}/pulls/{{number}}/comments/{{id}}/replies"),
            post(reviews::create_reply),
        )
        .route(
            &format!("{repo}/pulls/{{number}}/reviews"),
            get(reviews::list_reviews),
        )
        .route(
            &format!("{repo}/pulls/{{number}}/reviews/{{id}}/comments"),
            get(reviews::review_comments),
        )
}

/// Records the request, answers with an injected fault if one matches,
/// and stamps rate-limit headers on every answer.
async fn gate(AxumState(fake): AxumState<Fake>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let bytes = axum::body::to_bytes(body, 32 * 1024 * 1024)
        .await
        .unwrap_or_default();
    let method = parts.method.to_string();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let (fault, moved) = {
        let mut st = lock(&fake);
        let body = String::from_utf8_lossy(&bytes).into_owned();
        let fault = faults::take(&mut st.faults, &method, &path, &body);
        let moved = moved::redirect(&st, &method, &path).or_else(|| issues::deleted(&st, &path));
        st.requests.push(RecordedRequest {
            method: method.clone(),
            path: path.clone(),
            body,
            at: std::time::Instant::now(),
        });
        st.request_seen.notify_waiters();
        (fault, moved)
    };
    let mut resp = match (fault, moved) {
        (None, Some(redirect)) => redirect,
        (fault, _) => answer(fault, next, parts, bytes).await,
    };
    let (limit, remaining, reset) = {
        let mut st = lock(&fake);
        if resp.status() != StatusCode::NOT_MODIFIED {
            st.rate_limit.remaining = st.rate_limit.remaining.saturating_sub(1);
        }
        (
            st.rate_limit.limit,
            st.rate_limit.remaining,
            st.now() / 1000 + 3600,
        )
    };
    let headers = resp.headers_mut();
    for (name, value) in [
        ("x-ratelimit-limit", limit.to_string()),
        ("x-ratelimit-remaining", remaining.to_string()),
        ("x-ratelimit-reset", reset.to_string()),
        ("x-ratelimit-resource", "core".to_owned()),
    ] {
        if !headers.contains_key(name)
            && let Ok(v) = HeaderValue::from_str(&value)
        {
            headers.insert(name, v);
        }
    }
    resp
}

/// The handler's answer, or an injected fault's.
async fn answer(
    fault: Option<Fault>,
    next: Next,
    parts: axum::http::request::Parts,
    bytes: Bytes,
) -> Response {
    match fault {
        Some(fault @ (Fault::AfterApplying(_) | Fault::HangAfterApplying(_))) => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await;
            faults::respond(fault).await
        }
        Some(Fault::Delay(how_long)) => {
            // GitHub carries out a request it received even when the client
            // gives up waiting: the wait must not be cancelled with it.
            let late = tokio::spawn(async move {
                tokio::time::sleep(how_long).await;
                next.run(Request::from_parts(parts, Body::from(bytes)))
                    .await
            });
            late.await
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
        Some(fault) => faults::respond(fault).await,
        None => {
            next.run(Request::from_parts(parts, Body::from(bytes)))
                .await
        }
    }
}

/// A JSON answer.
pub fn reply(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

/// Parses a JSON request body the way GitHub does: bad JSON is a 400.
pub fn body(bytes: &Bytes) -> Result<Value, Response> {
    serde_json::from_slice(bytes).map_err(|_| {
        reply(
            StatusCode::BAD_REQUEST,
            json::error("Problems parsing JSON"),
        )
    })
}

/// GitHub's 422 with one `errors[]` entry.
pub fn invalid(resource: &str, field: &str, code: &str) -> Response {
    reply(
        StatusCode::UNPROCESSABLE_ENTITY,
        json!({
            "message": "Validation Failed",
            "errors": [{ "resource": resource, "field": field, "code": code }],
            "documentation_url": "https://docs.github.com/rest",
        }),
    )
}

/// GitHub's limits on what a write may carry, in characters: a title of
/// 256, a body of 65,536. Over them, the write is refused with a 422 (its
/// `custom` error says "is too long"), and nothing is changed.
pub fn within_limits(body: &Value, resource: &str) -> Result<(), Response> {
    for (field, max) in [("title", 256), ("body", 65_536)] {
        let Some(text) = body.get(field).and_then(Value::as_str) else {
            continue;
        };
        if text.chars().count() > max {
            return Err(reply(
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({
                    "message": "Validation Failed",
                    "errors": [{ "resource": resource, "field": field, "code": "custom",
                        "message": format!("{field} is too long (maximum is {max} characters)") }],
                    "documentation_url": "https://docs.github.com/rest",
                }),
            ));
        }
    }
    Ok(())
}

/// A required string field of a JSON body.
pub fn required_str<'a>(body: &'a Value, resource: &str, field: &str) -> Result<&'a str, Response> {
    match body.get(field).and_then(Value::as_str) {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(invalid(resource, field, "missing_field")),
    }
}
