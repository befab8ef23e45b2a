//! Repository labels: list (paginated, with `Link`), and create with colour and description (422
//! `already_exists` when the name is taken, case-insensitively).

use axum::body::Bytes;
use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use serde_json::Value;

use super::super::auth;
use super::super::json;
use super::super::state::FakeLabel;
use super::{Answer, Fake, body, invalid, lock, reply, required_str};

/// One page of the labels, as GitHub pages a list: `per_page` (default 30,
/// at most 100) and `page` (from 1), with a `Link` header naming the next,
/// last, first and previous pages where there are such.
pub async fn list(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name)): Path<(String, String)>,
    Query(query): Query<HashMap<String, String>>,
) -> Answer {
    let st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("issues", "read"))?;
    let repo = st.repo(&full);
    let number = |key: &str, default: usize| {
        query
            .get(key)
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(default)
    };
    let per_page = number("per_page", 30).clamp(1, 100);
    let page = number("page", 1).max(1);
    let labels: Vec<Value> = repo
        .labels
        .values()
        .skip((page - 1) * per_page)
        .take(per_page)
        .map(|l| json::label(&st.base_url, repo, l))
        .collect();
    let last = repo.labels.len().div_ceil(per_page).max(1);
    let url = |n: usize| {
        format!(
            // As GitHub writes it: by repository id.
            "<{}/repositories/{}/labels?per_page={per_page}&page={n}>",
            st.base_url, repo.id
        )
    };
    let mut links = Vec::new();
    if page < last {
        links.push(format!("{}; rel=\"next\"", url(page + 1)));
        links.push(format!("{}; rel=\"last\"", url(last)));
    }
    if page > 1 {
        links.push(format!("{}; rel=\"first\"", url(1)));
        links.push(format!("{}; rel=\"prev\"", url(page - 1)));
    }
    let mut resp = reply(StatusCode::OK, Value::Array(labels));
    if let Ok(link) = HeaderValue::from_str(&links.join(", "))
        && !links.is_empty()
    {
        resp.headers_mut().insert("link", link);
    }
    Ok(resp)
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
