//! One client per installation, shared behind an `Arc`: it owns that
//! installation's token cache and routes every call through the transport
//! (reads) or through dry run (writes, when enabled). It must never send a
//! write in dry run, and never show its token in `Debug` or logs.

use std::fmt;
use std::sync::Arc;

use http::Method;
use secrecy::SecretString;

use super::dry_run::WriteRecorder;
use super::error::GitHubError;
use super::jwt::AppKey;
use super::token::TokenCache;
use super::transport::{ApiRequest, ApiResponse, Transport};
use super::types::{InstallationId, RepoName};
use super::wire::{WireToken, parse};
use crate::clock::Millis;

/// What the App and all its installation clients share.
pub(crate) struct AppContext {
    pub transport: Transport,
    /// `None` without credentials (only allowed in dry run).
    pub key: Option<AppKey>,
    pub dry_run: bool,
    pub recorder: Option<Arc<dyn WriteRecorder>>,
}

impl AppContext {
    /// A fresh App JWT, or `NoCredentials`.
    pub fn jwt(&self) -> Result<SecretString, GitHubError> {
        let key = self.key.as_ref().ok_or(GitHubError::NoCredentials)?;
        key.sign(self.transport.clock().now_ms())
    }

    pub fn app_id(&self) -> Option<u64> {
        self.key.as_ref().map(AppKey::app_id)
    }
}

/// The GitHub API as one installation of the App sees it. Get it from
/// [`GitHubApp::installation`](super::GitHubApp::installation); the operations
/// live in `issues.rs`, `comments.rs`, `labels.rs`, `pulls.rs`, `repos.rs`,
/// `projects.rs` (over `graphql.rs`).
pub struct InstallationClient {
    id: InstallationId,
    label: String,
    ctx: Arc<AppContext>,
    tokens: TokenCache,
}

impl fmt::Debug for InstallationClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InstallationClient")
            .field("id", &self.id)
            .field("dry_run", &self.ctx.dry_run)
            .finish_non_exhaustive()
    }
}

impl InstallationClient {
    pub(crate) fn new(id: InstallationId, ctx: Arc<AppContext>) -> Self {
        Self {
            id,
            label: id.to_string(),
            ctx,
            tokens: TokenCache::default(),
        }
    }

    /// The installation this client acts as.
    pub fn id(&self) -> InstallationId {
        self.id
    }

    /// Whether writes are recorded instead of sent.
    pub fn is_dry_run(&self) -> bool {
        self.ctx.dry_run
    }

    /// The App id, when credentials are configured.
    pub fn app_id(&self) -> Option<u64> {
        self.ctx.app_id()
    }

    /// Now, by the injected clock.
    pub(crate) fn now_ms(&self) -> Millis {
        self.ctx.transport.clock().now_ms()
    }

    /// A valid installation token (for `git push`), exchanged on first use
    /// and refreshed when less than five minutes are left.
    pub async fn token(&self) -> Result<SecretString, GitHubError> {
        let now = self.ctx.transport.clock().now_ms();
        self.tokens.get(now, || self.exchange()).await
    }

    /// POST /app/installations/{id}/access_tokens with the App JWT.
    async fn exchange(&self) -> Result<(SecretString, Millis), GitHubError> {
        let jwt = self.ctx.jwt()?;
        // Repeating an exchange is harmless: it only mints another token.
        let req = ApiRequest::new(
            Method::POST,
            format!("/app/installations/{}/access_tokens", self.id),
        )
        .repeatable();
        let resp = self.ctx.transport.send(&req, &jwt, &self.label).await?;
        let token: WireToken = parse(&resp.body, "installation token")?;
        let expires_at = chrono::DateTime::parse_from_rfc3339(&token.expires_at)
            .map_err(|e| GitHubError::Decode(format!("token expires_at: {e}")))?
            .timestamp_millis();
        tracing::debug!(installation = %self.id, expires_at, "installation token exchanged");
        Ok((SecretString::from(token.token), expires_at))
    }

    /// Sends a read (or any request that must really be sent).
    pub(crate) async fn send(&self, req: ApiRequest) -> Result<ApiResponse, GitHubError> {
        let token = self.token().await?;
        let result = self.ctx.transport.send(&req, &token, &self.label).await;
        if matches!(result, Err(GitHubError::Unauthorized)) {
            // The token was revoked or expired early: the next call exchanges anew.
            self.tokens.clear().await;
        }
        result
    }

    /// In dry run, records the push of `branch` at `sha` that closer did not
    /// make (as `GIT-PUSH` on the ref's API path), like any other write.
    pub fn record_push(&self, repo: &RepoName, branch: &str, sha: &str) {
        let path = format!("{}/git/refs/heads/{branch}", repo_path(repo));
        tracing::info!(installation = %self.id, %path, sha, "dry run: push recorded, not sent");
        if let Some(recorder) = &self.ctx.recorder {
            let body = serde_json::json!({ "sha": sha, "force": true }).to_string();
            recorder.record("GIT-PUSH", &path, Some(&body));
        }
    }

    /// Sends a write, or in dry run records it and returns `None`.
    pub(crate) async fn write(&self, req: ApiRequest) -> Result<Option<ApiResponse>, GitHubError> {
        if !self.ctx.dry_run {
            return self.send(req).await.map(Some);
        }
        let body = req.body.as_ref().map(|b| b.to_string());
        tracing::info!(
            installation = %self.id,
            method = %req.method,
            path = %req.path,
            body_bytes = body.as_ref().map_or(0, String::len),
            "dry run: GitHub write recorded, not sent"
        );
        if let Some(recorder) = &self.ctx.recorder {
            recorder.record(req.method.as_str(), &req.path, body.as_deref());
        }
        Ok(None)
    }
}

/// `owner/name` with both parts percent-encoded, for a path.
pub(crate) fn repo_path(repo: &RepoName) -> String {
    format!("/repos/{}/{}", encode(repo.owner()), encode(repo.name()))
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub(crate) fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for byte in segment.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// Encodes each segment of a slash-separated path, keeping the slashes.
pub(crate) fn encode_path(path: &str) -> String {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(encode)
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_labels_and_paths() {
        assert_eq!(encode("phase:review"), "phase%3Areview");
        assert_eq!(encode("a b/ü"), "a%20b%2F%C3%BC");
        assert_eq!(encode_path(".github/closer.yml"), ".github/closer.yml");
        assert_eq!(encode_path("/docs/a b.md"), "docs/a%20b.md");
    }
}
