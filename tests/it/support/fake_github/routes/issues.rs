//! Issues: read, edit (title, body, state with `state_reason`), labels on an
//! issue, and reactions to the issue itself.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use super::super::auth;
use super::super::json;
use super::super::state::{FakeLabel, FakeReaction, ReactionSubject};
use super::{Answer, Fake, body, invalid, lock, reply, required_str, within_limits};

/// `410 Gone` for a deleted issue and everything under it (GitHub's answer
/// to `GET`, `PATCH` and the comment and label calls of a deleted issue).
pub fn deleted(st: &super::super::state::State, path: &str) -> Option<axum::response::Response> {
    let path = path.split('?').next().unwrap_or_default();
    let gone = st.deleted_issues.iter().any(|issue| {
        path.strip_prefix(issue.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    });
    gone.then(|| {
        reply(
            StatusCode::GONE,
            json!({
                "message": "This issue was deleted",
                "documentation_url": "https://docs.github.com/rest/issues/issues#get-an-issue",
                "status": "410"
            }),
        )
    })
}

pub async fn get_issue(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, number)): Path<(String, String, u64)>,
) -> Answer {
    let st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("issues", "read"))?;
    let repo = st.repo(&full);
    let issue = repo.issues.get(&number).ok_or_else(auth::not_found)?;
    Ok(reply(
        StatusCode::OK,
        json::issue(&st.base_url, repo, issue),
    ))
}

pub async fn edit_issue(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, number)): Path<(String, String, u64)>,
    bytes: Bytes,
) -> Answer {
    let edit = body(&bytes)?;
    within_limits(&edit, "Issue")?;
    let mut st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("issues", "write"))?;
    let now = st.now();
    let repo = st.repo_mut(&full);
    let issue = repo.issues.get_mut(&number).ok_or_else(auth::not_found)?;
    let state = edit.get("state").and_then(Value::as_str);
    if let Some(s) = state
        && s != "open"
        && s != "closed"
    {
        return Err(invalid("Issue", "state", "invalid"));
    }
    let reason = edit.get("state_reason").and_then(Value::as_str);
    if let Some(r) = reason
        && !["completed", "not_planned", "reopened", "duplicate"].contains(&r)
    {
        return Err(invalid("Issue", "state_reason", "invalid"));
    }
    if let Some(title) = edit.get("title").and_then(Value::as_str) {
        issue.title = title.to_owned();
    }
    if let Some(text) = edit.get("body").and_then(Value::as_str) {
        issue.body = Some(text.to_owned());
    }
    match state {
        Some("closed") => {
            issue.state = "closed".into();
            issue.state_reason = Some(reason.unwrap_or("completed").to_owned());
            issue.closed_at = Some(now);
        }
        Some(_) => {
            if issue.state == "closed" {
                issue.state_reason = Some("reopened".into());
            }
            issue.state = "open".into();
            issue.closed_at = None;
        }
        None => {}
    }
    issue.updated_at = now;
    let issue = issue.clone();
    let st = &*st;
    Ok(reply(
        StatusCode::OK,
        json::issue(&st.base_url, st.repo(&full), &issue),
    ))
}

pub async fn add_labels(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, number)): Path<(String, String, u64)>,
    bytes: Bytes,
) -> Answer {
    let request = body(&bytes)?;
    let names: Vec<String> = match request.get("labels").and_then(Value::as_array) {
        Some(list) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        None => return Err(invalid("Label", "labels", "missing_field")),
    };
    let mut st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("issues", "write"))?;
    let ids: Vec<u64> = names.iter().map(|_| st.take_id()).collect();
    let repo = st.repo_mut(&full);
    if !repo.issues.contains_key(&number) {
        return Err(auth::not_found());
    }
    for (label, id) in names.iter().zip(ids) {
        // Like GitHub: an unknown label is created with the default colour.
        repo.labels
            .entry(label.to_lowercase())
            .or_insert(FakeLabel {
                id,
                name: label.clone(),
                color: "ededed".into(),
                description: None,
            });
        let canonical = repo.labels[&label.to_lowercase()].name.clone();
        let issue = repo.issues.get_mut(&number).ok_or_else(auth::not_found)?;
        if !issue
            .labels
            .iter()
            .any(|l| l.eq_ignore_ascii_case(&canonical))
        {
            issue.labels.push(canonical);
        }
    }
    let st = &*st;
    let repo = st.repo(&full);
    let labels: Vec<Value> = repo.issues[&number]
        .labels
        .iter()
        .filter_map(|l| repo.labels.get(&l.to_lowercase()))
        .map(|l| json::label(&st.base_url, repo, l))
        .collect();
    Ok(reply(StatusCode::OK, Value::Array(labels)))
}

pub async fn remove_label(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, number, label)): Path<(String, String, u64, String)>,
) -> Answer {
    let mut st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("issues", "write"))?;
    let repo = st.repo_mut(&full);
    let issue = repo.issues.get_mut(&number).ok_or_else(auth::not_found)?;
    let before = issue.labels.len();
    issue.labels.retain(|l| !l.eq_ignore_ascii_case(&label));
    if issue.labels.len() == before {
        return Err(reply(
            StatusCode::NOT_FOUND,
            json::error("Label does not exist"),
        ));
    }
    let remaining = issue.labels.clone();
    let st = &*st;
    let repo = st.repo(&full);
    let labels: Vec<Value> = remaining
        .iter()
        .filter_map(|l| repo.labels.get(&l.to_lowercase()))
        .map(|l| json::label(&st.base_url, repo, l))
        .collect();
    Ok(reply(StatusCode::OK, Value::Array(labels)))
}

pub async fn react(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, number)): Path<(String, String, u64)>,
    bytes: Bytes,
) -> Answer {
    let request = body(&bytes)?;
    let content = required_str(&request, "Reaction", "content")?.to_owned();
    let mut st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("issues", "write"))?;
    if !st.repo(&full).issues.contains_key(&number) {
        return Err(auth::not_found());
    }
    let subject = ReactionSubject::Issue(number);
    super::comments::add_reaction(&mut st, &full, subject, content)
}

/// Valid reaction contents.
pub const REACTIONS: [&str; 8] = [
    "+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes",
];

/// The JSON of a reaction.
pub fn reaction_json(r: &FakeReaction, user: &Value) -> Value {
    json!({
        "id": r.id,
        "node_id": format!("REA_{}", r.id),
        "user": user,
        "content": r.content,
        "created_at": json::time(0),
    })
}
