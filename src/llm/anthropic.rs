//! The `anthropic` backend: `POST <base_url>/v1/messages` with one tool whose
//! `input_schema` is the schema and `tool_choice` forcing it; the answer is
//! that tool call's `input`. It never logs the request or the key.

use reqwest::header::{HeaderMap, HeaderValue};
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use crate::llm::http::{HttpCaller, excerpt};
use crate::llm::{BoxFuture, LlmAnswer, LlmClient, LlmError, LlmRequest, LlmSettings, Usage};

/// The API version sent in `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A client for the Anthropic Messages API and one model.
#[derive(Debug)]
pub struct AnthropicClient {
    settings: LlmSettings,
    http: HttpCaller,
    headers: HeaderMap,
}

impl AnthropicClient {
    /// A client from settings; fails only on an unusable key or HTTP setup.
    pub fn new(settings: LlmSettings) -> Result<Self, LlmError> {
        let http = HttpCaller::new(settings.timeout, settings.retry)?;
        let mut key = HeaderValue::from_str(settings.api_key.expose_secret())
            .map_err(|_| LlmError::Config("the API key is not a valid header value".to_owned()))?;
        key.set_sensitive(true);
        let mut headers = HeaderMap::new();
        headers.insert("x-api-key", key);
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        Ok(Self {
            settings,
            http,
            headers,
        })
    }

    /// The request body for `request`.
    pub fn body(&self, request: &LlmRequest) -> Value {
        let mut body = json!({
            "model": self.settings.model,
            "max_tokens": self.settings.max_output_tokens,
            "messages": [{ "role": "user", "content": request.prompt }],
            "tools": [{
                "name": request.schema_name,
                "description": "Give your answer by calling this tool with arguments that follow its schema.",
                "input_schema": request.schema,
            }],
            "tool_choice": { "type": "tool", "name": request.schema_name },
        });
        if let Some(system) = &request.system {
            body["system"] = json!(system);
        }
        body
    }

    async fn query_inner(&self, request: &LlmRequest) -> Result<LlmAnswer, LlmError> {
        let url = format!("{}/v1/messages", self.settings.base_url);
        let answer = self
            .http
            .post_json(
                &url,
                &self.headers,
                &self.body(request),
                &self.settings.api_key,
            )
            .await?;
        parse_answer(&answer, &request.schema_name)
    }
}

impl LlmClient for AnthropicClient {
    fn query<'a>(&'a self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmAnswer, LlmError>> {
        Box::pin(self.query_inner(request))
    }
}

/// Reads a Messages API answer: the `tool_use` block named `tool`.
pub fn parse_answer(answer: &Value, tool: &str) -> Result<LlmAnswer, LlmError> {
    let usage = Usage {
        input_tokens: answer
            .pointer("/usage/input_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
        output_tokens: answer
            .pointer("/usage/output_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(0),
    };
    if let Some(error) = super::error_in_answer(answer, "content") {
        return Err(error);
    }
    match answer.get("stop_reason").and_then(Value::as_str) {
        Some("max_tokens") => return Err(LlmError::Truncated),
        Some("refusal") => {
            let said = text_blocks(answer);
            return Err(LlmError::Refusal(if said.is_empty() {
                "the model stopped with `refusal`".to_owned()
            } else {
                excerpt(&said)
            }));
        }
        _ => {}
    }
    let blocks = answer
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| LlmError::NoContent("no `content` in the answer".to_owned()))?;
    let call = blocks
        .iter()
        .find(|b| {
            b.get("type").and_then(Value::as_str) == Some("tool_use")
                && b.get("name").and_then(Value::as_str) == Some(tool)
        })
        .ok_or_else(|| {
            let said = text_blocks(answer);
            LlmError::NoContent(format!(
                "no call of the tool `{tool}`; the model said: {}",
                excerpt(&said)
            ))
        })?;
    let value = match call.get("input") {
        Some(Value::Object(map)) => Value::Object(map.clone()),
        // Some compatible servers send the arguments as a JSON string.
        Some(Value::String(s)) => serde_json::from_str(s)
            .map_err(|e| LlmError::NotJson(format!("{e}: {}", excerpt(s))))?,
        other => {
            return Err(LlmError::NotJson(format!(
                "the tool input is not an object: {}",
                excerpt(&other.map(Value::to_string).unwrap_or_default())
            )));
        }
    };
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

fn text_blocks(answer: &Value) -> String {
    answer
        .get("content")
        .and_then(Value::as_array)
        .map(|blocks| {
            blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_calls_are_read_and_failures_named() {
        let ok = json!({"model": "c", "stop_reason": "tool_use",
            "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "name": "t", "input": {"a": 1}}],
            "usage": {"input_tokens": 7, "output_tokens": 2}});
        let a = parse_answer(&ok, "t").unwrap();
        assert_eq!(a.value, json!({"a": 1}));
        assert_eq!(
            a.usage,
            Usage {
                input_tokens: 7,
                output_tokens: 2
            }
        );
        assert_eq!(
            parse_answer(&json!({"stop_reason": "max_tokens", "content": []}), "t"),
            Err(LlmError::Truncated)
        );
        assert!(matches!(
            parse_answer(&json!({"stop_reason": "refusal", "content": []}), "t"),
            Err(LlmError::Refusal(_))
        ));
        let talk =
            json!({"stop_reason": "end_turn", "content": [{"type": "text", "text": "no tool"}]});
        assert!(
            matches!(parse_answer(&talk, "t"), Err(LlmError::NoContent(m)) if m.contains("no tool"))
        );
    }
}
