//! Repository reads: the repository, file contents at a ref (ETag and
//! `If-None-Match` → 304), and a collaborator's permission.

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::IntoResponse;
use base64::Engine;
use serde::Deserialize;
use serde_json::json;

use super::super::auth;
use super::super::json;
use super::super::state::FakeUser;
use super::{Answer, Fake, lock, reply};

pub async fn get_repo(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name)): Path<(String, String)>,
) -> Answer {
    let st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("metadata", "read"))?;
    Ok(reply(
        StatusCode::OK,
        json::repository(&st.base_url, st.repo(&full)),
    ))
}

#[derive(Deserialize)]
pub struct RefQuery {
    #[serde(rename = "ref")]
    git_ref: Option<String>,
}

pub async fn get_contents(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, path)): Path<(String, String, String)>,
    Query(query): Query<RefQuery>,
) -> Answer {
    let st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("contents", "read"))?;
    let repo = st.repo(&full);
    let git_ref = query.git_ref.unwrap_or_else(|| repo.default_branch.clone());
    let file = repo
        .files
        .get(&(git_ref, path.clone()))
        .ok_or_else(auth::not_found)?;
    let etag = file.etag();
    let wanted = headers.get("if-none-match").and_then(|v| v.to_str().ok());
    if wanted.is_some_and(|w| w.trim_start_matches("W/") == etag) {
        let mut resp = StatusCode::NOT_MODIFIED.into_response();
        resp.headers_mut().insert("etag", header(&etag));
        return Ok(resp);
    }
    // GitHub wraps base64 at 60 columns.
    let encoded = base64::engine::general_purpose::STANDARD.encode(&file.content);
    let wrapped: Vec<String> = encoded
        .as_bytes()
        .chunks(60)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    let file_name = path.rsplit('/').next().unwrap_or(&path).to_owned();
    let body = json!({
        "type": "file",
        "encoding": "base64",
        "size": file.content.len(),
        "name": file_name,
        "path": path,
        "content": wrapped.join("\n") + "\n",
        "sha": file.sha,
        "url": format!("{}/repos/{full}/contents/{path}", st.base_url),
    });
    let mut resp = reply(StatusCode::OK, body);
    resp.headers_mut().insert("etag", header(&etag));
    Ok(resp)
}

fn header(value: &str) -> HeaderValue {
    HeaderValue::from_str(value).unwrap_or_else(|_| HeaderValue::from_static("\"\""))
}

pub async fn get_permission(
    State(fake): State<Fake>,
    headers: HeaderMap,
    Path((owner, name, user)): Path<(String, String, String)>,
) -> Answer {
    let st = lock(&fake);
    let full = auth::require_repo(&st, &headers, &owner, &name, ("metadata", "read"))?;
    let role = st
        .repo(&full)
        .permissions
        .get(&user)
        .ok_or_else(auth::not_found)?;
    // A custom role is set as `name/base` (`auditor/write`): GitHub reports
    // its name in `role_name` and its base in `permission`.
    let (role, base) = match role.split_once('/') {
        Some((name, base)) => (name.to_owned(), base.to_owned()),
        None => (role.clone(), role.clone()),
    };
    // The legacy `permission` field knows only admin/write/read/none.
    let legacy = match base.as_str() {
        "admin" => "admin",
        "maintain" | "write" => "write",
        "triage" | "read" => "read",
        _ => "none",
    };
    Ok(reply(
        StatusCode::OK,
        json!({
            "permission": legacy,
            "role_name": role,
            "user": json::user(&st.base_url, &FakeUser::user(&user)),
        }),
    ))
}
