//! Completion handlers: `issue`, `project`, `iterate`, `manual`,
//! `custom` behind one trait. Each builds the initial and the continuation
//! prompt (through the C3L resolver: `initial/<type>`, `continuation/<type>`),
//! states its completion criteria, and decides whether an iteration completes
//! the run. A handler decides from the iteration summary it is given; it
//! never reads GitHub, and only `custom` starts a process.

pub mod custom;
pub mod issue;
pub mod iterate;
pub mod manual;
pub mod project;
pub mod subprocess;

use crate::model::Named;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::agent::confine::Jail;
use crate::config::repo::{CompletionConfig, CompletionType};
use crate::engine::completion_check::CheckResult;
use crate::engine::goal_outcome::{GoalOutcome, failed_required};
use crate::llm::BoxFuture;
use crate::model::TaskType;
use crate::prompts::fence::{fenced, one_line};
use crate::prompts::{PromptError, PromptId, PromptResolver, RenderedPrompt};

/// The completion criteria: short for logs, detailed for the prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionCriteria {
    /// One line for logs and the status comment.
    pub short: String,
    /// The paragraph the agent reads.
    pub detailed: String,
}

/// What one iteration produced, as the handlers see it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IterationSummary {
    /// 1, 2, …
    pub iteration: u32,
    /// The agent's report as text.
    pub output_text: String,
    /// The agent's structured output (`{"message": …}` when it gave none).
    pub structured_output: Value,
    /// The goal results of this iteration.
    pub goals: Vec<GoalOutcome>,
    /// The agent run failed (non-zero exit, timeout).
    pub failed: bool,
    /// Why, in a sentence (e.g. "the agent exited with status 1: …").
    #[serde(default)]
    pub agent_failure: Option<String>,
    /// Failures present at the base commit that the repository tolerates
    /// (their ids), for the completion check to judge their scope.
    #[serde(default)]
    pub tolerated: Vec<String>,
}

/// The longest issue title a prompt shows (GitHub's own limit).
pub const TITLE_MAX: usize = 256;
/// The most characters of an agent's summary a continuation prompt shows
/// for one earlier iteration.
const BRIEF_MAX: usize = 2_000;

impl IterationSummary {
    /// A short account for the continuation prompt: the agent's `summary`
    /// (or the start of its text) and the failing goals.
    pub fn brief(&self) -> String {
        let said = self
            .structured_output
            .get("summary")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| self.output_text.chars().take(400).collect());
        let failing: Vec<&str> = failed_required(&self.goals)
            .map(|g| g.name.as_str())
            .collect();
        // The agent's words, on one line and cut: each brief is a line of
        // the next prompt, which they must not pose as (decision 245).
        let said = one_line(&said, BRIEF_MAX);
        let mut line = format!("Iteration {}: {said}", self.iteration);
        match (&self.agent_failure, self.failed) {
            (Some(why), _) => line.push_str(&format!(" ({why})")),
            (None, true) => line.push_str(" (the agent run failed)"),
            (None, false) => {}
        }
        if !failing.is_empty() {
            line.push_str(&format!(" — failing goals: {}", failing.join(", ")));
        }
        line
    }
}

/// A handler's decision on one iteration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HandlerVerdict {
    /// Whether the run is complete.
    pub complete: bool,
    /// Why, for the status comment and logs.
    pub description: String,
    /// The handler could not decide (e.g. a custom handler misbehaved).
    pub error: Option<String>,
}

impl HandlerVerdict {
    pub(crate) fn done(complete: bool, description: impl Into<String>) -> Self {
        Self {
            complete,
            description: description.into(),
            error: None,
        }
    }

    fn failed(error: impl Into<String>) -> Self {
        let error = error.into();
        Self {
            complete: false,
            description: format!("the completion handler failed: {error}"),
            error: Some(error),
        }
    }
}

/// The issue, for prompts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct IssueContext {
    /// `owner/repo#n`.
    pub issue_ref: String,
    /// The title.
    pub title: String,
    /// The body (untrusted text; a value in the prompt, never a template).
    pub body: String,
    /// The task type.
    pub task_type: Option<TaskType>,
}

/// What a continuation prompt carries beyond the issue.
#[derive(Debug, Clone, Copy)]
pub struct Continuation<'a> {
    /// The iteration about to run.
    pub iteration: u32,
    /// Every earlier iteration, oldest first; the last 3 go in the prompt.
    pub history: &'a [IterationSummary],
    /// The completion check's pending actions from the last check.
    pub pending_actions: &'a [String],
    /// Maintainer replies since the last iteration.
    pub maintainer_replies: &'a [String],
}

/// A completion strategy.
pub trait CompletionHandler: Send + Sync + std::fmt::Debug {
    /// Which one.
    fn kind(&self) -> CompletionType;

