//! The GraphQL call path: `POST /graphql` (GHES: `/api/graphql`, see
//! `transport::graphql_root`) through the same transport, token and retry
//! policy as REST. GitHub answers GraphQL errors with HTTP 200 and an
//! `errors` array; they become `GitHubError`s here. Queries are reads (sent in
//! dry run, repeated after a dropped answer); mutations are writes (recorded
//! in dry run, `MaybeApplied` after a dropped answer). Values always travel
//! as `variables`, never spliced into the query text.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::client::InstallationClient;
use super::error::GitHubError;
use super::transport::{ApiRequest, ApiResponse};
use crate::clock::Millis;

/// How long to wait after a `RATE_LIMITED` error that names no reset time.
const RATE_LIMIT_FALLBACK_MS: Millis = 60_000;

/// The longest error message kept (GitHub's are short; ours stay loggable).
const MAX_MESSAGE: usize = 300;

/// The full GraphQL endpoint for a `GITHUB_API_URL`:
/// `https://api.github.com` → `https://api.github.com/graphql`,
/// `https://HOST/api/v3` → `https://HOST/api/graphql`.
pub fn graphql_url(api_url: &str) -> String {
    format!("{}/graphql", super::transport::graphql_root(api_url))
}

#[derive(Debug, Deserialize)]
struct WireGraphQlError {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

#[derive(Debug, Deserialize)]
struct WireGraphQlAnswer {
    #[serde(default)]
    data: Option<Value>,
    #[serde(default)]
    errors: Vec<WireGraphQlError>,
}

impl InstallationClient {
    /// Runs a GraphQL query (a read) and decodes its `data` into `T`.
    pub(crate) async fn graphql_query<T: DeserializeOwned>(
        &self,
        query: &str,
        variables: Value,
        what: &str,
    ) -> Result<T, GitHubError> {
        let req = ApiRequest::graphql(json!({ "query": query, "variables": variables }), true);
        let resp = self.send(req).await?;
        graphql_data(&resp, self.now_ms(), what)
    }

