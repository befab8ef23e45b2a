//! The operator's agents as the engine runs them: a repository names one,
//! it gets the operator's `pass_env` values (read once at start) and the
//! scrubbed base environment, and a stop of the run kills it. Every value it
//! passes is held by the outgoing filter, so none comes back out. A resumed
//! session the tool could not continue is tried once afresh; a fresh try
//! that fails too never replaces the stored session.

use std::collections::BTreeMap;

use crate::agent::adapter::{AgentRequest, AgentResult, resolve_pass_env, run_agent};
use crate::agent::confine::Confinement;
use crate::agent::outcome::AgentFailure;
use crate::agent::process::BaseEnv;
use crate::config::agents::{AgentConfig, Agents};
use crate::redact::{Redactor, SecretSource};

/// The operator's agents.
pub struct AgentRunner {
    agents: Agents,
    /// Per agent, the operator's `pass_env` values, read once at start.
    passed_env: BTreeMap<String, BTreeMap<String, String>>,
    base_env: BaseEnv,
    confinement: Confinement,
    /// How often live progress is shown (`None`: never).
    progress_every: Option<std::time::Duration>,
}

impl AgentRunner {
    pub fn new(
        agents: Agents,
        base_env: BaseEnv,
        confinement: Confinement,
        progress_every: Option<std::time::Duration>,
        redactor: &Redactor,
    ) -> AgentRunner {
        let passed_env: BTreeMap<String, BTreeMap<String, String>> = agents
            .iter()
            .map(|(name, config)| {
                (
                    name.clone(),
                    resolve_pass_env(config, |k| std::env::var(k).ok()),
                )
            })
            .collect();
        // What an agent is given must not come back out in a comment or a
        // prompt: every value joins the outgoing filter.
        for value in passed_env.values().flat_map(BTreeMap::values) {
            redactor.register(SecretSource::AgentEnv, &value.clone().into());
        }
        AgentRunner {
            agents,
            passed_env,
            base_env,
            confinement,
            progress_every,
        }
    }

    /// The names a repository may choose from.
    pub fn names(&self) -> Vec<&str> {
        self.agents.keys().map(String::as_str).collect()
    }

    pub fn get(&self, name: &str) -> Option<&AgentConfig> {
        self.agents.get(name)
    }

    pub fn progress_every(&self) -> Option<std::time::Duration> {
        self.progress_every
    }

    pub fn base_env(&self) -> &BaseEnv {
        &self.base_env
    }

    /// The sandbox agents and handlers run in.
    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    /// Runs agent `name` on `request`; an agent that cannot be started is a
    /// failed iteration, not an engine error. A session that cannot be
    /// resumed is retried once as a fresh session ([`session_lost`]).
    pub async fn run(
        &self,
        name: &str,
        config: &AgentConfig,
        request: &AgentRequest,
    ) -> AgentResult {
        let result = self.run_once(name, config, request).await;
        let stopped = request.stop.as_ref().is_some_and(|s| *s.borrow());
        if !session_lost(request.resume.is_some(), stopped, &result) {
            return result;
        }
        tracing::info!(agent = %name, error = ?result.error, "resuming failed; starting a fresh session");
        let fresh = AgentRequest {
            resume: None,
            ..request.clone()
        };
        keep_only_a_working_session(self.run_once(name, config, &fresh).await)
    }

    async fn run_once(
        &self,
        name: &str,
        config: &AgentConfig,
        request: &AgentRequest,
    ) -> AgentResult {
        let passed = self.passed_env.get(name).cloned().unwrap_or_default();
        run_agent(config, &self.base_env, &passed, request, &self.confinement)
            .await
            .unwrap_or_else(|e| {
                AgentResult::failed(AgentFailure::NotStarted {
                    detail: e.to_string(),
                })
            })
    }
}

