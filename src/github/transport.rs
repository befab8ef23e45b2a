//! Sends one API request through octocrab and applies our retry policy and
//! redirect rules (`redirect.rs`).
//! octocrab is only the HTTP transport here (its own retry is compiled out,
//! it holds no credentials): we set the bearer ourselves, see every status
//! and header, and record the call in metrics. Never logs a header value.

use std::sync::Mutex;
use std::time::Duration;

use http::header::{ACCEPT, AUTHORIZATION, HeaderValue, IF_NONE_MATCH};
use http::{HeaderMap, Method};
use http_body_util::BodyExt;
use secrecy::{ExposeSecret, SecretString};

use super::decode::error_answer;
use super::error::GitHubError;
use super::redirect::{Hop, MAX_REDIRECTS, Origin, next_hop};
use super::retry::{
    Outcome, RetryDecision, RetrySettings, decide_with, is_idempotent, rate_limit_remaining,
};
use crate::clock::SharedClock;

/// The most of one answer read (a page of a list, a file's contents, a
/// GraphQL answer are all far smaller): a larger one is an error, not a
/// process holding whatever the server sends.
pub const MAX_ANSWER_BYTES: usize = 32 * 1024 * 1024;

/// Which of GitHub's two API roots a request goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// The REST API: `GITHUB_API_URL` itself.
    Rest,
    /// The GraphQL API's root, see [`graphql_root`]; the path is `/graphql`.
    GraphQl,
}

/// One request, relative to the API root (`/repos/o/r/issues/1?x=y`).
#[derive(Debug, Clone)]
pub(crate) struct ApiRequest {
    pub method: Method,
    pub path: String,
    pub body: Option<serde_json::Value>,
    pub if_none_match: Option<String>,
    pub api: Api,
    /// Whether sending it twice has the effect of sending it once, so a
    /// dropped answer may be repeated. By method by default; a GraphQL query
    /// is a POST that reads.
    pub repeatable: bool,
}

impl ApiRequest {
    pub fn new(method: Method, path: String) -> Self {
        Self {
            repeatable: is_idempotent(&method),
            method,
            path,
            body: None,
            if_none_match: None,
            api: Api::Rest,
        }
    }

    /// A GraphQL POST; `repeatable` for a query, not for a mutation.
    pub fn graphql(body: serde_json::Value, repeatable: bool) -> Self {
        Self {
            repeatable,
            api: Api::GraphQl,
            ..Self::new(Method::POST, "/graphql".to_owned()).with_body(body)
        }
    }

    pub fn get(path: String) -> Self {
        Self::new(Method::GET, path)
    }

    /// Marks a POST whose repetition is harmless (adding labels that are
    /// already there, a reaction GitHub already has, a token exchange), so
    /// the transport may send it again after a lost answer or a 5xx.
    pub fn repeatable(mut self) -> Self {
        self.repeatable = true;
        self
    }

    pub fn with_body(mut self, body: serde_json::Value) -> Self {
        self.body = Some(body);
        self
    }
}

/// GitHub's answer, body read in full.
#[derive(Debug)]
pub(crate) struct ApiResponse {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: String,
}

impl ApiResponse {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

/// A failed attempt that got no answer.
struct NoAnswer {
    maybe_sent: bool,
    message: String,
}

/// The HTTP side shared by the App and all its installation clients.
pub(crate) struct Transport {
    octocrab: octocrab::Octocrab,
    /// The same settings, rooted at the GraphQL API's root.
    graphql: octocrab::Octocrab,
    /// The API's scheme and host: the only one given the token.
    origin: Origin,
    clock: SharedClock,
    retry: RetrySettings,
    rng: Mutex<fastrand::Rng>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// Builds the octocrab transport. Must run inside a Tokio runtime
    /// (octocrab spawns its buffer worker).
    pub fn new(
        api_url: &str,
        clock: SharedClock,
        retry: RetrySettings,
        connect_timeout: Duration,
        request_timeout: Duration,
        seed: Option<u64>,
    ) -> Result<Self, GitHubError> {
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(GitHubError::Config(
                "the GitHub client must be created inside the Tokio runtime".to_owned(),
            ));
        }
        let build = |root: &str| {
            octocrab::Octocrab::builder()
                .base_uri(root)
                .map_err(|_| {
                    GitHubError::Config(format!("GITHUB_API_URL {api_url:?} is not a URL"))
                })?
                .set_connect_timeout(Some(connect_timeout))
                .set_read_timeout(Some(request_timeout))
                .set_write_timeout(Some(request_timeout))
                .build()
                .map_err(|e| GitHubError::Config(format!("building the HTTP client failed: {e}")))
        };
        let octocrab = build(api_url)?;
        let graphql = build(&graphql_root(api_url))?;
        let origin = Origin::of(api_url).ok_or_else(|| {
            GitHubError::Config(format!("GITHUB_API_URL {api_url:?} is not an absolute URL"))
        })?;
        let rng = seed.map(fastrand::Rng::with_seed).unwrap_or_default();
        Ok(Self {
            octocrab,
            graphql,
            origin,
            clock,
            retry,
            rng: Mutex::new(rng),
        })
    }

