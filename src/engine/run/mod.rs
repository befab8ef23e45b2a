//! The engine proper: turns webhook events into runs and drives each run
//! through its steps (`start` → `iterate`… → `finish`) as jobs on the durable
//! queue, keyed `run:<id>` so one run never has two steps at once.
//!
//! Every transition is written to the `runs` row before its side effects on
//! GitHub, and every side effect is safe to repeat after a crash (the status
//! comment is found by its marker, labels are idempotent, the pull request is
//! found by its head branch). This module must never run untrusted text, and
//! never react to the App's own comments or any bot.

mod ask;
mod data;
mod failure;
mod finish;
mod interrupt;
mod reconcile;
mod report;
mod steps;
mod throttle;
mod triggers;
mod usage;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

pub use data::RunData;
pub use reconcile::Reconciled;
pub use throttle::{EditThrottle, STATUS_EDIT_GAP};
pub use usage::{AgentUsage, LlmPrices, agent_usage};

use crate::agent::adapter::resolve_pass_env;
use crate::agent::process::BaseEnv;
use crate::agent::sandbox::{Sandbox, SandboxOptions};
use crate::config::agents::Agents;
use crate::engine::goals::GoalSettings;
use crate::github::types::{InstallationId, RepoName};
use crate::github::{AppInfo, GitHubApp, GitHubError, InstallationClient};
use crate::llm::LlmClient;
use crate::store::jobs::{self, LeasedJob, NewJob};
use crate::store::runs::{self, RunRow};
use crate::store::{Store, StoreError};
use crate::worker::{JobError, JobFuture, JobHandler};

/// The job kind of run steps.
pub const RUN_JOB: &str = "run";

/// Run states as stored.
pub mod state {
    pub const QUEUED: &str = "queued";
    pub const RUNNING: &str = "running";
    pub const AWAITING_RESPONSE: &str = "awaiting_response";
    pub const VERIFYING: &str = "verifying";
    pub const DONE: &str = "done";
    pub const FAILED: &str = "failed";
    pub const STOPPED: &str = "stopped";

    /// Whether a run in `state` has ended.
    pub fn is_final(state: &str) -> bool {
        matches!(state, DONE | FAILED | STOPPED)
    }
}

/// The step a `run` job carries out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Config, task type, status comment, labels, sandbox and baseline.
    Start,
    /// One iteration: prompt, agent, verification, judgment, decision.
    Iterate,
    /// Push, pull request, close (or wait for the merge).
    Finish,
    /// A reply to the run's question arrived: take the run out of
    /// `awaiting_response` and iterate. A step of the run's own (queued
    /// behind the step that asked), so the two never write the run at once.
    Resume,
}

#[derive(Debug, Serialize, Deserialize)]
struct RunJob {
    run_id: String,
    step: Step,
}

/// What the engine is built from.
pub struct EngineSettings {
    /// The operator's agents; a repository picks one by name.
    pub agents: Agents,
    /// The LLM for classification and the Closer; `None` makes every run
    /// fail at start with a clear comment (the operator must configure one).
    pub llm: Option<Arc<dyn LlmClient>>,
    /// Holds the sandbox's mirrors and worktrees and the prompt files.
    pub data_dir: PathBuf,
    /// The environment agents and goals start from.
    pub base_env: BaseEnv,
    /// Attempts per run job before it is dead-lettered.
    pub max_attempts: i64,
    /// Public dashboard root, when there is one.
    pub dashboard_url: Option<String>,
    /// The operator's ceiling on a run's tokens (LLM and agent); no
    /// repository can raise it.
    pub max_tokens_per_run: Option<u64>,
    /// The operator's ceiling on a run's cost in US dollars.
    pub max_cost_usd_per_run: Option<f64>,
    /// The operator's LLM prices, turning LLM usage into cost.
    pub llm_prices: LlmPrices,
    /// How long a step whose GitHub write may have been applied
    /// (`MaybeApplied`) waits before it runs again and re-checks: GitHub may
    /// complete the write after answering, and its lists catch up a moment
    /// later. [`MAYBE_APPLIED_RECHECK`] in `closer serve`.
    pub recheck_after: Duration,
}

