//! The completion check: after an iteration, an LLM turns the agent's
//! structured output, the goal results and the issue's task list into a
//! completion checklist. `complete = allComplete && confidence >= threshold`.
//!
//! The output schema is generated from [`CheckOutput`] and sent with the
//! query; the answer is validated against it with a JSON Schema validator
//! plus two rules a schema cannot say (one item per task-list line;
//! `allComplete` only when every item is completed). An invalid answer gets
//! one retry with the `default_retry` prompt carrying the errors; a second
//! failure is a result with `error` set and `complete = false`. The completion check
//! never runs commands or looks at the repository itself, and an error is
//! never turned into "complete".

use std::sync::{Arc, LazyLock};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::engine::goal_outcome::GoalOutcome;
use crate::engine::tasklist::TaskListItem;
use crate::llm::{LlmClient, LlmError, LlmRequest, Usage};
use crate::prompts::{PromptId, PromptResolver};

/// The default confidence threshold.
pub const DEFAULT_THRESHOLD: f64 = 0.8;

/// The most characters of the agent's structured output put in the prompt.
const MAX_OUTPUT_CHARS: usize = 24_000;

/// The answer the LLM must give (`checklist`, `allComplete`, `summary`, `pendingActions`, `confidence`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckOutput {
    /// The tasks completion needs.
    pub checklist: Vec<ChecklistItem>,
    /// Whether every task is complete.
    pub all_complete: bool,
    /// A summary of the state of completion.
    pub summary: String,
    /// What is left when not complete.
    #[serde(default)]
    pub pending_actions: Vec<String>,
    /// Confidence from 0 to 1.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub confidence: f64,
}

/// One checklist item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ChecklistItem {
    /// An identifier; `task-<n>` for the issue's n-th task-list line.
    pub id: String,
    /// What the task is.
    pub description: String,
    /// Whether it is done.
    pub completed: bool,
    /// The grounds for `completed`.
    #[serde(default)]
    pub evidence: String,
}

static SCHEMA: LazyLock<Value> = LazyLock::new(|| schemars::schema_for!(CheckOutput).to_value());

/// The JSON schema of [`CheckOutput`], as sent to the LLM.
pub fn check_schema() -> &'static Value {
    &SCHEMA
}

/// What the completion check looks at (the agent's structured output with the issue and the goal results).
#[derive(Debug, Clone, PartialEq)]
pub struct CheckInput {
    /// The agent's structured output for the iteration.
    pub structured_output: Value,
    /// E.g. `complete.bug`.
    pub step_id: String,
    /// C3L `c2` (normally `complete`).
    pub c2: String,
    /// C3L `c3` (normally the task type).
    pub c3: String,
    /// The issue and the goal results.
    pub context: CheckContext,
    /// The previous check, when it found the work incomplete: this check is
    /// its retry (the `default_retry` edition, with the previous checklist
    /// and what changed since).
    pub previous: Option<PreviousCheck>,
}

/// An earlier check that found the work incomplete, and what changed since.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PreviousCheck {
    pub checklist: Vec<ChecklistItem>,
    /// Commits and files since that check, in a few lines.
    pub changes_since: String,
}

/// The context of a check.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CheckContext {
    /// `owner/repo#n`.
    pub issue_ref: String,
    /// The issue title.
    pub issue_title: String,
    /// The issue's task-list lines; the checklist must cover each.
    pub task_list: Vec<TaskListItem>,
    /// The goals closer ran.
    pub goal_results: Vec<GoalOutcome>,
    /// Failures present at the base commit that the repository tolerates:
    /// the checklist must judge, for each, whether it is within the issue's
    /// scope (`tolerated-<n>`; one in scope keeps the checklist open).
    pub tolerated_failures: Vec<String>,
}

/// The outcome of a check (complete or not, with the answer and its cost).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    /// `allComplete && confidence >= threshold`, and no error.
    pub complete: bool,
    /// The validated answer (empty when `error` is set).
    pub output: CheckOutput,
    /// The prompt file of the last query, when one was sent.
    pub prompt_used: Option<String>,
    /// Why there is no valid answer.
    pub error: Option<String>,
    /// Tokens of all queries of this check.
    pub usage: Usage,
    /// Queries sent (1, or 2 after a retry).
    pub attempts: u32,
    /// The LLM's failure when no answer came at all, for the engine to
    /// tell an outage (wait) from a refusal (fail the run); not stored.
    #[serde(skip)]
    pub llm_error: Option<LlmError>,
}

/// Checks completion with an LLM.
#[derive(Clone)]
pub struct CompletionCheck {
    llm: Arc<dyn LlmClient>,
    prompts: PromptResolver,
    threshold: f64,
}

impl std::fmt::Debug for CompletionCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionCheck")
            .field("threshold", &self.threshold)
            .finish()
    }
}