    /// The criteria, short and detailed.
    fn criteria(&self) -> CompletionCriteria;

    /// Extra prompt parameters of this type (e.g. `keyword`, `phase`).
    fn extra_params(&self, history: &[IterationSummary], iteration: u32) -> Map<String, Value>;

    /// Decides on the latest iteration; `closer` is the completion check's check of it, if run.
    fn is_complete<'a>(
        &'a self,
        summary: &'a IterationSummary,
        closer: Option<&'a CheckResult>,
    ) -> BoxFuture<'a, HandlerVerdict>;

    /// The first prompt: `steps/initial/<type>/f_default.md`.
    fn initial_prompt<'a>(
        &'a self,
        prompts: &'a PromptResolver,
        issue: &'a IssueContext,
    ) -> BoxFuture<'a, Result<RenderedPrompt, PromptError>> {
        let mut params = common_params(issue, &self.criteria());
        params.extend(self.extra_params(&[], 1));
        let id = PromptId::new("initial", self.kind().as_str(), "default");
        Box::pin(async move { prompts.render(&id, &Value::Object(params)).await })
    }

    /// A later prompt: `steps/continuation/<type>/f_default.md`, with the
    /// last 3 summaries, the pending actions and the maintainer's replies.
    fn continuation_prompt<'a>(
        &'a self,
        prompts: &'a PromptResolver,
        issue: &'a IssueContext,
        next: Continuation<'a>,
    ) -> BoxFuture<'a, Result<RenderedPrompt, PromptError>> {
        let mut params = common_params(issue, &self.criteria());
        let recent = &next.history[next.history.len().saturating_sub(3)..];
        let summaries: Vec<String> = recent.iter().map(IterationSummary::brief).collect();
        params.insert("iteration".into(), json!(next.iteration));
        params.insert("previous_summaries".into(), json!(summaries.join("\n")));
        params.insert("pending_actions".into(), json!(next.pending_actions));
        params.insert("maintainer_replies".into(), json!(next.maintainer_replies));
        params.extend(self.extra_params(next.history, next.iteration));
        let id = PromptId::new("continuation", self.kind().as_str(), "default");
        Box::pin(async move { prompts.render(&id, &Value::Object(params)).await })
    }
}

fn common_params(issue: &IssueContext, criteria: &CompletionCriteria) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("issue_ref".into(), json!(issue.issue_ref));
    // On one line: the templates show it as a heading (decision 245).
    m.insert(
        "issue_title".into(),
        json!(one_line(&issue.title, TITLE_MAX)),
    );
    // Fenced, so that no line of it passes for the prompt's own (a reply
    // section, say: the replies are fenced the same way, `run/prompt.rs`).
    m.insert("issue_body".into(), json!(fenced(&issue.body)));
    m.insert(
        "task_type".into(),
        json!(issue.task_type.map_or("unclassified", TaskType::as_str)),
    );
    m.insert("criteria".into(), json!(criteria.detailed));
    m
}

/// The goals part of verified completion: `None` when every required goal
/// passed, else what failed.
fn goals_block(goals: &[GoalOutcome]) -> Option<String> {
    let failing: Vec<&str> = failed_required(goals).map(|g| g.name.as_str()).collect();
    (!failing.is_empty()).then(|| format!("required goals failed: {}", failing.join(", ")))
}

/// What the `custom` handler needs from the run.
#[derive(Debug, Clone)]
pub struct HandlerEnv {
    /// The handler's working directory: the checks' clean checkout of the
    /// iteration's head, never the worktree the agent writes (decision 148).
    pub worktree: PathBuf,
    /// Where the `custom` handler's path is resolved: a copy of the base
    /// commit's files made by closer, outside the worktree — never the
    /// worktree the agent writes.
    pub scripts: PathBuf,
    /// The environment it sees (the same scrubbed one as agents).
    pub env: Vec<(String, String)>,
    /// Its wall-clock limit.
    pub timeout: Duration,
    /// The sandbox it runs in.
    pub jail: Option<Jail>,
}

/// Builds the handler the repository config names.
pub fn build_handler(
    config: &CompletionConfig,
    env: &HandlerEnv,
) -> Result<Arc<dyn CompletionHandler>, String> {
    Ok(match config.kind {
        CompletionType::Issue => Arc::new(issue::IssueHandler),
        CompletionType::Project => Arc::new(project::ProjectHandler),
        CompletionType::Iterate => Arc::new(iterate::IterateHandler::new(config.max_iterations)),
        CompletionType::Manual => Arc::new(manual::ManualHandler::new(&config.keyword)),
        CompletionType::Custom => {
            let path = config
                .handler
                .as_deref()
                .ok_or("completion type `custom` needs `handler`")?;
            Arc::new(custom::CustomHandler::new(path, env.clone()))
        }
    })
}
