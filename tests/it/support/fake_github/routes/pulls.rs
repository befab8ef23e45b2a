//! Pull requests: create (422 when one is already open for the head), list
//! filtered by `head=owner:branch` and `state`, read, update.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use super::super::auth;
use super::super::json;
use super::super::state::FakePull;
use super::{Answer, Fake, body, lock, reply, required_str, within_limits};

#[derive(Deserialize)]
pub struct Filter {
    head: Option<String>,
    state: Option<String>,
}

pub async fn list(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name)): Path<(String, String)>,
    Query(filter): Query<Filter>,
) -> Answer {
    let st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("pull_requests", "read"))?;
    let repo = st.repo(&full);
    let state = filter.state.unwrap_or_else(|| "open".into());
    let items: Vec<Value> = repo
        .pulls
        .values()
        .rev() // newest first, like GitHub's default sort
        .filter(|p| state == "all" || p.state == state)
        .filter(|p| match &filter.head {
            Some(head) => *head == format!("{}:{}", repo.owner, p.head),
            None => true,
        })
        .map(|p| json::pull(&st.base_url, repo, p))
        .collect();
    Ok(reply(StatusCode::OK, Value::Array(items)))
}

pub async fn create(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name)): Path<(String, String)>,
    bytes: Bytes,
) -> Answer {
    let request = body(&bytes)?;
    within_limits(&request, "PullRequest")?;
    let title = required_str(&request, "PullRequest", "title")?.to_owned();
    let head = required_str(&request, "PullRequest", "head")?.to_owned();
    let base = required_str(&request, "PullRequest", "base")?.to_owned();
    let text = request
        .get("body")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("pull_requests", "write"))?;
    let head = head
        .split_once(':')
        .map_or(head.clone(), |(_, b)| b.to_owned());
    if st
        .repo(&full)
        .pulls
        .values()
        .any(|p| p.head == head && p.state == "open")
    {
        return Err(reply(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({
                "message": "Validation Failed",
                "errors": [{ "resource": "PullRequest", "code": "custom",
                    "message": format!("A pull request already exists for {owner}:{head}.") }],
            }),
        ));
    }
    let id = st.take_id();
    let now = st.now();
    let author = st.bot();
    let repo = st.repo_mut(&full);
    let number = repo.take_number();
    let pull = FakePull {
        id,
        number,
        title,
        body: text,
        head,
        base,
        state: "open".into(),
        merged: false,
        merged_sha: None,
        author,
        created_at: now,
        updated_at: now,
    };
    repo.pulls.insert(number, pull.clone());
    let st = &*st;
    Ok(reply(
        StatusCode::CREATED,
        json::pull(&st.base_url, st.repo(&full), &pull),
    ))
}

pub async fn get(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, number)): Path<(String, String, u64)>,
) -> Answer {
    let st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("pull_requests", "read"))?;
    let repo = st.repo(&full);
    let pull = repo.pulls.get(&number).ok_or_else(auth::not_found)?;
    Ok(reply(StatusCode::OK, json::pull(&st.base_url, repo, pull)))
}

pub async fn update(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, number)): Path<(String, String, u64)>,
    bytes: Bytes,
) -> Answer {
    let edit = body(&bytes)?;
    within_limits(&edit, "PullRequest")?;
    let mut st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("pull_requests", "write"))?;
    let now = st.now();
    let pull = st
        .repo_mut(&full)
        .pulls
        .get_mut(&number)
        .ok_or_else(auth::not_found)?;
    if let Some(title) = edit.get("title").and_then(Value::as_str) {
        pull.title = title.to_owned();
    }
    if let Some(text) = edit.get("body").and_then(Value::as_str) {
        pull.body = Some(text.to_owned());
    }
    if let Some(state) = edit.get("state").and_then(Value::as_str)
        && !pull.merged
    {
        pull.state = state.to_owned();
    }
    pull.updated_at = now;
    let pull = pull.clone();
    let st = &*st;
    Ok(reply(
        StatusCode::OK,
        json::pull(&st.base_url, st.repo(&full), &pull),
    ))
}
