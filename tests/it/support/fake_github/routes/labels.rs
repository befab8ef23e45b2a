//! Repository labels: list, and create with colour and description (422
//! `already_exists` when the name is taken, case-insensitively).

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::Value;

use super::super::auth;
use super::super::json;
use super::super::state::FakeLabel;
use super::{Answer, Fake, body, invalid, lock, reply, required_str};

pub async fn list(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name)): Path<(String, String)>,
) -> Answer {
    let st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("issues", "read"))?;
    let repo = st.repo(&full);
    let labels: Vec<Value> = repo
        .labels
        .values()
        .map(|l| json::label(&st.base_url, repo, l))
        .collect();
    Ok(reply(StatusCode::OK, Value::Array(labels)))
}

pub async fn create(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name)): Path<(String, String)>,
    bytes: Bytes,
) -> Answer {
    let request = body(&bytes)?;
    let label_name = required_str(&request, "Label", "name")?.to_owned();
    let color = request
        .get("color")
        .and_then(Value::as_str)
        .unwrap_or("ededed")
        .to_owned();
    if color.len() != 6 || !color.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(invalid("Label", "color", "invalid"));
    }
    let description = request
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let mut st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("issues", "write"))?;
    if st
        .repo(&full)
        .labels
        .contains_key(&label_name.to_lowercase())
    {
        return Err(invalid("Label", "name", "already_exists"));
    }
    let label = FakeLabel {
        id: st.take_id(),
        name: label_name.clone(),
        color,
        description,
    };
    st.repo_mut(&full)
        .labels
        .insert(label_name.to_lowercase(), label.clone());
    let st = &*st;
    Ok(reply(
        StatusCode::CREATED,
        json::label(&st.base_url, st.repo(&full), &label),
    ))
}
