//! `custom`: the repository's own executable decides. The script is the one
//! in the run's base commit, copied by closer outside the worktree
//! (`HandlerEnv::scripts`), so an agent that rewrites it in its worktree
//! changes nothing. It runs in the checks' clean checkout of the head
//! (`HandlerEnv::worktree`), never the agent's worktree, with the same
//! scrubbed environment as agents and a timeout, gets the iteration summary
//! as JSON on stdin and must print `{"complete": bool, "description": string}` on
//! stdout. Anything else — a crash, a hang, output that is not that JSON —
//! is an ERROR verdict with the reason, never "complete". The path is
//! checked to stay inside the scripts directory.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::config::repo::CompletionType;
use crate::engine::completion_check::CheckResult;
use crate::engine::handlers::subprocess::{ProcessOutput, run_process};
use crate::engine::handlers::{
    CompletionCriteria, CompletionHandler, HandlerEnv, HandlerVerdict, IterationSummary,
};
use crate::llm::BoxFuture;

/// The most bytes read from the handler's stdout and stderr, each.
const MAX_OUTPUT: usize = 64 * 1024;

/// What the handler must print.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CustomAnswer {
    /// Whether the run is complete.
    pub complete: bool,
    /// Why, in one line.
    pub description: String,
}

static ANSWER_SCHEMA: LazyLock<Value> =
    LazyLock::new(|| schemars::schema_for!(CustomAnswer).to_value());

/// A handler backed by an executable in the repository.
#[derive(Debug, Clone)]
pub struct CustomHandler {
    path: String,
    env: HandlerEnv,
}

impl CustomHandler {
    /// `path` is relative to the repository (resolved in `env.scripts`).
    pub fn new(path: &str, env: HandlerEnv) -> Self {
        Self {
            path: path.to_owned(),
            env,
        }
    }

    /// The executable, resolved inside the scripts directory (symlinks
    /// included).
    fn program(&self) -> Result<PathBuf, String> {
        let root = self
            .env
            .scripts
            .canonicalize()
            .map_err(|e| format!("the handler's directory is not accessible: {e}"))?;
        let full = root
            .join(Path::new(&self.path))
            .canonicalize()
            .map_err(|e| format!("the handler `{}` cannot be found: {e}", self.path))?;
        if !full.starts_with(&root) {
            return Err(format!(
                "the handler `{}` resolves outside the repository",
                self.path
            ));
        }
        Ok(full)
    }

    async fn decide(
        &self,
        summary: &IterationSummary,
        closer: Option<&CheckResult>,
    ) -> HandlerVerdict {
        let program = match self.program() {
            Ok(p) => p,
            Err(e) => return HandlerVerdict::failed(e),
        };
        let input = json!({
            "iteration": summary.iteration,
            "output": summary.output_text,
            "structured_output": summary.structured_output,
            "goals": summary.goals,
            "agent_failed": summary.failed,
            "closer": closer.map(|c| json!({
                "complete": c.complete,
                "all_complete": c.output.all_complete,
                "confidence": c.output.confidence,
                "summary": c.output.summary,
                "pending_actions": c.output.pending_actions,
                "error": c.error,
            })),
        });
        let stdin = input.to_string().into_bytes();
        let ran = run_process(
            &program,
            &self.env.worktree,
            &self.env.env,
            self.env.jail.as_ref(),
            &stdin,
            self.env.timeout,
            MAX_OUTPUT,
        )
        .await;
        match ran {
            Ok(out) => read_answer(&self.path, &out),
            Err(e) => HandlerVerdict::failed(e.to_string()),
        }
    }
}

/// Turns the handler's output into a verdict.
fn read_answer(path: &str, out: &ProcessOutput) -> HandlerVerdict {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stderr: String = stderr.trim().chars().take(300).collect();
    match (out.code, out.signal) {
        (Some(0), _) => {}
        (Some(code), _) => {
            return HandlerVerdict::failed(format!("`{path}` exited with status {code}: {stderr}"));
        }
        (None, Some(sig)) => {
            return HandlerVerdict::failed(format!("`{path}` was killed by signal {sig}"));
        }
        (None, None) => return HandlerVerdict::failed(format!("`{path}` ended without a status")),
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let value: Value = match serde_json::from_str(text.trim()) {
        Ok(v) => v,
        Err(e) => {
            let start: String = text.trim().chars().take(200).collect();
            return HandlerVerdict::failed(format!("`{path}` did not print JSON ({e}): {start}"));
        }
    };
    let validator = match jsonschema::validator_for(&ANSWER_SCHEMA) {
        Ok(v) => v,
        Err(e) => return HandlerVerdict::failed(format!("internal schema error: {e}")),
    };
    let errors = crate::engine::completion_check::schema_errors(&validator, &value, 5);
    if !errors.is_empty() {
        return HandlerVerdict::failed(format!(
            "`{path}` printed JSON that is not {{\"complete\": bool, \"description\": string}}: {}",
            errors.join("; ")
        ));
    }
    match serde_json::from_value::<CustomAnswer>(value) {
        Ok(a) => HandlerVerdict::done(a.complete, a.description),
        Err(e) => HandlerVerdict::failed(format!("`{path}` printed an unexpected answer: {e}")),
    }
}

impl CompletionHandler for CustomHandler {
    fn kind(&self) -> CompletionType {
        CompletionType::Custom
    }

    fn criteria(&self) -> CompletionCriteria {
        CompletionCriteria {
            short: format!("the repository handler `{}` says complete", self.path),
            detailed: format!(
                "The repository's completion handler `{}` decides when the work is done, from your report and the goal results. \
                 Report clearly what you did and what is left.",
                self.path
            ),
        }
    }

    fn extra_params(&self, _: &[IterationSummary], _: u32) -> Map<String, Value> {
        Map::new()
    }

    fn is_complete<'a>(
        &'a self,
        summary: &'a IterationSummary,
        closer: Option<&'a CheckResult>,
    ) -> BoxFuture<'a, HandlerVerdict> {
        Box::pin(self.decide(summary, closer))
    }
}
