//! The operator's agents as the engine runs them: a repository names one,
//! it gets the operator's `pass_env` values (read once at start) and the
//! scrubbed base environment, and a stop of the run kills it. Every value it
//! passes is held by the outgoing filter, so none comes back out.

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
    /// resumed is retried once as a fresh session.
    pub async fn run(
        &self,
        name: &str,
        config: &AgentConfig,
        request: &AgentRequest,
    ) -> AgentResult {
        let result = self.run_once(name, config, request).await;
        // A resumed run that failed without a single model call could not
        // continue its session (the tool's state is gone, say). One that was
        // stopped was stopped.
        let stopped = request.stop.as_ref().is_some_and(|s| *s.borrow());
        let resume_failed = request.resume.is_some()
            && !stopped
            && result
                .failure
                .as_ref()
                .is_some_and(|f| !f.fatal() && *f != AgentFailure::Stopped)
            && result.usage.tokens.total() == 0;
        if !resume_failed {
            return result;
        }
        tracing::info!(agent = %name, error = ?result.error, "resuming failed; starting a fresh session");
        let fresh = AgentRequest {
            resume: None,
            ..request.clone()
        };
        self.run_once(name, config, &fresh).await
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