    /// Runs a GraphQL mutation (a write): `None` in dry run, where it is
    /// recorded and not sent.
    pub(crate) async fn graphql_mutation<T: DeserializeOwned>(
        &self,
        mutation: &str,
        variables: Value,
        what: &str,
    ) -> Result<Option<T>, GitHubError> {
        let req = ApiRequest::graphql(json!({ "query": mutation, "variables": variables }), false);
        match self.write(req).await? {
            Some(resp) => graphql_data(&resp, self.now_ms(), what).map(Some),
            None => Ok(None),
        }
    }
}

/// The `data` of a 200 answer, or its first error as a `GitHubError`.
pub(crate) fn graphql_data<T: DeserializeOwned>(
    resp: &ApiResponse,
    now: Millis,
    what: &str,
) -> Result<T, GitHubError> {
    let answer: WireGraphQlAnswer = serde_json::from_str(&resp.body)
        .map_err(|e| GitHubError::Decode(format!("{what}: {e}")))?;
    if let Some(first) = answer.errors.into_iter().next() {
        let reset = resp
            .header("x-ratelimit-reset")
            .and_then(|v| v.trim().parse::<Millis>().ok());
        return Err(map_error(first, reset, now));
    }
    let data = answer
        .data
        .filter(|d| !d.is_null())
        .ok_or_else(|| GitHubError::Decode(format!("{what}: no data and no errors")))?;
    serde_json::from_value(data).map_err(|e| GitHubError::Decode(format!("{what}: {e}")))
}

/// GitHub's GraphQL error types onto our error. `reset` is the
/// `x-ratelimit-reset` header (seconds since the epoch) when there was one.
fn map_error(error: WireGraphQlError, reset: Option<Millis>, now: Millis) -> GitHubError {
    let message: String = error
        .message
        .unwrap_or_default()
        .chars()
        .take(MAX_MESSAGE)
        .collect();
    let kind = error.kind.unwrap_or_default();
    match kind.as_str() {
        "NOT_FOUND" => GitHubError::NotFound,
        "FORBIDDEN" | "INSUFFICIENT_SCOPES" => GitHubError::Forbidden { message },
        "RATE_LIMITED" => GitHubError::RateLimited {
            until: reset
                .map(|secs| secs.saturating_mul(1000))
                .filter(|until| *until > now)
                .unwrap_or(now.saturating_add(RATE_LIMIT_FALLBACK_MS)),
        },
        _ => GitHubError::GraphQl { kind, message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::{HeaderMap, HeaderValue};

    const NOW: Millis = 1_700_000_000_000;

    fn answer(body: &str, reset: Option<&str>) -> ApiResponse {
        let mut headers = HeaderMap::new();
        if let Some(r) = reset {
            headers.insert("x-ratelimit-reset", HeaderValue::from_str(r).unwrap());
        }
        ApiResponse {
            status: 200,
            headers,
            body: body.to_owned(),
        }
    }

    fn error_of(kind: &str, reset: Option<&str>) -> GitHubError {
        let body = format!(r#"{{"data": null, "errors": [{{"type": "{kind}", "message": "m"}}]}}"#);
        graphql_data::<Value>(&answer(&body, reset), NOW, "t").unwrap_err()
    }

    #[test]
    fn endpoint_for_github_com_and_enterprise_server() {
        assert_eq!(
            graphql_url("https://api.github.com"),
            "https://api.github.com/graphql"
        );
        assert_eq!(
            graphql_url("https://ghe.example.com/api/v3"),
            "https://ghe.example.com/api/graphql"
        );
    }

    #[test]
    fn data_is_decoded() {
        let resp = answer(r#"{"data": {"viewer": {"login": "x"}}}"#, None);
        let data: Value = graphql_data(&resp, NOW, "t").unwrap();
        assert_eq!(data["viewer"]["login"], "x");
    }

    #[test]
    fn error_types_map_onto_our_errors() {
        assert_eq!(error_of("NOT_FOUND", None), GitHubError::NotFound);
        assert_eq!(
            error_of("FORBIDDEN", None),
            GitHubError::Forbidden {
                message: "m".into()
            }
        );
        assert_eq!(
            error_of("INSUFFICIENT_SCOPES", None),
            GitHubError::Forbidden {
                message: "m".into()
            }
        );
        assert_eq!(
            error_of("SOMETHING_ELSE", None),
            GitHubError::GraphQl {
                kind: "SOMETHING_ELSE".into(),
                message: "m".into()
            }
        );
    }

    #[test]
    fn rate_limited_waits_until_the_reset_or_a_minute() {
        let reset = (NOW / 1000 + 30).to_string();
        assert_eq!(
            error_of("RATE_LIMITED", Some(&reset)),
            GitHubError::RateLimited {
                until: NOW / 1000 * 1000 + 30_000
            }
        );
        assert_eq!(
            error_of("RATE_LIMITED", None),
            GitHubError::RateLimited {
                until: NOW + 60_000
            }
        );
    }

    #[test]
    fn an_error_wins_over_partial_data_and_untyped_errors_keep_their_text() {
        let body = r#"{"data": {"a": 1}, "errors": [{"message": "Parse error on \"}\""}]}"#;
        let err = graphql_data::<Value>(&answer(body, None), NOW, "t").unwrap_err();
        assert_eq!(
            err,
            GitHubError::GraphQl {
                kind: String::new(),
                message: "Parse error on \"}\"".into()
            }
        );
    }

    #[test]
    fn garbage_and_empty_answers_are_decode_errors() {
        for body in ["not json", "{}", r#"{"data": null}"#] {
            let err = graphql_data::<Value>(&answer(body, None), NOW, "t").unwrap_err();
            assert!(matches!(err, GitHubError::Decode(_)), "{body}: {err}");
        }
    }
}
