//! The LLM: one question in (a prompt and the JSON schema the answer must
//! follow), one structured JSON answer out, with the tokens it cost. Two
//! backends speak HTTP: [`openai`] (any OpenAI-compatible server) and
//! [`anthropic`]. Callers hold an `Arc<dyn LlmClient>` and never see a wire
//! format.
//!
//! Backends retry only what is transient (timeouts, connection errors, 5xx,
//! 429); an answer that is JSON but does not fit the schema is returned as it
//! is, because deciding what to do with it (the completion check's retry prompt) is the
//! caller's business. The engine holds its client wrapped in
//! [`redacting::Redacting`], the outgoing filter of every request. The API key is a `SecretString` and must never reach a
//! log line, an error text or a `Debug` output.

pub mod anthropic;
pub mod http;
pub mod openai;
pub mod redacting;
pub mod strict_schema;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use secrecy::SecretString;
use serde::{Deserialize, Serialize};

/// A boxed future, so [`LlmClient`] can be used as a trait object.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// One question for the LLM.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmRequest {
    /// Instructions that frame the task (the system prompt), if any.
    pub system: Option<String>,
    /// The prompt itself.
    pub prompt: String,
    /// A short identifier for the schema (`[a-zA-Z0-9_-]`, used as the
    /// OpenAI schema name and the Anthropic tool name).
    pub schema_name: String,
    /// The full JSON schema the answer must follow.
    pub schema: serde_json::Value,
}

/// Tokens one call used, for cost reporting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
}

impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        Usage {
            // The counts come from the server's answer: any number.
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
        }
    }
}

/// A structured answer. `value` is JSON, not yet checked against the schema.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmAnswer {
    /// The answer as the model gave it.
    pub value: serde_json::Value,
    /// Tokens the successful call used.
    pub usage: Usage,
    /// The model that answered, as the server reported it.
    pub model: String,
}

/// Why a query produced no structured answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    /// No answer within the timeout, on every attempt.
    #[error("the LLM did not answer within {}s ({attempts} attempts)", *ms as f64 / 1000.0)]
    Timeout { ms: u64, attempts: u32 },
    /// The server could not be reached.
    #[error("cannot reach the LLM server: {0}")]
    Transport(String),
    /// The server refused the request (4xx other than 429); retrying will not help.
    #[error("the LLM server rejected the request with HTTP {status}: {message}")]
    Rejected { status: u16, message: String },
    /// 5xx or 429 on every attempt.
    #[error("the LLM server kept failing (last HTTP {status}) after {attempts} attempts")]
    Unavailable { status: u16, attempts: u32 },
    /// The HTTP body or the answer in it is not JSON.
    #[error("the LLM answer is not JSON: {0}")]
    NotJson(String),
    /// The answer has no structured content where the wire format puts it.
    #[error("the LLM answer has no structured output: {0}")]
    NoContent(String),
    /// The model refused to answer.
    #[error("the model refused to answer: {0}")]
    Refusal(String),
    /// The answer was cut off at the output token limit.
    #[error("the LLM answer was truncated at the output token limit")]
    Truncated,
    /// A 2xx whose body is an error, not an answer (a proxy or a
    /// compatible server failing upstream, OpenRouter's `finish_reason:
    /// "error"`): a later try may work.
    #[error("the LLM server answered with an error: {0}")]
    ServerError(String),
    /// The client itself is misconfigured.
    #[error("LLM client configuration: {0}")]
    Config(String),
}

impl LlmError {
    /// The server could not be reached or kept failing (timeouts,
    /// connections, 5xx, 429): a later try may work as it is.
    pub fn is_outage(&self) -> bool {
        matches!(
            self,
            LlmError::Timeout { .. }
                | LlmError::Transport(_)
                | LlmError::Unavailable { .. }
                | LlmError::ServerError(_)
        )
    }

    /// The server refused the request itself (credentials, model, size) or
    /// the client is misconfigured: every later try would fail the same way.
    /// An answer cut at the output limit is one: the next check's answer is
    /// as long, or longer (decision 240).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            LlmError::Rejected { .. } | LlmError::Config(_) | LlmError::Truncated
        )
    }
}

/// The error a 2xx body carries instead of an answer (`{"error": …}` with
/// no answer beside it), as [`LlmError::ServerError`].
pub(crate) fn error_in_answer(answer: &serde_json::Value, answer_key: &str) -> Option<LlmError> {
    if answer.get(answer_key).is_some() {
        return None;
    }
    let error = answer.get("error").filter(|e| !e.is_null())?;
    let message = error
        .get("message")
        .and_then(serde_json::Value::as_str)
        .map_or_else(|| error.to_string(), str::to_owned);
    Some(LlmError::ServerError(http::excerpt(&message)))
}

/// The JSON inside a Markdown code fence (```` ```json … ``` ````), which
/// some compatible servers wrap a structured answer in; the text itself
/// when it is not fenced.
pub(crate) fn unfenced(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(rest) = trimmed.strip_prefix("```") else {
        return text;
    };
    let Some(body) = rest.strip_suffix("```") else {
        return text;
    };
    // The info string (`json`) runs to the first line break.
    body.split_once('\n').map_or(body, |(_, inner)| inner)
}