    pub fn clock(&self) -> &SharedClock {
        &self.clock
    }

    /// Sends `req` with `bearer`, retrying as the policy says and following
    /// GitHub's redirects (see [`super::redirect`]). `installation` labels
    /// the rate-limit gauge. Non-2xx/304 answers become errors.
    pub async fn send(
        &self,
        req: &ApiRequest,
        bearer: &SecretString,
        installation: &str,
    ) -> Result<ApiResponse, GitHubError> {
        let mut target = req.path.clone();
        let mut last = 0;
        for _ in 0..=MAX_REDIRECTS {
            let resp = self.send_to(req, &target, bearer, installation).await?;
            last = resp.status;
            match next_hop(resp.status, resp.header("location"), &self.origin) {
                // A 304 answers an ETag closer sent, or nothing.
                Hop::Answer if resp.status == 304 && req.if_none_match.is_none() => {
                    return Err(status_error(&resp));
                }
                Hop::Answer => return Ok(resp),
                Hop::Refuse => return Err(status_error(&resp)),
                Hop::Follow(location) => {
                    tracing::info!(method = %req.method, path = %req.path, status = resp.status,
                        %location, "GitHub redirected the call; following");
                    target = location;
                }
            }
        }
        Err(GitHubError::Unexpected {
            status: last,
            message: format!("more than {MAX_REDIRECTS} redirects from {}", req.path),
        })
    }

    /// [`Self::send`] for one address (the request's path, or where a
    /// redirect pointed), with retries; 3xx answers come back as they are.
    async fn send_to(
        &self,
        req: &ApiRequest,
        target: &str,
        bearer: &SecretString,
        installation: &str,
    ) -> Result<ApiResponse, GitHubError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            // A request that cannot be built will not build on a second try.
            let request = self
                .build(req, target, bearer)
                .map_err(GitHubError::Config)?;
            let result = self.attempt(req.api, request).await;
            let now = self.clock.now_ms();
            let jitter = self.jitter();
            let (decision, answer) = match result {
                Ok(resp) => {
                    self.record(req, &resp, installation);
                    let hint = matches!(resp.status, 403 | 429)
                        && resp.body.to_ascii_lowercase().contains("rate limit");
                    let outcome = Outcome::Answered {
                        status: resp.status,
                        headers: &resp.headers,
                        rate_limit_hint: hint,
                    };
                    let decision =
                        decide_with(req.repeatable, outcome, attempt, now, jitter, &self.retry);
                    (decision, Ok(resp))
                }
                Err(no_answer) => {
                    metrics::counter!("closer_github_api_calls_total",
                        "method" => req.method.to_string(), "status" => "network_error")
                    .increment(1);
                    let outcome = Outcome::NoAnswer {
                        maybe_sent: no_answer.maybe_sent,
                    };
                    let decision =
                        decide_with(req.repeatable, outcome, attempt, now, jitter, &self.retry);
                    (decision, Err(no_answer))
                }
            };
            match (decision, answer) {
                (RetryDecision::Retry(wait), answer) => {
                    let what = match &answer {
                        Ok(resp) => resp.status.to_string(),
                        Err(e) => e.message.clone(),
                    };
                    tracing::warn!(method = %req.method, path = %req.path, attempt,
                        wait_ms = wait.as_millis() as u64, answer = %what, "retrying GitHub call");
                    tokio::time::sleep(wait).await;
                }
                (RetryDecision::RateLimitedUntil(until), _) => {
                    return Err(GitHubError::RateLimited { until });
                }
                (RetryDecision::MaybeApplied, answer) => {
                    return Err(GitHubError::MaybeApplied {
                        method: req.method.to_string(),
                        path: req.path.clone(),
                        status: answer.ok().map(|resp| resp.status),
                    });
                }
                // 2xx, 304, and redirects for `send` to follow or refuse.
                (_, Ok(resp)) if resp.status < 400 => return Ok(resp),
                (_, Ok(resp)) => return Err(status_error(&resp)),
                (_, Err(e)) => return Err(GitHubError::Network(e.message)),
            }
        }
    }

    fn client(&self, api: Api) -> &octocrab::Octocrab {
        match api {
            Api::Rest => &self.octocrab,
            Api::GraphQl => &self.graphql,
        }
    }

    async fn attempt(
        &self,
        api: Api,
        request: http::Request<octocrab::OctoBody>,
    ) -> Result<ApiResponse, NoAnswer> {
        let client = self.client(api);
        let response = client.execute(request).await.map_err(|e| NoAnswer {
            maybe_sent: !never_sent(&e),
            message: e.to_string(),
        })?;
        let (parts, body) = response.into_parts();
        // Read as it streams, up to a cap: a page or a file is far smaller.
        let body = http_body_util::Limited::new(body, MAX_ANSWER_BYTES)
            .collect()
            .await
            .map(|collected| String::from_utf8_lossy(&collected.to_bytes()).into_owned())
            .map_err(|e| NoAnswer {
                maybe_sent: true,
                message: match e.is::<http_body_util::LengthLimitError>() {
                    true => format!("the answer is larger than {} MiB", MAX_ANSWER_BYTES >> 20),
                    false => format!("reading the answer failed: {e}"),
                },
            })?;
        Ok(ApiResponse {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
        })
    }

    /// The request to `target`; with the token only when `target` is on
    /// the API's own host.
    fn build(
        &self,
        req: &ApiRequest,
        target: &str,
        bearer: &SecretString,
    ) -> Result<http::Request<octocrab::OctoBody>, String> {
        let mut builder = http::Request::builder()
            .method(req.method.clone())
            .uri(target)
            .header(ACCEPT, "application/vnd.github+json");
        if self.origin.owns(target) {
            let mut auth = HeaderValue::from_str(&format!("Bearer {}", bearer.expose_secret()))
                .map_err(|_| "the token is not a valid header value".to_owned())?;
            auth.set_sensitive(true);
            builder = builder.header(AUTHORIZATION, auth);
        }
        if let Some(etag) = &req.if_none_match {
            builder = builder.header(IF_NONE_MATCH, etag.as_str());
        }
        self.client(req.api)
            .build_request(builder, req.body.as_ref())
            .map_err(|e| format!("building the request failed: {e}"))
    }

    fn record(&self, req: &ApiRequest, resp: &ApiResponse, installation: &str) {
        metrics::counter!("closer_github_api_calls_total",
            "method" => req.method.to_string(), "status" => resp.status.to_string())
        .increment(1);
        if let Some(remaining) = rate_limit_remaining(&resp.headers) {
            metrics::gauge!("closer_github_rate_limit_remaining",
                "installation" => installation.to_owned())
            .set(remaining as f64);
        }
    }

    fn jitter(&self) -> f64 {
        self.rng.lock().map(|mut r| r.f64()).unwrap_or(0.5)
    }
}