enum Attempt {
    Valid(CheckOutput),
    Invalid(Vec<String>),
    Failed(String),
}

impl CompletionCheck {
    /// A completion check with the repository's threshold (`completion.confidence_threshold`).
    pub fn new(llm: Arc<dyn LlmClient>, prompts: PromptResolver, threshold: f64) -> Self {
        Self {
            llm,
            prompts,
            threshold,
        }
    }

    /// Runs the check; never fails, an error is inside the result.
    pub async fn check(&self, input: &CheckInput) -> CheckResult {
        let mut result = CheckResult {
            complete: false,
            output: CheckOutput::default(),
            prompt_used: None,
            error: None,
            usage: Usage::default(),
            attempts: 0,
            llm_error: None,
        };
        let mut params = prompt_params(input);
        let default = PromptId::new(&input.c2, &input.c3, "default");
        let first = match &input.previous {
            Some(_) => default.with_edition("default_retry"),
            None => default.clone(),
        };
        let errors = match self.attempt(&first, &params, input, &mut result).await {
            Attempt::Valid(output) => return self.finish(result, output),
            Attempt::Failed(e) => return fail(result, e),
            Attempt::Invalid(errors) => errors,
        };
        tracing::info!(step = %input.step_id, ?errors, "completion check answer invalid, retrying once");
        params["validation_errors"] = json!(errors);
        let retry = default.with_edition("default_retry");
        match self.attempt(&retry, &params, input, &mut result).await {
            Attempt::Valid(output) => self.finish(result, output),
            Attempt::Failed(e) => fail(result, e),
            Attempt::Invalid(errors) => fail(
                result,
                format!(
                    "the LLM answer did not follow the schema twice: {}",
                    errors.join("; ")
                ),
            ),
        }
    }

    async fn attempt(
        &self,
        id: &PromptId,
        params: &Value,
        input: &CheckInput,
        result: &mut CheckResult,
    ) -> Attempt {
        let prompt = match self.prompts.render(id, params).await {
            Ok(p) => p,
            Err(e) => return Attempt::Failed(e.to_string()),
        };
        result.prompt_used = Some(prompt.origin.to_string());
        result.attempts += 1;
        let request = LlmRequest {
            system: Some(
                "You verify whether a coding agent's work is complete. Answer only through the schema."
                    .to_owned(),
            ),
            prompt: prompt.text,
            schema_name: "closer_checklist".to_owned(),
            schema: check_schema().clone(),
        };
        match self.llm.query(&request).await {
            Ok(answer) => {
                result.usage = result.usage + answer.usage;
                match validate(&answer.value, &input.context) {
                    Ok(output) => Attempt::Valid(output),
                    Err(errors) => Attempt::Invalid(errors),
                }
            }
            Err(e @ (LlmError::NotJson(_) | LlmError::NoContent(_))) => {
                Attempt::Invalid(vec![e.to_string()])
            }
            Err(e) => {
                result.llm_error = Some(e.clone());
                Attempt::Failed(e.to_string())
            }
        }
    }

    fn finish(&self, mut result: CheckResult, output: CheckOutput) -> CheckResult {
        result.complete = output.all_complete && output.confidence >= self.threshold;
        result.output = output;
        result
    }
}

fn fail(mut result: CheckResult, error: String) -> CheckResult {
    result.complete = false;
    result.error = Some(error);
    result
}

/// Checks an answer against the schema and the rules the schema cannot say.
pub fn validate(value: &Value, context: &CheckContext) -> Result<CheckOutput, Vec<String>> {
    let validator = jsonschema::validator_for(check_schema()).map_err(|e| {
        vec![format!(
            "the completion check schema itself is invalid: {e}"
        )]
    })?;
    let errors = schema_errors(&validator, value, 10);
    if !errors.is_empty() {
        return Err(errors);
    }
    let output: CheckOutput =
        serde_json::from_value(value.clone()).map_err(|e| vec![e.to_string()])?;
    let mut rules = Vec::new();
    for n in 1..=context.task_list.len() {
        let id = format!("task-{n}");
        if !output.checklist.iter().any(|i| i.id == id) {
            rules.push(format!(
                "the checklist has no item `{id}` for the issue's task-list line {n}"
            ));
        }
    }
    for (n, failure) in context.tolerated_failures.iter().enumerate() {
        let id = format!("tolerated-{}", n + 1);
        if !output.checklist.iter().any(|i| i.id == id) {
            rules.push(format!(
                "the checklist has no item `{id}` judging whether the tolerated failure `{failure}` is within the issue's scope"
            ));
        }
    }
    // Excusing a failing check is the one judgment that lets a run close
    // past it: it says why (decision 242).
    let unexplained = output
        .checklist
        .iter()
        .filter(|i| i.id.starts_with("tolerated-") && i.completed && i.evidence.trim().is_empty());
    for item in unexplained {
        rules.push(format!(
            "the item `{}` judges a failing check outside the issue's scope without evidence: say why",
            item.id
        ));
    }
    if output.all_complete && output.checklist.iter().any(|i| !i.completed) {
        rules.push("`allComplete` is true but an item is not completed".to_owned());
    }
    if rules.is_empty() {
        Ok(output)
    } else {
        Err(rules)
    }
}