/// The wait before re-checking a write that may have been applied.
pub const MAYBE_APPLIED_RECHECK: Duration = Duration::from_secs(30);

/// Why an engine action did not complete; all of these are worth a retry.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    GitHub(#[from] GitHubError),
    #[error("{0}")]
    Other(String),
    /// The run was stopped while this step ran; the step ends quietly.
    #[error("the run was stopped meanwhile")]
    Stopped,
}

impl EngineError {
    /// The job error for the queue (always worth another attempt): after a
    /// rate limit not before it lifts, after a write that may have been
    /// applied not before `recheck_after`.
    pub fn into_job_error(self, now: crate::clock::Millis, recheck_after: Duration) -> JobError {
        match &self {
            EngineError::GitHub(GitHubError::RateLimited { until }) => {
                let wait = (*until - now).clamp(1_000, 3_600_000) as u64;
                JobError::RetryAfter(self.to_string(), Duration::from_millis(wait))
            }
            EngineError::GitHub(GitHubError::MaybeApplied { .. }) => {
                JobError::RetryAfter(self.to_string(), recheck_after)
            }
            _ => JobError::Retry(self.to_string()),
        }
    }
}

/// The engine: one per process, shared by the delivery and run handlers.
pub struct Engine {
    store: Store,
    github: Arc<GitHubApp>,
    agents: Agents,
    /// Per agent, the operator's `pass_env` values, read once at start.
    passed_env: BTreeMap<String, BTreeMap<String, String>>,
    llm: Option<Arc<dyn LlmClient>>,
    sandbox: Sandbox,
    goals: GoalSettings,
    base_env: BaseEnv,
    scratch: PathBuf,
    max_attempts: i64,
    dashboard_url: Option<String>,
    max_tokens_per_run: Option<u64>,
    max_cost_usd_per_run: Option<f64>,
    llm_prices: LlmPrices,
    ready: Arc<Notify>,
    app: Mutex<Option<AppInfo>>,
    /// Spaces out status-comment writes per installation.
    status_edits: EditThrottle,
    recheck_after: Duration,
}

impl Engine {
    /// Builds the engine; `ready` wakes the workers when a step is enqueued.
    pub fn new(
        store: Store,
        github: Arc<GitHubApp>,
        settings: EngineSettings,
        ready: Arc<Notify>,
    ) -> Arc<Engine> {
        let passed_env = settings
            .agents
            .iter()
            .map(|(name, config)| {
                (
                    name.clone(),
                    resolve_pass_env(config, |k| std::env::var(k).ok()),
                )
            })
            .collect();
        let sandbox = Sandbox::new(SandboxOptions {
            root: settings.data_dir.join("sandbox"),
            base_env: settings.base_env.clone(),
            git_timeout: Duration::from_secs(600),
            committer_name: "closer".to_owned(),
            committer_email: "closer@users.noreply.github.com".to_owned(),
        });
        Arc::new(Engine {
            store,
            github,
            agents: settings.agents,
            passed_env,
            llm: settings.llm,
            sandbox,
            goals: GoalSettings::new(settings.base_env.clone()),
            base_env: settings.base_env,
            scratch: settings.data_dir.join("scratch"),
            max_attempts: settings.max_attempts.max(1),
            dashboard_url: settings.dashboard_url,
            max_tokens_per_run: settings.max_tokens_per_run,
            max_cost_usd_per_run: settings.max_cost_usd_per_run,
            llm_prices: settings.llm_prices,
            ready,
            app: Mutex::new(None),
            status_edits: EditThrottle::new(STATUS_EDIT_GAP),
            recheck_after: settings.recheck_after,
        })
    }

    /// What the queue makes of a failed engine action.
    pub fn job_error(&self, e: EngineError) -> JobError {
        e.into_job_error(self.store.now_ms(), self.recheck_after)
    }