/// The root the GraphQL endpoint hangs off, from `GITHUB_API_URL`: GitHub's
/// `https://api.github.com` serves `/graphql` beside its REST paths, while
/// GitHub Enterprise Server serves REST at `https://HOST/api/v3` and GraphQL
/// at `https://HOST/api/graphql`, so a trailing `/v3` is dropped. Any other
/// path is kept as it is.
pub(crate) fn graphql_root(api_url: &str) -> String {
    let trimmed = api_url.trim_end_matches('/');
    match trimmed.strip_suffix("/api/v3") {
        Some(host) => format!("{host}/api"),
        None => trimmed.to_owned(),
    }
}

/// True only when the error says the connection was never made.
fn never_sent(err: &octocrab::Error) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if let Some(client_err) = e.downcast_ref::<hyper_util::client::legacy::Error>() {
            return client_err.is_connect();
        }
        current = e.source();
    }
    false
}

/// Maps a final non-success answer onto our error.
fn status_error(resp: &ApiResponse) -> GitHubError {
    error_answer(resp.status, &resp.body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graphql_root_is_the_api_root_on_github_com() {
        assert_eq!(
            graphql_root("https://api.github.com"),
            "https://api.github.com"
        );
        assert_eq!(
            graphql_root("https://api.github.com/"),
            "https://api.github.com"
        );
    }

    #[test]
    fn graphql_root_drops_v3_on_enterprise_server() {
        assert_eq!(
            graphql_root("https://ghe.example.com/api/v3"),
            "https://ghe.example.com/api"
        );
        assert_eq!(
            graphql_root("https://ghe.example.com/api/v3/"),
            "https://ghe.example.com/api"
        );
        // Only a trailing `/api/v3` is GHES's REST root.
        assert_eq!(
            graphql_root("https://proxy.example.com/github"),
            "https://proxy.example.com/github"
        );
    }

    #[test]
    fn queries_may_be_repeated_and_mutations_may_not() {
        let query = ApiRequest::graphql(serde_json::json!({}), true);
        assert_eq!((query.api, query.path.as_str()), (Api::GraphQl, "/graphql"));
        assert!(query.repeatable);
        assert!(!ApiRequest::graphql(serde_json::json!({}), false).repeatable);
        assert!(ApiRequest::get("/x".to_owned()).repeatable);
        assert!(!ApiRequest::new(Method::POST, "/x".to_owned()).repeatable);
    }
}
