//! The HTTP exchange both backends share: POST a JSON body, retry what is
//! transient with exponential backoff (honouring `retry-after`), and turn
//! everything else into a clear [`LlmError`]. It must never put a header
//! value (the API key) into an error or a log line. An answer's body is
//! read up to [`MAX_ANSWER_BYTES`]; a larger one is an error, not retried.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use secrecy::{ExposeSecret, SecretString};

use crate::body::BodyError;
use crate::llm::{LlmError, RetryPolicy};

/// The most of an answer's body read: a structured answer is a few KiB,
/// so this only stops a broken endpoint or proxy from filling closer's
/// memory.
pub const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;

/// A reqwest client with the timeout and retry policy of one backend.
#[derive(Debug, Clone)]
pub struct HttpCaller {
    client: reqwest::Client,
    timeout: Duration,
    retry: RetryPolicy,
}

impl HttpCaller {
    /// A caller whose every attempt times out after `timeout`.
    pub fn new(timeout: Duration, retry: RetryPolicy) -> Result<Self, LlmError> {
        crate::install_crypto_provider();
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| LlmError::Config(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            client,
            timeout,
            retry,
        })
    }

    /// POSTs `body` to `url` until a non-transient answer, returning the
    /// parsed JSON of a 2xx. `secret` is scrubbed from any error text.
    pub async fn post_json(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: &serde_json::Value,
        secret: &SecretString,
    ) -> Result<serde_json::Value, LlmError> {
        let attempts = self.retry.max_attempts.max(1);
        let mut last = LlmError::Transport("no attempt was made".to_owned());
        for attempt in 1..=attempts {
            let sent = self
                .client
                .post(url)
                .headers(headers.clone())
                .json(body)
                .send()
                .await;
            let response = match sent {
                Ok(r) => {
                    let (status, wait) = (r.status(), retry_after(r.headers()));
                    match crate::body::read_capped(r, MAX_ANSWER_BYTES).await {
                        Ok(body) => Ok((status, wait, String::from_utf8_lossy(&body).into_owned())),
                        Err(BodyError::Read(e)) => Err(e),
                        Err(e @ BodyError::TooLarge(_)) => {
                            return Err(LlmError::NotJson(format!("HTTP body: {e}")));
                        }
                    }
                }
                Err(e) => Err(e),
            };
            let wait = match response {
                Err(e) => {
                    last = if e.is_timeout() {
                        LlmError::Timeout {
                            ms: self.timeout.as_millis() as u64,
                            attempts: attempt,
                        }
                    } else {
                        LlmError::Transport(scrub(&without_url(&e), secret))
                    };
                    self.backoff(attempt)
                }
                Ok((status, retry_after, text)) => {
                    if status.is_success() {
                        return serde_json::from_str(&text).map_err(|e| {
                            LlmError::NotJson(format!("HTTP body: {e}: {}", excerpt(&text)))
                        });
                    }
                    if !(status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS) {
                        return Err(LlmError::Rejected {
                            status: status.as_u16(),
                            message: scrub(&error_message(&text), secret),
                        });
                    }
                    last = LlmError::Unavailable {
                        status: status.as_u16(),
                        attempts: attempt,
                    };
                    retry_after
                        .map(|d| d.min(self.retry.max_delay))
                        .unwrap_or_else(|| self.backoff(attempt))
                }
            };
            if attempt < attempts {
                tracing::warn!(attempt, wait_ms = wait.as_millis() as u64, error = %last, "LLM call failed, retrying");
                tokio::time::sleep(wait).await;
            }
        }
        Err(last)
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let factor = 2u32.saturating_pow(attempt.saturating_sub(1));
        self.retry
            .base_delay
            .saturating_mul(factor)
            .min(self.retry.max_delay)
    }
}

/// `retry-after` in seconds (integer or decimal); the HTTP-date form falls
/// back to the backoff.
/// The longest `Retry-After` honoured.
const MAX_RETRY_AFTER_SECS: f64 = 3600.0;

fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let secs: f64 = value.trim().parse().ok()?;
    // A server may say anything: at most an hour, and never a panic.
    (secs.is_finite() && secs >= 0.0)
        .then(|| Duration::try_from_secs_f64(secs.min(MAX_RETRY_AFTER_SECS)).ok())
        .flatten()
}

/// The provider's own error message when the body has one (`error.message`
/// in both formats), else the start of the body.
fn error_message(body: &str) -> String {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()
        .and_then(|v| {
            v.pointer("/error/message")
                .and_then(|m| m.as_str())
                .map(str::to_owned)
        })
        .unwrap_or_else(|| excerpt(body))
}

/// At most 300 characters of `text`, for error messages.
pub(crate) fn excerpt(text: &str) -> String {
    let mut out: String = text.chars().take(300).collect();
    if text.chars().count() > 300 {
        out.push('…');
    }
    out
}

fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(url.as_str(), "<url>");
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

fn scrub(text: &str, secret: &SecretString) -> String {
    let key = secret.expose_secret();
    if key.len() >= 4 {
        text.replace(key, "[redacted]")
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_reads_seconds_and_ignores_dates() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after", "0.5".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(500)));
        h.insert(
            "retry-after",
            "Wed, 21 Oct 2015 07:28:00 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), None);
        let mut h = HeaderMap::new();
        h.insert("retry-after", "1e20".parse().unwrap());
        assert_eq!(
            retry_after(&h),
            Some(Duration::from_secs(3600)),
            "clamped, no panic"
        );
    }

    #[test]
    fn provider_error_messages_are_extracted_and_the_key_scrubbed() {
        let secret = SecretString::from("sk-very-secret");
        let body = r#"{"error":{"message":"Incorrect API key provided: sk-very-secret"}}"#;
        assert_eq!(
            scrub(&error_message(body), &secret),
            "Incorrect API key provided: [redacted]"
        );
        assert_eq!(error_message("plain text"), "plain text");
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let c = HttpCaller::new(
            Duration::from_secs(1),
            RetryPolicy {
                max_attempts: 5,
                base_delay: Duration::from_millis(100),
                max_delay: Duration::from_millis(300),
            },
        )
        .unwrap();
        assert_eq!(c.backoff(1), Duration::from_millis(100));
        assert_eq!(c.backoff(2), Duration::from_millis(200));
        assert_eq!(c.backoff(3), Duration::from_millis(300));
    }
}
