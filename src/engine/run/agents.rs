//! The operator's agents as the engine runs them: a repository names one,
//! it gets the operator's `pass_env` values (read once at start) and the
//! scrubbed base environment, and a stop of the run kills it.

use std::collections::BTreeMap;

use crate::agent::adapter::{AgentRequest, AgentResult, AgentStatus, resolve_pass_env, run_agent};
use crate::agent::process::BaseEnv;
use crate::config::agents::{AgentConfig, Agents};

/// The operator's agents.
pub struct AgentRunner {
    agents: Agents,
    /// Per agent, the operator's `pass_env` values, read once at start.
    passed_env: BTreeMap<String, BTreeMap<String, String>>,
    base_env: BaseEnv,
}

impl AgentRunner {
    pub fn new(agents: Agents, base_env: BaseEnv) -> AgentRunner {
        let passed_env = agents
            .iter()
            .map(|(name, config)| {
                (
                    name.clone(),
                    resolve_pass_env(config, |k| std::env::var(k).ok()),
                )
            })
            .collect();
        AgentRunner {
            agents,
            passed_env,
            base_env,
        }
    }

    /// The names a repository may choose from.
    pub fn names(&self) -> Vec<&str> {
        self.agents.keys().map(String::as_str).collect()
    }

    pub fn get(&self, name: &str) -> Option<&AgentConfig> {
        self.agents.get(name)
    }

    pub fn base_env(&self) -> &BaseEnv {
        &self.base_env
    }

    /// Runs agent `name` on `request`; an agent that cannot be started is a
    /// failed iteration, not an engine error.
    pub async fn run(
        &self,
        name: &str,
        config: &AgentConfig,
        request: &AgentRequest,
    ) -> AgentResult {
        let passed = self.passed_env.get(name).cloned().unwrap_or_default();
        run_agent(config, &self.base_env, &passed, request)
            .await
            .unwrap_or_else(|e| agent_error(e.to_string()))
    }
}

/// The result of an agent that did not produce one.
pub fn agent_error(message: String) -> AgentResult {
    AgentResult {
        status: AgentStatus::Error,
        exit_code: None,
        timed_out: false,
        duration_ms: 0,
        message: String::new(),
        structured: serde_json::json!({}),
        log_excerpt: String::new(),
        stdout_dropped_bytes: 0,
        stderr_dropped_bytes: 0,
        error: Some(message),
    }
}
