//! Task classification: a `type:*` label wins; otherwise the LLM picks one of
//! the seven task types through a schema. The issue text is data for the
//! prompt, never instructions; an answer outside the seven types is an error,
//! not a guess.

use crate::model::Named;
use std::sync::{Arc, LazyLock};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::llm::{LlmClient, LlmError, LlmRequest, Usage};
use crate::model::TaskType;
use crate::prompts::fence::fenced;
use crate::prompts::{PromptId, PromptResolver};

impl JsonSchema for TaskType {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> std::borrow::Cow<'static, str> {
        "TaskType".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let names: Vec<&str> = TaskType::ALL.iter().map(|t| t.as_str()).collect();
        schemars::json_schema!({ "type": "string", "enum": names })
    }
}

/// The LLM's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassifyAnswer {
    /// The task type.
    pub task_type: TaskType,
    /// One sentence on why.
    pub reason: String,
}

static SCHEMA: LazyLock<Value> = LazyLock::new(|| schemars::schema_for!(ClassifyAnswer).to_value());

/// How the type was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassifiedBy {
    /// A `type:*` label.
    Label,
    /// The LLM, with its reason.
    Llm { reason: String },
}

/// A classification.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Classification {
    /// The type.
    pub task_type: TaskType,
    /// How it was found.
    pub by: ClassifiedBy,
    /// Tokens spent (zero for a label).
    pub usage: Usage,
}

/// The task type a `type:<name>` label names, if any (the first valid one).
pub fn type_from_labels(labels: &[String]) -> Option<TaskType> {
    labels
        .iter()
        .filter_map(|l| l.strip_prefix("type:"))
        .find_map(|t| TaskType::parse(t.trim()))
}

/// Why an issue could not be classified.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClassifyError {
    /// The LLM gave no answer (the engine tells an outage from a refusal).
    #[error(transparent)]
    Llm(#[from] LlmError),
    /// The prompt could not be rendered, or the answer does not fit.
    #[error("{0}")]
    Other(String),
}

/// Classifies an issue: label first, else one LLM call.
pub async fn classify(
    labels: &[String],
    title: &str,
    body: &str,
    llm: &Arc<dyn LlmClient>,
    prompts: &PromptResolver,
) -> Result<Classification, ClassifyError> {
    let other = |e: &dyn std::fmt::Display| ClassifyError::Other(e.to_string());
    if let Some(task_type) = type_from_labels(labels) {
        return Ok(Classification {
            task_type,
            by: ClassifiedBy::Label,
            usage: Usage::default(),
        });
    }
    let prompt = prompts
        .render(
            &PromptId::new("classify", "task", "default"),
            &json!({ "issue_title": fenced(title), "issue_body": fenced(body) }),
        )
        .await
        .map_err(|e| other(&e))?;
    let request = LlmRequest {
        system: Some("You classify GitHub issues. Answer only through the schema.".to_owned()),
        prompt: prompt.text,
        schema_name: "task_type".to_owned(),
        schema: SCHEMA.clone(),
    };
    let answer = llm.query(&request).await?;
    let validator = jsonschema::validator_for(&SCHEMA).map_err(|e| other(&e))?;
    if let Some(e) = validator.iter_errors(&answer.value).next() {
        return Err(ClassifyError::Other(format!(
            "the classification answer does not follow the schema: {e}"
        )));
    }
    let parsed: ClassifyAnswer = serde_json::from_value(answer.value).map_err(|e| other(&e))?;
    Ok(Classification {
        task_type: parsed.task_type,
        by: ClassifiedBy::Llm {
            reason: parsed.reason,
        },
        usage: answer.usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_type_label_wins() {
        let labels = vec![
            "closer".to_owned(),
            "type:nonsense".to_owned(),
            "type:bug".to_owned(),
        ];
        assert_eq!(type_from_labels(&labels), Some(TaskType::Bug));
        assert_eq!(type_from_labels(&["bug".to_owned()]), None);
    }

    #[test]
    fn the_schema_lists_the_seven_types() {
        assert_eq!(
            SCHEMA["properties"]["task_type"]["enum"]
                .as_array()
                .map(Vec::len),
            Some(7)
        );
    }
}
