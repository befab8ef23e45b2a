//! The `openai` backend: any OpenAI-compatible server.
//! `POST <base_url>/chat/completions` with `response_format: json_schema`
//! (strict), answer in `choices[0].message.content`. It reads only the fields
//! it needs from the answer and never logs the request (it holds issue text)
//! or the key.

use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue};
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use crate::llm::http::{HttpCaller, excerpt};
use crate::llm::strict_schema::to_strict;
use crate::llm::{BoxFuture, LlmAnswer, LlmClient, LlmError, LlmRequest, LlmSettings, Usage};

/// A client for one OpenAI-compatible server and model.
#[derive(Debug)]
pub struct OpenAiClient {
    settings: LlmSettings,
    http: HttpCaller,
    headers: HeaderMap,
}

impl OpenAiClient {
    /// A client from settings; fails only on an unusable key or HTTP setup.
    pub fn new(settings: LlmSettings) -> Result<Self, LlmError> {
        let http = HttpCaller::new(settings.timeout, settings.retry)?;
        let mut headers = HeaderMap::new();
        let key = settings.api_key.expose_secret();
        if !key.is_empty() {
            let mut auth = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                LlmError::Config("the API key is not a valid header value".to_owned())
            })?;
            auth.set_sensitive(true);
            headers.insert(AUTHORIZATION, auth);
        }
        Ok(Self {
            settings,
            http,
            headers,
        })
    }

    /// The request body for `request`. No output limit is sent: compatible
    /// servers disagree on its name (`max_tokens` / `max_completion_tokens`),
    /// and a truncated answer is detected from `finish_reason` anyway.
    pub fn body(&self, request: &LlmRequest) -> Value {
        let mut messages = Vec::new();
        if let Some(system) = &request.system {
            messages.push(json!({ "role": "system", "content": system }));
        }
        messages.push(json!({ "role": "user", "content": request.prompt }));
        json!({
            "model": self.settings.model,
            "messages": messages,
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema_name,
                    "schema": to_strict(&request.schema),
                    "strict": true,
                },
            },
        })
    }

    async fn query_inner(&self, request: &LlmRequest) -> Result<LlmAnswer, LlmError> {
        let url = format!("{}/chat/completions", self.settings.base_url);
        let answer = self
            .http
            .post_json(
                &url,
                &self.headers,
                &self.body(request),
                &self.settings.api_key,
            )
            .await?;
        parse_answer(&answer)
    }
}

impl LlmClient for OpenAiClient {
    fn query<'a>(&'a self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmAnswer, LlmError>> {
        Box::pin(self.query_inner(request))
    }
}

/// Reads a chat-completions answer.
pub fn parse_answer(answer: &Value) -> Result<LlmAnswer, LlmError> {
    let usage = Usage {
        input_tokens: answer
            .pointer("/usage/prompt_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        output_tokens: answer
            .pointer("/usage/completion_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    };
    if let Some(error) = super::error_in_answer(answer, "choices") {
        return Err(error);
    }
    let choice = answer
        .pointer("/choices/0")
        .ok_or_else(|| LlmError::NoContent("no `choices[0]` in the answer".to_owned()))?;
    if let Some(refusal) = choice.pointer("/message/refusal").and_then(Value::as_str) {
        return Err(LlmError::Refusal(excerpt(refusal)));
    }
    match choice.get("finish_reason").and_then(Value::as_str) {
        Some("length") => return Err(LlmError::Truncated),
        // OpenRouter: the upstream provider failed mid-answer.
        Some("error") => {
            let said = choice
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("the upstream provider failed");
            return Err(LlmError::ServerError(excerpt(said)));
        }
        Some("content_filter") => {
            return Err(LlmError::Refusal(
                "stopped by the content filter".to_owned(),
            ));
        }
        _ => {}
    }
    let content = choice
        .pointer("/message/content")
        .and_then(Value::as_str)
        .ok_or_else(|| LlmError::NoContent("`choices[0].message.content` is missing".to_owned()))?;
    let value = serde_json::from_str(super::unfenced(content))
        .map_err(|e| LlmError::NotJson(format!("{e}: {}", excerpt(content))))?;
    Ok(LlmAnswer {
        value,
        usage,
        model: answer
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_and_failures_named() {
        let ok = json!({"model": "m", "choices": [{"message": {"content": "{\"a\":1}"}, "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 3}});
        let a = parse_answer(&ok).unwrap();
        assert_eq!(a.value, json!({"a": 1}));
        assert_eq!(
            a.usage,
            Usage {
                input_tokens: 10,
                output_tokens: 3
            }
        );
        let cut =
            json!({"choices": [{"message": {"content": "{\"a\":"}, "finish_reason": "length"}]});
        assert_eq!(parse_answer(&cut), Err(LlmError::Truncated));
        let no = json!({"choices": [{"message": {"content": null, "refusal": "I can't"}, "finish_reason": "stop"}]});
        assert_eq!(parse_answer(&no), Err(LlmError::Refusal("I can't".into())));
        let text = json!({"choices": [{"message": {"content": "sure!"}, "finish_reason": "stop"}]});
        assert!(matches!(parse_answer(&text), Err(LlmError::NotJson(_))));
        assert!(matches!(
            parse_answer(&json!({})),
            Err(LlmError::NoContent(_))
        ));
    }
}
