//! One client per installation, shared behind an `Arc`: it owns that
//! installation's token caches — one per (repository, scope), so each call
//! uses a token with the least it needs (`scope.rs`) — and routes every
//! call through the transport (reads) or through dry run (writes, when
//! enabled). Every write's body passes the outgoing filter
//! (`crate::redact`) first. It must never send a write in dry run, and
//! never show its token in `Debug` or logs.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use http::Method;
use secrecy::SecretString;

use super::decode;
use super::dry_run::WriteRecorder;
use super::error::GitHubError;
use super::jwt::AppKey;
use super::scope::{TokenScope, repository_of};
use super::token::TokenCache;
use super::transport::{Api, ApiRequest, ApiResponse, Transport};
use super::types::{InstallationId, RepoName};
use crate::clock::Millis;
use crate::redact::{Channel, Redactor, SecretSource};

/// What the App and all its installation clients share.
pub(crate) struct AppContext {
    pub transport: Transport,
    /// `None` without credentials (only allowed in dry run).
    pub key: Option<AppKey>,
    pub dry_run: bool,
    pub recorder: Option<Arc<dyn WriteRecorder>>,
    /// Every write's body passes through it; minted tokens are added to it.
    pub redactor: Redactor,
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

/// Which token a call uses: one minted for a repository and a scope, or
/// the installation-wide one (GraphQL, which names no repository).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum TokenKey {
    Installation,
    Repository { name: String, scope: TokenScope },
}

impl TokenKey {
    /// The least a request needs: reads a read token for its repository,
    /// writes a write token (which cannot push).
    fn for_request(req: &ApiRequest) -> TokenKey {
        let name = match req.api {
            Api::GraphQl => None,
            Api::Rest => repository_of(&req.path),
        };
        let Some(name) = name else {
            return TokenKey::Installation;
        };
        let scope = match req.method {
            Method::GET | Method::HEAD => TokenScope::Read,
            _ => TokenScope::Write,
        };
        TokenKey::Repository {
            name: name.to_owned(),
            scope,
        }
    }

    /// The token exchange's body: the one repository, the scope's
    /// permissions; none for the installation-wide token.
    fn exchange_body(&self) -> Option<serde_json::Value> {
        match self {
            TokenKey::Installation => None,
            TokenKey::Repository { name, scope } => Some(serde_json::json!({
                "repositories": [name],
                "permissions": scope.permissions(),
            })),
        }
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
    /// One cache per (repository, scope), and the installation-wide one.
    tokens: Mutex<HashMap<TokenKey, Arc<TokenCache>>>,
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
            tokens: Mutex::new(HashMap::new()),
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

    /// A valid installation-wide token (every repository and permission of
    /// the installation), exchanged on first use and refreshed when less
    /// than five minutes are left. Prefer [`Self::token_for`].
    pub async fn token(&self) -> Result<SecretString, GitHubError> {
        self.token_by(TokenKey::Installation).await
    }

    /// A valid token for `repo` alone with `scope`'s permissions: `Read` to
    /// clone and fetch, `Push` to push the run's branch.
    pub async fn token_for(
        &self,
        repo: &RepoName,
        scope: TokenScope,
    ) -> Result<SecretString, GitHubError> {
        self.token_by(TokenKey::Repository {
            name: repo.name().to_owned(),
            scope,
        })
        .await
    }

    async fn token_by(&self, key: TokenKey) -> Result<SecretString, GitHubError> {
        let now = self.ctx.transport.clock().now_ms();
        self.cache(&key).get(now, || self.exchange(&key)).await
    }

    fn cache(&self, key: &TokenKey) -> Arc<TokenCache> {
        let mut caches = self.tokens.lock().unwrap_or_else(|p| p.into_inner());
        caches.entry(key.clone()).or_default().clone()
    }

    /// POST /app/installations/{id}/access_tokens with the App JWT, for the
    /// key's repository and permissions.
    async fn exchange(&self, key: &TokenKey) -> Result<(SecretString, Millis), GitHubError> {
        let jwt = self.ctx.jwt()?;
        // Repeating an exchange is harmless: it only mints another token.
        let mut req = ApiRequest::new(
            Method::POST,
            format!("/app/installations/{}/access_tokens", self.id),
        )
        .repeatable();
        req.body = key.exchange_body();
        let resp = match self.ctx.transport.send(&req, &jwt, &self.label).await {
            // GitHub refuses to mint a token for a name it does not know — a
            // repository the installation does not cover, or an old name of
            // a renamed one, which the API still redirects. The same
            // permissions for the installation's repositories: the call is
            // then answered (redirected, or not found) as GitHub sees it.
            Err(GitHubError::Validation { .. }) if *key != TokenKey::Installation => {
                req.body = key.exchange_body().map(|mut body| {
                    body.as_object_mut().map(|b| b.remove("repositories"));
                    body
                });
                self.ctx.transport.send(&req, &jwt, &self.label).await?
            }
            other => other?,
        };
        let (token, expires_at) = decode::installation_token(&resp.body)?;
        tracing::debug!(installation = %self.id, ?key, expires_at, "installation token exchanged");
        self.ctx.redactor.register_until(
            SecretSource::InstallationToken,
            &token,
            expires_at,
            self.now_ms(),
        );
        Ok((token, expires_at))
    }

    /// Sends a read (or any request that must really be sent).
    pub(crate) async fn send(&self, req: ApiRequest) -> Result<ApiResponse, GitHubError> {
        let key = TokenKey::for_request(&req);
        let token = self.token_by(key.clone()).await?;
        let result = self.ctx.transport.send(&req, &token, &self.label).await;
        if matches!(result, Err(GitHubError::Unauthorized)) {
            // The token was revoked or expired early: the next call exchanges anew.
            self.cache(&key).clear().await;
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

    /// Sends a write, or in dry run records it and returns `None`. Its body
    /// passes the outgoing filter first, then GitHub's length limit
    /// (`body_limit.rs`): this is the one door every comment, issue and
    /// pull request text goes out through.
    pub(crate) async fn write(
        &self,
        mut req: ApiRequest,
    ) -> Result<Option<ApiResponse>, GitHubError> {
        if let Some(body) = req.body.as_mut() {
            self.ctx.redactor.redact_json(Channel::GitHub, body);
            super::body_limit::fit_body(body);
        }
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
