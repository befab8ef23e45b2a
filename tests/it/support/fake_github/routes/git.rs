//! Git's smart HTTP, as GitHub serves a repository's `clone_url`: the
//! installation token in Basic auth (`x-access-token:<token>`), checked like
//! an API call — a fetch needs `contents: read`, a push `contents: write`,
//! on a repository the token was minted for — then handed to the real
//! `git http-backend` over the test's bare repository. A push is also held
//! to GitHub's rules for pushes (`push_rules.rs`).

use axum::body::{Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;

use super::super::auth;
use super::{Answer, Fake, lock, push_rules};

pub async fn handle(
    State(fake): State<Fake>,
    method: Method,
    Path((owner, repo_git, rest)): Path<(String, String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    bytes: Bytes,
) -> Answer {
    let name = repo_git
        .strip_suffix(".git")
        .unwrap_or(&repo_git)
        .to_owned();
    let query = query.unwrap_or_default();
    let push = rest == "git-receive-pack" || query.contains("service=git-receive-pack");
    let bare = {
        let st = lock(&fake);
        let token = basic_token(&headers).ok_or_else(needs_auth)?;
        let issued = st.tokens.get(&token).ok_or_else(needs_auth)?;
        if issued.expires_at <= st.now() {
            return Err(needs_auth());
        }
        let full = format!("{owner}/{name}");
        let covered = st
            .installations
            .get(&issued.installation)
            .is_some_and(|i| i.repos.contains(&full));
        if !covered {
            return Err(auth::not_found());
        }
        let level = if push { "write" } else { "read" };
        auth::allows(issued, &name, "contents", level)?;
        st.git_roots
            .get(&full)
            .cloned()
            .ok_or_else(auth::not_found)?
    };
    let refusal =
        tempfile::tempdir().map_err(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())?;
    let reason_file = refusal.path().join("reason");
    let out = backend(&bare, &method, &rest, &query, &headers, bytes, &reason_file).await;
    let reason = std::fs::read_to_string(&reason_file).ok();
    Ok(cgi_response(&out, reason.as_deref()))
}

/// The token of `Authorization: Basic base64(x-access-token:<token>)`.
fn basic_token(headers: &HeaderMap) -> Option<String> {
    let value = headers.get("authorization")?.to_str().ok()?;
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    text.split_once(':').map(|(_, token)| token.to_owned())
}

fn needs_auth() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [("www-authenticate", "Basic realm=\"GitHub\"")],
        "Invalid username or token.",
    )
        .into_response()
}

/// Runs `git http-backend` (CGI) for one request.
async fn backend(
    bare: &std::path::Path,
    method: &Method,
    rest: &str,
    query: &str,
    headers: &HeaderMap,
    bytes: Bytes,
    reason_file: &std::path::Path,
) -> Vec<u8> {
    let root = bare.parent().unwrap_or(bare);
    let dir = bare.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned()
    };
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("REMOTE_USER", "x-access-token")
        .env("REMOTE_ADDR", "127.0.0.1")
        .env("REQUEST_METHOD", method.as_str())
        .env("PATH_INFO", format!("/{dir}/{rest}"))
        .env("QUERY_STRING", query)
        .env("CONTENT_TYPE", header("content-type"))
        .env("CONTENT_LENGTH", bytes.len().to_string())
        .env("HTTP_CONTENT_ENCODING", header("content-encoding"))
        .env("GIT_PROTOCOL", header("git-protocol"))
        .env(push_rules::REASON_FILE_VAR, reason_file)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let Ok(mut child) = closer::agent::fork_lock::spawning(|| cmd.spawn()) else {
        return Vec::new();
    };
    if let Some(mut stdin) = child.stdin.take() {
        use tokio::io::AsyncWriteExt;
        let _ = stdin.write_all(&bytes).await;
    }
    child
        .wait_with_output()
        .await
        .map(|o| o.stdout)
        .unwrap_or_default()
}

/// A CGI answer (headers, a blank line, the body) as an HTTP response; the
/// body's declined refs get `refusal` as their reason when there is one.
fn cgi_response(out: &[u8], refusal: Option<&str>) -> Response {
    let split = out
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4))
        .or_else(|| {
            out.windows(2)
                .position(|w| w == b"\n\n")
                .map(|i| (i, i + 2))
        });
    let Some((end, body_at)) = split else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let head = String::from_utf8_lossy(&out[..end]);
    let mut builder = Response::builder().status(StatusCode::OK);
    for line in head.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split(' ').next().and_then(|c| c.parse().ok());
            builder = builder.status(code.unwrap_or(500));
        } else {
            builder = builder.header(name.trim(), value);
        }
    }
    let body = match refusal {
        Some(reason) => push_rules::with_reason(&out[body_at..], reason),
        None => out[body_at..].to_vec(),
    };
    builder
        .body(Body::from(body))
        .unwrap_or_else(|_| StatusCode::BAD_GATEWAY.into_response())
}