/// At most `max` schema violations of `value`, each with where it is.
pub fn schema_errors(validator: &jsonschema::Validator, value: &Value, max: usize) -> Vec<String> {
    validator
        .iter_errors(value)
        .take(max)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("at {at}: {e}")
            }
        })
        .collect()
}

fn prompt_params(input: &CheckInput) -> Value {
    let c = &input.context;
    let mut output =
        serde_json::to_string_pretty(&input.structured_output).unwrap_or_else(|_| "{}".to_owned());
    if output.chars().count() > MAX_OUTPUT_CHARS {
        output = output.chars().take(MAX_OUTPUT_CHARS).collect();
        output.push_str("\n… (truncated)");
    }
    json!({
        "step_id": input.step_id,
        "issue_ref": c.issue_ref,
        "issue_title": c.issue_title,
        "task_list": c.task_list.iter().map(|t| t.text.clone()).collect::<Vec<_>>(),
        "structured_output": output,
        "goal_results": c.goal_results,
        "tolerated_failures": c.tolerated_failures,
        "validation_errors": [],
        "previous_checklist": input.previous.as_ref().map_or(json!([]), |p| json!(p.checklist)),
        "changes_since": input.previous.as_ref().map_or("", |p| p.changes_since.as_str()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(id: &str, done: bool) -> Value {
        json!({"id": id, "description": "d", "completed": done, "evidence": "e"})
    }

    #[test]
    fn the_schema_requires_the_checklist_fields() {
        let s = check_schema();
        let required: Vec<&str> = s["required"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        for f in ["checklist", "allComplete", "summary", "confidence"] {
            assert!(required.contains(&f), "{f} in {required:?}");
        }
        assert!(s["properties"]["pendingActions"].is_object());
    }

    #[test]
    fn each_tolerated_failure_needs_a_scope_judgment() {
        let ctx = CheckContext {
            tolerated_failures: vec!["tests/legacy.sh".into()],
            ..CheckContext::default()
        };
        let silent = json!({"checklist": [item("impl", true)], "allComplete": true, "summary": "s", "confidence": 0.9});
        let errors = validate(&silent, &ctx).unwrap_err();
        assert!(
            errors[0].contains("`tolerated-1`") && errors[0].contains("tests/legacy.sh"),
            "{errors:?}"
        );
        let judged = json!({"checklist": [item("impl", true), item("tolerated-1", true)], "allComplete": true, "summary": "s", "confidence": 0.9});
        assert!(validate(&judged, &ctx).is_ok());
        let unexplained = json!({"checklist": [item("impl", true),
            {"id": "tolerated-1", "description": "d", "completed": true, "evidence": " "}],
            "allComplete": true, "summary": "s", "confidence": 0.9});
        let errors = validate(&unexplained, &ctx).unwrap_err();
        assert!(
            errors[0].contains("`tolerated-1`") && errors[0].contains("without evidence"),
            "{errors:?}"
        );
    }

    #[test]
    fn answers_are_validated_by_schema_and_rules() {
        let tasks = CheckContext {
            task_list: vec![TaskListItem {
                text: "a".into(),
                checked: false,
            }],
            ..CheckContext::default()
        };
        let good = json!({"checklist": [item("task-1", true)], "allComplete": true, "summary": "s", "confidence": 0.9});
        assert!(validate(&good, &tasks).is_ok());
        let high = json!({"checklist": [item("task-1", true)], "allComplete": true, "summary": "s", "confidence": 1.5});
        assert!(validate(&high, &tasks).unwrap_err()[0].contains("/confidence"));
        let missing = json!({"checklist": [item("x", true)], "allComplete": true, "summary": "s", "confidence": 0.9});
        assert_eq!(
            validate(&missing, &tasks).unwrap_err(),
            vec!["the checklist has no item `task-1` for the issue's task-list line 1"]
        );
        let liar = json!({"checklist": [item("task-1", false)], "allComplete": true, "summary": "s", "confidence": 0.9});
        assert_eq!(
            validate(&liar, &tasks).unwrap_err(),
            vec!["`allComplete` is true but an item is not completed"]
        );
        let extra = json!({"checklist": [], "allComplete": false, "summary": "s", "confidence": 0.1, "mood": "ok"});
        assert!(validate(&extra, &CheckContext::default()).is_err());
    }
}
