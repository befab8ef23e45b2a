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
use super::wire::{parse, parse_value};
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
    /// Runs a GraphQL query (a read); `decode` reads the answer.
    pub(crate) async fn graphql_query(
        &self,
        query: &str,
        variables: Value,
    ) -> Result<ApiResponse, GitHubError> {
        let req = ApiRequest::graphql(json!({ "query": query, "variables": variables }), true);
        self.send(req).await
    }

    /// Runs a GraphQL mutation (a write): `None` in dry run, where it is
    /// recorded and not sent.
    pub(crate) async fn graphql_mutation(
        &self,
        mutation: &str,
        variables: Value,
    ) -> Result<Option<ApiResponse>, GitHubError> {
        let req = ApiRequest::graphql(json!({ "query": mutation, "variables": variables }), false);
        self.write(req).await
    }
}

/// The `data` of a 200 answer's `body` as `T`, or its first error as a
/// `GitHubError`. `reset` is the `x-ratelimit-reset` header, when there was
/// one; `now` the clock.
pub(crate) fn graphql_data<T: DeserializeOwned>(
    body: &str,
    reset: Option<&str>,
    now: Millis,
    what: &str,
) -> Result<T, GitHubError> {
    let answer: WireGraphQlAnswer = parse(body, what)?;
    if let Some(first) = answer.errors.into_iter().next() {
        let reset = reset.and_then(|v| v.trim().parse::<Millis>().ok());
        return Err(map_error(first, reset, now));
    }
    // GraphQL's `data` is an object; serde would read a struct whose
    // fields all have defaults from `[]` too, as an answer naming nothing.
    match answer.data {
        None | Some(Value::Null) => Err(GitHubError::decode(what, "no data and no errors")),
        Some(data @ Value::Object(_)) => parse_value(data, &format!("{what}: data")),
        Some(other) => Err(GitHubError::decode(
            what,
            format_args!("data: {} is not an object", kind(&other)),
        )),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
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

    const NOW: Millis = 1_700_000_000_000;

    fn error_of(kind: &str, reset: Option<&str>) -> GitHubError {
        let body = format!(r#"{{"data": null, "errors": [{{"type": "{kind}", "message": "m"}}]}}"#);
        graphql_data::<Value>(&body, reset, NOW, "t").unwrap_err()
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
        let body = r#"{"data": {"viewer": {"login": "x"}}}"#;
        let data: Value = graphql_data(body, None, NOW, "t").unwrap();
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
        let err = graphql_data::<Value>(body, None, NOW, "t").unwrap_err();
        assert_eq!(
            err,
            GitHubError::GraphQl {
                kind: String::new(),
                message: "Parse error on \"}\"".into()
            }
        );
    }

    /// `"data": []` was found by the `github_answer` fuzz target: serde
    /// reads a struct whose fields all have defaults from an empty array,
    /// so it answered "no such board" instead of an error.
    #[test]
    fn garbage_and_empty_answers_are_decode_errors() {
        for body in ["not json", "{}", r#"{"data": null}"#, r#"{"data": []}"#] {
            let err = graphql_data::<Value>(body, None, NOW, "t").unwrap_err();
            assert!(matches!(err, GitHubError::Decode(_)), "{body}: {err}");
        }
    }
}