    /// The handler of `run` jobs.
    pub fn run_handler(self: &Arc<Self>) -> Arc<dyn JobHandler> {
        Arc::new(RunHandler(self.clone()))
    }

    /// The App's identity (id and slug), asked of GitHub once.
    async fn app_info(&self) -> Result<AppInfo, EngineError> {
        if let Ok(guard) = self.app.lock()
            && let Some(app) = guard.as_ref()
        {
            return Ok(app.clone());
        }
        let app = self.github.app_info().await?;
        if let Ok(mut guard) = self.app.lock() {
            *guard = Some(app.clone());
        }
        Ok(app)
    }

    async fn client(&self, installation: i64) -> Result<Arc<InstallationClient>, EngineError> {
        Ok(self
            .github
            .installation(InstallationId(installation))
            .await?)
    }

    /// Queues a step of a run.
    async fn enqueue(&self, run_id: &str, step: Step) -> Result<(), EngineError> {
        let payload = serde_json::to_string(&RunJob {
            run_id: run_id.to_owned(),
            step,
        })
        .map_err(|e| EngineError::Other(e.to_string()))?;
        let now = self.store.now_ms();
        let job = NewJob {
            kind: RUN_JOB.to_owned(),
            key: format!("run:{run_id}"),
            payload,
            max_attempts: self.max_attempts,
            run_at: now,
        };
        jobs::enqueue(self.store.pool(), &job, now).await?;
        self.ready.notify_one();
        Ok(())
    }

    async fn load(&self, run_id: &str) -> Result<Option<RunRow>, EngineError> {
        Ok(runs::get(self.store.pool(), run_id).await?)
    }

    /// Writes the run (with its data) and stamps `updated_at`.
    async fn save(&self, run: &mut RunRow, data: &RunData) -> Result<(), EngineError> {
        run.data = data.to_json();
        run.updated_at = self.store.now_ms();
        match runs::save_unless_stopped(self.store.pool(), run).await? {
            true => Ok(()),
            false => Err(EngineError::Stopped),
        }
    }

    /// Writes the run whatever its stored state (a restart of a stopped run).
    async fn save_restart(&self, run: &mut RunRow, data: &RunData) -> Result<(), EngineError> {
        run.data = data.to_json();
        run.updated_at = self.store.now_ms();
        runs::save(self.store.pool(), run).await?;
        Ok(())
    }

    fn repo_name(run: &RunRow) -> Result<RepoName, EngineError> {
        RepoName::parse(&run.repository)
            .ok_or_else(|| EngineError::Other(format!("bad repository name {}", run.repository)))
    }
}

struct RunHandler(Arc<Engine>);

impl RunHandler {
    async fn handle_job(&self, job: &LeasedJob) -> Result<(), JobError> {
        let payload: RunJob = serde_json::from_str(&job.payload)
            .map_err(|e| JobError::Permanent(format!("bad run job payload: {e}")))?;
        match self.0.step(&payload.run_id, payload.step).await {
            Ok(()) | Err(EngineError::Stopped) => Ok(()),
            Err(e) => Err(e),
        }
        .map_err(|e| {
                tracing::warn!(run = %payload.run_id, step = ?payload.step, error = %e, "run step failed");
                self.0.job_error(e)
            })
    }
}

impl JobHandler for RunHandler {
    fn handle<'a>(&'a self, job: &'a LeasedJob) -> JobFuture<'a> {
        Box::pin(self.handle_job(job))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_that_may_have_been_applied_is_rechecked_later_not_at_once() {
        let recheck = Duration::from_secs(30);
        let maybe = EngineError::GitHub(GitHubError::MaybeApplied {
            method: "POST".into(),
            path: "/repos/o/r/issues/1/comments".into(),
            status: Some(502),
        });
        match maybe.into_job_error(0, recheck) {
            JobError::RetryAfter(_, wait) => assert_eq!(wait, recheck),
            other => panic!("{other:?}"),
        }
        let other = EngineError::Other("git failed".into());
        assert!(matches!(
            other.into_job_error(0, recheck),
            JobError::Retry(_)
        ));
    }
}
