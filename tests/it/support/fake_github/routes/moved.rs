//! Moved repositories, as GitHub answers for a repository that was renamed
//! or transferred: every API call under its old `/repos/{owner}/{name}`
//! gets `301 Moved Permanently` (GET, HEAD) or `307 Temporary Redirect`
//! (any other method, so the client repeats it with its body), with
//! `Location` naming the same call at the new address. GitHub's own
//! `Location` is `/repositories/{id}/…`; the fake names the new
//! `owner/name` instead, which asks the same of the client: follow it.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::super::state::State;

/// The redirect for a call to a moved repository or a transferred issue,
/// if it is one.
pub fn redirect(st: &State, method: &str, path: &str) -> Option<Response> {
    let (prefix, rest) = match path.strip_prefix("/api/v3") {
        Some(rest) => ("/api/v3", rest),
        None => ("", path),
    };
    let location = match moved_path(st, rest) {
        Some((target, tail)) => format!("{}{prefix}{target}{tail}", st.base_url),
        None => {
            let rest = rest.strip_prefix("/repos/")?;
            let mut parts = rest.splitn(3, ['/', '?']);
            let (owner, name) = (parts.next()?, parts.next()?);
            let full = format!("{owner}/{name}");
            let target = st.moved.get(&full)?;
            let tail = &rest[full.len()..];
            match target.starts_with("http") {
                true => format!("{target}{tail}"),
                false => format!("{}{prefix}{target}{tail}", st.base_url),
            }
        }
    };
    let status = match method {
        "GET" | "HEAD" => StatusCode::MOVED_PERMANENTLY,
        _ => StatusCode::TEMPORARY_REDIRECT,
    };
    let body = json!({
        "message": "Moved Permanently",
        "url": location,
        "documentation_url": "https://docs.github.com/rest/guides/best-practices-for-using-the-rest-api#follow-redirects",
    });
    let mut resp = (status, axum::Json(body)).into_response();
    let value = HeaderValue::from_str(&location).ok()?;
    resp.headers_mut().insert("location", value);
    Some(resp)
}

/// A transferred issue's (or its comment's) new path for `path`, and the
/// rest of `path` after the old one.
fn moved_path<'a>(st: &'a State, path: &'a str) -> Option<(&'a str, &'a str)> {
    st.moved_paths.iter().find_map(|(old, new)| {
        let tail = path.strip_prefix(old.as_str())?;
        (tail.is_empty() || tail.starts_with(['/', '?'])).then_some((new.as_str(), tail))
    })
}