/// Whether a resumed run failed because its session could not be resumed:
/// the tool ended by itself (an exit, its own error, no report) without a
/// single model call — its state is gone, say. Not a run that timed out
/// (a fresh try would take another whole deadline), met its provider down
/// (the session is intact; the engine waits and resumes it, and a fresh
/// one would lose its context), was denied a tool (the model asked for
/// it) or was stopped, nor a failure every try would meet.
fn session_lost(resumed: bool, stopped: bool, result: &AgentResult) -> bool {
    let lost = |failure: &AgentFailure| match failure {
        AgentFailure::Exited { .. }
        | AgentFailure::ToolError { .. }
        | AgentFailure::EmptyReport => true,
        AgentFailure::TimedOut { .. }
        | AgentFailure::ModelUnavailable { .. }
        | AgentFailure::PermissionDenied { .. }
        | AgentFailure::Stopped => false,
        // closer's own failures, and the fatal ones: a fresh session
        // meets them the same.
        AgentFailure::NotInstalled { .. }
        | AgentFailure::NotStarted { .. }
        | AgentFailure::NoSandbox { .. }
        | AgentFailure::Authentication { .. }
        | AgentFailure::RefusedToStart { .. }
        | AgentFailure::CommitFailed { .. }
        | AgentFailure::Escaped => false,
    };
    resumed
        && !stopped
        && result.failure.as_ref().is_some_and(lost)
        && result.usage.tokens.total() == 0
}

/// The fresh attempt's result; one that failed too (the session may not
/// have been lost after all) leaves the stored session for the next
/// iteration: its own session id is dropped, and its tokens, a new
/// session's from its start, are all this run's, not a running total to
/// set against the stored session's.
fn keep_only_a_working_session(mut fresh: AgentResult) -> AgentResult {
    if fresh.failure.is_some() {
        fresh.session_id = None;
        fresh.usage.session_total = false;
    }
    fresh
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resumed run's failed result with no tokens spent.
    fn failed(failure: AgentFailure) -> AgentResult {
        AgentResult::failed(failure)
    }

    /// Only a tool that ended by itself without a model call may have lost
    /// its session. A timeout (a fresh try would take another whole
    /// deadline) or the provider down (the session is intact; a fresh one
    /// would lose its context) is not retried, nor is a denial (the model
    /// asked for the tool), a stop or what every try would hit.
    #[test]
    fn only_a_tool_that_ended_without_a_model_call_is_tried_in_a_fresh_session() {
        let detail = || "x".to_owned();
        for (failure, lost) in [
            (
                AgentFailure::Exited {
                    code: Some(1),
                    tail: "Error: Session not found".into(),
                },
                true,
            ),
            (AgentFailure::ToolError { detail: detail() }, true),
            (AgentFailure::EmptyReport, true),
            (AgentFailure::TimedOut { secs: 1800 }, false),
            (AgentFailure::ModelUnavailable { detail: detail() }, false),
            (AgentFailure::Stopped, false),
            (AgentFailure::PermissionDenied { denied: vec![] }, false),
            (AgentFailure::Authentication { detail: detail() }, false),
            (AgentFailure::NotStarted { detail: detail() }, false),
        ] {
            let result = failed(failure.clone());
            assert_eq!(session_lost(true, false, &result), lost, "{failure:?}");
        }
        let exited = failed(AgentFailure::EmptyReport);
        assert!(!session_lost(false, false, &exited), "nothing was resumed");
        assert!(!session_lost(true, true, &exited), "the run was stopped");
        let mut spent = exited.clone();
        spent.usage.tokens.input = 1;
        assert!(!session_lost(true, false, &spent), "the model was called");
    }

    /// A fresh attempt that failed too (the provider still down, say)
    /// leaves the stored session for the next iteration; its tokens are
    /// its own, not a running total of the stored session's.
    #[test]
    fn a_failed_fresh_attempt_keeps_the_stored_session() {
        let mut fresh = failed(AgentFailure::ModelUnavailable {
            detail: "503".into(),
        });
        fresh.session_id = Some("new".into());
        fresh.usage.session_total = true;
        fresh.usage.tokens.input = 7;
        let kept = keep_only_a_working_session(fresh);
        assert_eq!(kept.session_id, None);
        assert!(!kept.usage.session_total);
        assert_eq!(kept.usage.tokens.input, 7);

        let mut worked = failed(AgentFailure::EmptyReport);
        worked.status = crate::agent::adapter::AgentStatus::Ok;
        worked.failure = None;
        worked.error = None;
        worked.session_id = Some("new".into());
        assert_eq!(
            keep_only_a_working_session(worked).session_id.as_deref(),
            Some("new")
        );
    }
}
