//! The LLM's outgoing filter: a client that hands the backend each request
//! with its prompt and system text passed through the [`Redactor`]. The
//! engine holds its LLM only through this wrapper, so no question it asks
//! (task type, completion check, question corpus, judgment) can carry a
//! secret out.

use std::borrow::Cow;
use std::sync::Arc;

use super::{BoxFuture, LlmAnswer, LlmClient, LlmError, LlmRequest};
use crate::redact::{Channel, Redactor};

/// `inner`, with every request redacted first.
pub struct Redacting {
    inner: Arc<dyn LlmClient>,
    redactor: Redactor,
}

impl Redacting {
    pub fn wrap(inner: Arc<dyn LlmClient>, redactor: Redactor) -> Arc<dyn LlmClient> {
        Arc::new(Redacting { inner, redactor })
    }
}

impl LlmClient for Redacting {
    fn query<'a>(&'a self, request: &'a LlmRequest) -> BoxFuture<'a, Result<LlmAnswer, LlmError>> {
        Box::pin(async move {
            let prompt = self.redactor.redact(Channel::Llm, &request.prompt);
            let system = request
                .system
                .as_deref()
                .map(|s| self.redactor.redact(Channel::Llm, s));
            let changed = matches!(prompt, Cow::Owned(_)) || matches!(system, Some(Cow::Owned(_)));
            if !changed {
                return self.inner.query(request).await;
            }
            let clean = LlmRequest {
                system: system.map(Cow::into_owned),
                prompt: prompt.into_owned(),
                ..request.clone()
            };
            self.inner.query(&clean).await
        })
    }
}
