//! The one error type of the GitHub client: a closed set the engine can match
//! on (retry later, re-check, tell the operator). Display texts are safe to log
//! and to show: they never contain a token, a JWT or a private key.

use crate::clock::Millis;

/// Why a GitHub call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GitHubError {
    /// 404: the resource does not exist or the installation cannot see it.
    #[error("GitHub: not found")]
    NotFound,
    /// 410: the resource was deleted for good (an issue a repository admin
    /// deleted, or a repository's issues turned off).
    #[error("GitHub: gone (410): {message}")]
    Gone { message: String },
    /// 401: the JWT or installation token was rejected.
    #[error("GitHub rejected the App's credentials (401)")]
    Unauthorized,
    /// 403 that is not a rate limit: the App lacks a permission.
    #[error("GitHub refused the request (403): {message}")]
    Forbidden { message: String },
    /// 400/422: GitHub says the request is invalid; `codes` are the
    /// `errors[].code` values (e.g. `already_exists`), `details` the
    /// reasons GitHub gives beside them (`errors[].message`, or the error
    /// itself when it is a string: "No commits between main and …"),
    /// which its top `message` ("Validation Failed") does not say.
    #[error(
        "GitHub rejected the request ({status}): {message}{}",
        joined_details(details)
    )]
    Validation {
        status: u16,
        message: String,
        codes: Vec<String>,
        details: Vec<String>,
    },
    /// A rate limit that lasts longer than we are willing to wait in-process,
    /// or that outlasted every attempt. `until` is when to try again.
    #[error("GitHub rate limit reached; try again after {until} (ms since epoch)")]
    RateLimited { until: Millis },
    /// 5xx after every attempt.
    #[error("GitHub server error ({status})")]
    Server { status: u16 },
    /// The request could not be completed (connection, timeout) and repeating
    /// it is safe, but every attempt failed.
    #[error("network error talking to GitHub: {0}")]
    Network(String),
    /// A write that may have been applied by GitHub although we saw no
    /// success: its answer was lost (`status` None) or was a 5xx. It was not
    /// repeated: re-check (e.g. find the comment by its marker).
    #[error("{method} {path} may have been applied by GitHub (answer: {}); not repeated",
        status.map_or_else(|| "none".to_owned(), |s| s.to_string()))]
    MaybeApplied {
        method: String,
        path: String,
        status: Option<u16>,
    },
    /// No App credentials are configured (dry run without credentials).
    #[error("no GitHub App credentials configured")]
    NoCredentials,
    /// GitHub answered something we could not understand.
    #[error("could not decode GitHub's answer: {0}")]
    Decode(String),
    /// Settings are unusable (bad PEM, bad URL).
    #[error("GitHub client configuration: {0}")]
    Config(String),
    /// The GraphQL API answered with an error of a type the client has no
    /// rule for (a bad argument, an invalid option id, ...). `kind` is
    /// GitHub's `errors[].type`, empty when it gave none.
    #[error("GitHub GraphQL error {kind}: {message}")]
    GraphQl { kind: String, message: String },
    /// A status the client has no rule for (e.g. 409).
    #[error("GitHub answered with unexpected status {status}: {message}")]
    Unexpected { status: u16, message: String },
}

/// The most characters of GitHub's answer a decode error repeats: a value
/// may be megabytes long, and the error is logged and stored.
const MAX_DECODE_DETAIL: usize = 300;

impl GitHubError {
    /// The resource is not there: never was, or was deleted (404, 410).
    pub fn is_gone(&self) -> bool {
        matches!(self, GitHubError::NotFound | GitHubError::Gone { .. })
    }

    /// `Decode("<what>: <detail>")`: the answer, then what is wrong in it. A
    /// long detail keeps its start and its end (where serde names the line
    /// and column), cut in between.
    pub(crate) fn decode(what: &str, detail: impl std::fmt::Display) -> GitHubError {
        let detail = detail.to_string();
        let chars = detail.chars().count();
        let detail = if chars <= MAX_DECODE_DETAIL {
            detail
        } else {
            let head: String = detail.chars().take(MAX_DECODE_DETAIL - 80).collect();
            let tail: String = detail.chars().skip(chars - 60).collect();
            format!("{head} … {tail}")
        };
        GitHubError::Decode(format!("{what}: {detail}"))
    }

    /// Whether a validation error carries the given `errors[].code`.
    pub fn has_code(&self, code: &str) -> bool {
        matches!(self, GitHubError::Validation { codes, .. } if codes.iter().any(|c| c == code))
    }

    /// Transient failures a job may retry later as they are.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            GitHubError::RateLimited { .. } | GitHubError::Server { .. } | GitHubError::Network(_)
        )
    }
}

/// `details` after a validation error's message: `" (a; b)"`, or nothing.
fn joined_details(details: &[String]) -> String {
    match details.is_empty() {
        true => String::new(),
        false => format!(" ({})", details.join("; ")),
    }
}