/// Anything that answers an [`LlmRequest`].
pub trait LlmClient: Send + Sync {
    /// Asks once (transient failures retried inside), returning the structured answer.
    fn query<'a>(&'a self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmAnswer, LlmError>>;
}

/// The wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// `POST <base_url>/chat/completions` with `response_format: json_schema`.
    Openai,
    /// `POST <base_url>/v1/messages` with one forced tool.
    Anthropic,
}

/// How transient failures are retried.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in total, at least 1.
    pub max_attempts: u32,
    /// The first backoff; it doubles per attempt.
    pub base_delay: Duration,
    /// No wait is longer than this, `retry-after` included.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
        }
    }
}

/// Everything a backend needs.
#[derive(Debug, Clone)]
pub struct LlmSettings {
    /// Which wire format.
    pub provider: Provider,
    /// E.g. `https://api.openai.com/v1` or `https://api.anthropic.com`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer` (openai) or `x-api-key` (anthropic).
    pub api_key: SecretString,
    /// The model name.
    pub model: String,
    /// Output token limit (Anthropic requires one; `[llm]
    /// max_output_tokens`, default 8192).
    pub max_output_tokens: u32,
    /// Per-attempt timeout (`[llm] timeout_secs`, default 120 s).
    pub timeout: Duration,
    /// Retry policy for transient failures.
    pub retry: RetryPolicy,
}

impl LlmSettings {
    /// Settings with the defaults for everything but the essentials.
    pub fn new(provider: Provider, base_url: &str, api_key: SecretString, model: &str) -> Self {
        Self {
            provider,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key,
            model: model.to_owned(),
            max_output_tokens: 8_192,
            timeout: Duration::from_secs(120),
            retry: RetryPolicy::default(),
        }
    }
}

impl From<&crate::config::server::LlmConfig> for LlmSettings {
    /// The operator's `[llm]` / `CLOSER_LLM_*` settings with the defaults for
    /// the rest. A missing key becomes an empty one (no `Authorization` header
    /// for openai: local servers need none).
    fn from(c: &crate::config::server::LlmConfig) -> Self {
        let provider = match c.provider {
            crate::config::server::LlmProvider::OpenAi => Provider::Openai,
            crate::config::server::LlmProvider::Anthropic => Provider::Anthropic,
        };
        let key = c
            .api_key
            .clone()
            .unwrap_or_else(|| SecretString::from(String::new()));
        LlmSettings {
            max_output_tokens: c.max_output_tokens,
            timeout: c.timeout,
            ..LlmSettings::new(provider, &c.base_url, key, &c.model)
        }
    }
}

/// Builds the backend the settings name.
pub fn build_client(settings: LlmSettings) -> Result<Arc<dyn LlmClient>, LlmError> {
    Ok(match settings.provider {
        Provider::Openai => Arc::new(openai::OpenAiClient::new(settings)?),
        Provider::Anthropic => Arc::new(anthropic::AnthropicClient::new(settings)?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::server::{LlmConfig, LlmProvider};

    #[test]
    fn a_fenced_answer_is_unwrapped_and_an_error_body_is_an_outage() {
        assert_eq!(unfenced("```json\n{\"a\": 1}\n```"), "{\"a\": 1}\n");
        assert_eq!(unfenced("  ```\n{}\n```  "), "{}\n");
        assert_eq!(unfenced("{\"a\": \"```\"}"), "{\"a\": \"```\"}");
        let error = serde_json::json!({"error": {"message": "upstream overloaded", "code": 502}});
        let e = error_in_answer(&error, "choices").unwrap();
        assert_eq!(e, LlmError::ServerError("upstream overloaded".to_owned()));
        assert!(e.is_outage() && !e.is_refusal());
        let answered = serde_json::json!({"choices": [], "error": null});
        assert!(error_in_answer(&answered, "choices").is_none());
        assert!(
            LlmError::Truncated.is_refusal(),
            "a setting to raise, not a wait"
        );
    }

    #[test]
    fn the_operator_config_becomes_settings_without_showing_the_key() {
        let c = LlmConfig {
            provider: LlmProvider::Anthropic,
            base_url: "https://api.anthropic.com/".into(),
            api_key: Some(SecretString::from("sk-ant-secret")),
            model: "claude".into(),
            input_usd_per_mtok: None,
            output_usd_per_mtok: None,
            max_output_tokens: 16_000,
            timeout: Duration::from_secs(600),
        };
        let s = LlmSettings::from(&c);
        assert_eq!(s.provider, Provider::Anthropic);
        assert_eq!(
            (s.max_output_tokens, s.timeout),
            (16_000, Duration::from_secs(600))
        );
        assert_eq!(s.base_url, "https://api.anthropic.com");
        assert!(!format!("{s:?}").contains("sk-ant-secret"));
        let client = openai::OpenAiClient::new(LlmSettings::from(&LlmConfig {
            provider: LlmProvider::OpenAi,
            base_url: "http://127.0.0.1:1/v1".into(),
            api_key: Some(SecretString::from("sk-openai-secret")),
            model: "m".into(),
            input_usd_per_mtok: None,
            output_usd_per_mtok: None,
            max_output_tokens: 8_192,
            timeout: Duration::from_secs(120),
        }))
        .unwrap();
        assert!(!format!("{client:?}").contains("sk-openai-secret"));
    }
}
