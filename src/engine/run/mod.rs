//! The engine proper: turns webhook events into runs and drives each run
//! through its steps (`start` → `iterate`… → `finish`) as jobs on the durable
//! queue, keyed by the run, so one run never has two steps at once.
//!
//! Each step loads its [`RunContext`] once (the run, its data, the
//! repository config, the installation client) and hands it to the step's
//! function; the collaborators below do the work, each behind a narrow
//! interface. Every transition is written to the `runs` row before its side
//! effects on GitHub, and every side effect is safe to repeat after a crash
//! (the status comment is found by its marker, labels are idempotent, the
//! pull request is found by its head branch). This module must never run
//! untrusted text, and never react to the App's own comments or any bot.

mod agents;
mod ask;
mod budget;
mod checkout;
mod checks;
mod commands;
mod config_read;
mod context;
mod data;
mod decide;
mod failure;
mod finish;
mod github;
mod interrupt;
mod issue_edit;
mod iterate;
mod label_removed;
mod labels;
mod model_outage;
mod new_run;
mod placement;
mod progress;
mod prompt;
mod reconcile;
mod renamed;
mod replaced;
mod reproduce;
mod review;
mod review_round;
mod runs;
mod start;
mod status;
mod status_view;
mod threads;
mod throttle;
mod triggers;
mod usage;
mod workspace;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

pub use context::RunContext;
pub use data::{IterationRecord, RunData};
pub use issue_edit::IssueEdit;
pub use model_outage::{MODEL_OUTAGE_PATIENCE, ModelOutage};
pub use reconcile::{MAX_DEAD_STEPS, Reconciled};
pub use throttle::{EditThrottle, STATUS_EDIT_GAP};
pub use usage::LlmPrices;
pub use workspace::{Workspace, private_dir};

use crate::agent::confine::Confinement;
use crate::agent::process::BaseEnv;
use crate::config::agents::Agents;
use crate::github::{GitHubApp, GitHubError};
use crate::llm::LlmClient;
use crate::model::{RepoName, RepositoryId, RunId, RunState};
use crate::store::jobs::LeasedJob;
use crate::store::{Store, StoreError};
use crate::worker::delivery::EventReactor;
use crate::worker::{JobError, JobFuture, JobRunner};

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
    /// The run's pull request was merged while the run waited for it
    /// (`close_on: merged`), or while a review round waited for an answer:
    /// the run is done and the issue closed. Queued by the delivery, run as
    /// the run's own step, so it never races the `finish` step that opened
    /// the pull request.
    Merged,
    /// Reviews or requests arrived on the run's pull request: when the run
    /// is at rest (done, or waiting for the merge) and something is left to
    /// address, a review round of iterations starts on the same branch.
    Review,
    /// A person pushed to the run's branch: the verification runs again at
    /// its new head and the tables are updated, without the agent.
    Reverify,
    /// The run's pull request was closed without being merged.
    PullClosed,
    /// A stopped run: the stop's writes on GitHub (the `awaiting-response`
    /// label off, the stopped status), made again in case they failed
    /// when the run was stopped; queued with the stop itself.
    ShowStop,
    /// A permitted user edited the issue: the run takes the new title and
    /// body (the job's [`IssueEdit`]) for its next prompt and judgment. A
    /// step of the run's own, so it never races the step at work.
    TakeEdit,
}

/// Which state each step acts in: a step whose run is in another state does
/// nothing (it was queued twice, or the run moved on). Reconciliation reads
/// the same table the other way round.
const STEP_STATES: [(Step, RunState); 4] = [
    (Step::Start, RunState::Queued),
    (Step::Iterate, RunState::Running),
    (Step::Finish, RunState::Verifying),
    (Step::Resume, RunState::AwaitingResponse),
];

impl Step {
    /// The state a run must be in for this step to act.
    fn acts_in(self) -> RunState {
        STEP_STATES
            .iter()
            .find(|(step, _)| *step == self)
            .map_or(RunState::Queued, |(_, state)| *state)
    }

    /// Whether the step works in the run's worktree (and so belongs to the
    /// workspace holding it, decision 254).
    fn uses_worktree(self) -> bool {
        matches!(
            self,
            Step::Start
                | Step::Iterate
                | Step::Finish
                | Step::Resume
                | Step::Review
                | Step::Reverify
        )
    }

    /// The state a pull request's end moves a run to: `Failed` for
    /// `PullClosed`, `Done` for `Merged` (`Queued`, no step's end, for the
    /// others).
    fn ends_in(self) -> RunState {
        match self {
            Step::PullClosed => RunState::Failed,
            Step::Merged => RunState::Done,
            _ => RunState::Queued,
        }
    }

    /// The step that carries a run in `state` forward, if one does.
    fn carrying(state: RunState) -> Option<Step> {
        STEP_STATES
            .iter()
            .find(|(_, s)| *s == state)
            .map(|(step, _)| *step)
    }
}

/// The payload of a `run` job.
#[derive(Debug, Serialize, Deserialize)]
struct RunJob {
    run_id: RunId,
    step: Step,
    /// The edit a [`Step::TakeEdit`] takes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    edit: Option<IssueEdit>,
}

/// What the engine is built from.
pub struct EngineSettings {
    /// The operator's agents; a repository picks one by name.
    pub agents: Agents,
    /// The LLM for classification and the completion check; `None` makes
    /// every run fail at start with a clear comment (the operator must
    /// configure one).
    pub llm: Option<Arc<dyn LlmClient>>,
    /// Holds the sandbox's mirrors and worktrees and the prompt files.
    pub data_dir: std::path::PathBuf,
    /// The environment agents and goals start from.
    pub base_env: BaseEnv,
    /// The sandbox agents, goals and handlers run in.
    pub confinement: Confinement,
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
    /// later. [`MAYBE_APPLIED_RECHECK`] in `closer serve`. A stop's writes
    /// are checked again after as long ([`Step::ShowStop`]).
    pub recheck_after: Duration,
    /// How often the status comment shows what a working agent is doing
    /// (`None`: never). 30 s in `closer serve`.
    pub progress_every: Option<Duration>,
    /// Renders the repositories' prompt overrides in a child process:
    /// closer's own binary ([`crate::prompts::Renderer::this_program`]).
    pub prompt_renderer: crate::prompts::Renderer,
}

/// The wait before re-checking a write that may have been applied.
pub const MAYBE_APPLIED_RECHECK: Duration = Duration::from_secs(30);

/// Why an engine action did not complete.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    GitHub(#[from] GitHubError),
    #[error("{0}")]
    Other(String),
    /// The run's stored data does not parse: retrying reads the same bytes.
    #[error("the data of run {run} is unreadable: {message}")]
    CorruptRun { run: RunId, message: String },
    /// The run was stopped while this step ran; the step ends quietly.
    #[error("the run was stopped meanwhile")]
    Stopped,
    /// The repository has no commit yet: nothing to start a run from.
    #[error("the repository has no commits yet")]
    EmptyRepository,
    /// GitHub answers the run's repository name with another repository
    /// (`holder`): the name changed hands. The run is set aside and the
    /// step ends quietly (`replaced.rs`).
    #[error("{name} is now another repository's name (id {holder})")]
    NameTaken {
        name: RepoName,
        holder: RepositoryId,
    },
    /// The LLM could not be reached (timeout, connection, 5xx, 429 after
    /// the client's own retries): the step waits for it, no iteration is
    /// spent.
    #[error("the LLM is unavailable: {0}")]
    LlmUnavailable(String),
    /// The agent's own model provider could not be reached (its tool said
    /// so after its own retries): the step waits for it; the iteration is
    /// not counted and runs again.
    #[error("the agent's model provider is unavailable: {0}")]
    AgentModelUnavailable(String),
    /// The status-comment writes of the run's installation are booked
    /// further ahead than a step waits (a burst of runs): the step goes back
    /// to the queue for this long, its attempt not counted.
    #[error("status-comment writes of this installation are booked; back in {} ms", .0.as_millis())]
    Busy(Duration),
    /// GitHub's answers disagree in a way a read that has not caught up
    /// yet explains (`why`): the job looks again after `wait`, its attempt
    /// not counted. Bounded by the caller (by the age of what it saw).
    #[error("{why}; looking again in {} ms", .wait.as_millis())]
    NotYet { why: &'static str, wait: Duration },
}

impl EngineError {
    /// The job error for the queue. GitHub, the LLM or the agent's model
    /// provider being down defers the step without spending an attempt (an
    /// outage is waited out): after a rate limit not before it lifts, after
    /// a write that may have been applied not before `recheck_after`. A
    /// booked installation postpones it. Unreadable stored data is
    /// permanent; anything else is worth another attempt.
    pub fn into_job_error(self, now: crate::clock::Millis, recheck_after: Duration) -> JobError {
        match &self {
            EngineError::GitHub(GitHubError::RateLimited { until }) => {
                let wait = (*until - now).clamp(1_000, 3_600_000) as u64;
                JobError::Defer(self.to_string(), Duration::from_millis(wait))
            }
            EngineError::GitHub(GitHubError::MaybeApplied { .. }) => {
                JobError::Defer(self.to_string(), recheck_after)
            }
            EngineError::GitHub(GitHubError::Server { .. } | GitHubError::Network(_))
            | EngineError::LlmUnavailable(_)
            | EngineError::AgentModelUnavailable(_) => {
                JobError::Defer(self.to_string(), Duration::ZERO)
            }
            EngineError::Busy(wait) | EngineError::NotYet { wait, .. } => JobError::Postpone(*wait),
            EngineError::CorruptRun { .. } | EngineError::Store(StoreError::Unknown(_)) => {
                JobError::Permanent(self.to_string())
            }
            _ => JobError::Retry(self.to_string()),
        }
    }
}

pub(super) fn other(e: impl std::fmt::Display) -> EngineError {
    EngineError::Other(e.to_string())
}

/// The engine: one per process, shared by the delivery and run-step runners.
/// Each field is a collaborator with one concern.
pub struct Engine {
    /// Runs, iterations and replies in the store; queueing steps.
    runs: runs::Runs,
    /// The App, its identity and its installation clients.
    github: github::GitHubAccess,
    /// The status comment, one-off comments, labels and the project board.
    status: Arc<status::StatusPublisher>,
    /// Mirrors, worktrees and where a run's repository comes from.
    workspace: workspace::Workspace,
    /// The operator's agents and what they are given.
    agents: agents::AgentRunner,
    /// The LLM, the goals and the prompts: what judges an iteration.
    checks: checks::Checks,
    /// The operator's ceilings and prices.
    budget: budget::Budget,
}

impl Engine {
    /// Builds the engine; `ready` wakes the workers when a step is enqueued.
    pub fn new(
        store: Store,
        github: Arc<GitHubApp>,
        settings: EngineSettings,
        ready: Arc<Notify>,
    ) -> Arc<Engine> {
        let runs = runs::Runs::new(store, ready, settings.max_attempts, settings.recheck_after);
        // One outgoing filter for GitHub and the LLM: the App's, which
        // holds its key and the tokens it mints; the agents' values join it.
        let redactor = github.redactor().clone();
        let llm = settings
            .llm
            .map(|llm| crate::llm::redacting::Redacting::wrap(llm, redactor.clone()));
        let github = github::GitHubAccess::new(github);
        Arc::new(Engine {
            status: Arc::new(status::StatusPublisher::new(
                runs.clone(),
                github.clone(),
                settings.dashboard_url,
                settings.confinement.is_unconfined(),
            )),
            runs,
            github,
            workspace: workspace::Workspace::new(&settings.data_dir, &settings.base_env),
            checks: checks::Checks::new(
                llm,
                &settings.base_env,
                &settings.confinement,
                settings.data_dir.join("goals"),
                settings.prompt_renderer,
            ),
            agents: agents::AgentRunner::new(
                settings.agents,
                settings.base_env,
                settings.confinement.clone(),
                settings.progress_every,
                &redactor,
            ),
            budget: budget::Budget {
                max_tokens_per_run: settings.max_tokens_per_run,
                max_cost_usd_per_run: settings.max_cost_usd_per_run,
                llm_prices: settings.llm_prices,
            },
        })
    }

    /// What the queue makes of a failed engine action.
    pub fn job_error(&self, e: EngineError) -> JobError {
        self.runs.job_error(e)
    }

    /// The handler of `run` jobs.
    pub fn run_step_runner(self: &Arc<Self>) -> Arc<dyn JobRunner> {
        Arc::new(RunStepRunner(self.clone()))
    }

    /// The run's context outside its steps (a stop, a reply, reconciliation,
    /// `/closer status`): a config that no longer parses reads as the
    /// defaults here (the run's next step fails the run with it).
    async fn context(&self, run_id: &RunId) -> Result<Option<RunContext>, EngineError> {
        let Some(run) = self.runs.load_active(run_id).await? else {
            return Ok(None);
        };
        let client = self.github.client(run.installation_id).await?;
        RunContext::load_lenient(run, client, &self.agents.names()).map(Some)
    }

    /// The run a step acts on, if it is still active; `None` too when its
    /// stored config no longer parses (an open run is failed, saying so).
    async fn step_context(&self, run_id: &RunId) -> Result<Option<RunContext>, EngineError> {
        let Some(run) = self.runs.load_active(run_id).await? else {
            return Ok(None);
        };
        let client = self.github.client(run.installation_id).await?;
        let final_state = run.state.is_final();
        match RunContext::load(run, client, &self.agents.names()) {
            Ok(ctx) => Ok(Some(ctx)),
            Err(context::LoadError::Config(_, _)) if final_state => Ok(None),
            Err(context::LoadError::Config(mut ctx, message)) => {
                let failure = failure::RunFailure::Error { message };
                self.fail(&mut ctx, failure).await.map(|()| None)
            }
            Err(context::LoadError::Data(e)) => Err(e),
        }
    }

    /// Runs one step of a run: loads its context once and hands it on,
    /// holding the run's files meanwhile (the retention task leaves them
    /// alone, see `workspace`).
    /// `job` is the queue job's id: the `review` step tells by it whether
    /// the latest round already took what it was queued for.
    async fn step(&self, run_id: &RunId, step: Step, job: i64) -> Result<(), EngineError> {
        let _files = self.workspace.hold_files(run_id).await?;
        if step == Step::ShowStop {
            // A stopped run whose config no longer parses is shown too.
            let Some(mut ctx) = self.context(run_id).await? else {
                return Ok(());
            };
            // A step at work when the stop landed may have put the label on
            // and had its record of it refused: take it off whatever the
            // run says (one DELETE; a label not there is no error).
            ctx.data.awaiting_label = true;
            return self.show_stop(&mut ctx).await;
        }
        let Some(mut ctx) = self.step_context(run_id).await? else {
            return Ok(());
        };
        if ctx.run.state == RunState::Failed && !ctx.data.diagnosis_posted {
            // A merge of its pull request still ends the run (below).
            self.report_failure(&mut ctx).await?;
            if step != Step::Merged {
                return Ok(());
            }
        }
        if ctx.run.state == RunState::Done && !ctx.data.issue_closed && !ctx.data.leave_open {
            // The final status first (a no-op when it was written), then
            // the close that failed last time.
            self.status.publish(&mut ctx).await?;
            self.close_done(&mut ctx).await?;
            // What `finish` would have queued after it, had it got there.
            return self.next_round_if_asked(&ctx).await;
        }
        if step.uses_worktree() {
            self.in_the_runs_workspace(&mut ctx).await?;
        }
        if step == Step::Iterate
            && ctx.run.state == RunState::AwaitingResponse
            && ctx.data.question_posted != Some(ctx.run.iteration)
        {
            return self.resume_question(&mut ctx).await;
        }
        match step {
            // The pull request's steps act on a run at rest; each checks.
            Step::Review => return self.review_round(&mut ctx, job).await,
            Step::Reverify => return self.reverify(&mut ctx).await,
            // The run ended as this step ends it (the step sent back at its
            // status write, or a delivery replayed): the status is written;
            // a no-op when the comment already shows it.
            Step::PullClosed | Step::Merged if ctx.run.state == step.ends_in() => {
                return self.status.publish(&mut ctx).await;
            }
            Step::PullClosed => return self.pull_closed(&mut ctx).await,
            Step::Merged => return self.merged(&mut ctx).await,
            // The run moved on: a step of it sent back before its status
            // write (decision 194) writes the status now; a no-op when the
            // comment already shows it.
            _ if ctx.run.state != step.acts_in() => return self.status.publish(&mut ctx).await,
            _ => {}
        }
        match step {
            Step::Start => self.start(&mut ctx).await,
            Step::Iterate => self.iterate(&mut ctx).await,
            Step::Finish => self.finish(&mut ctx).await,
            Step::Resume => self.resume(&mut ctx).await,
            Step::Review
            | Step::Reverify
            | Step::PullClosed
            | Step::Merged
            | Step::ShowStop
            | Step::TakeEdit => Ok(()),
        }
    }
}

impl EventReactor for Engine {
    fn on_event<'a>(
        &'a self,
        event: &'a crate::events::Event,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, JobError>> + Send + 'a>>
    {
        Box::pin(async move {
            Engine::on_event(self, event)
                .await
                .map_err(|e| self.job_error(e))
        })
    }
}

struct RunStepRunner(Arc<Engine>);

impl RunStepRunner {
    async fn handle_job(&self, job: &LeasedJob) -> Result<(), JobError> {
        let payload: RunJob = serde_json::from_str(&job.payload)
            .map_err(|e| JobError::Permanent(format!("bad run job payload: {e}")))?;
        let done = match (payload.step, &payload.edit) {
            (Step::TakeEdit, Some(edit)) => self.0.take_edit(&payload.run_id, edit).await,
            (Step::TakeEdit, None) => {
                tracing::warn!(run = %payload.run_id, "a take_edit job without its edit; skipped");
                Ok(())
            }
            // Sent back, these find their run moved on and write its status
            // (`Engine::step`); a review step finds the round it started
            // (`review_round.rs`). `reverify` writes no status, and would
            // verify again if sent back.
            (
                step @ (Step::Start
                | Step::Iterate
                | Step::Finish
                | Step::Resume
                | Step::ShowStop
                | Step::Review
                | Step::PullClosed
                | Step::Merged),
                _,
            ) => status::sending_back(self.0.step(&payload.run_id, step, job.id)).await,
            (step, _) => self.0.step(&payload.run_id, step, job.id).await,
        };
        match done {
            Ok(()) | Err(EngineError::Stopped) => Ok(()),
            Err(EngineError::NameTaken { name, holder }) => self
                .0
                .name_taken(&name, holder)
                .await
                .map_err(|e| self.0.job_error(e)),
            Err(e @ (EngineError::Busy(_) | EngineError::NotYet { .. })) => {
                tracing::debug!(run = %payload.run_id, step = ?payload.step, reason = %e, "run step postponed");
                Err(self.0.job_error(e))
            }
            Err(e) => {
                tracing::warn!(run = %payload.run_id, step = ?payload.step, error = %e, "run step failed");
                Err(self.0.job_error(e))
            }
        }
    }
}

impl JobRunner for RunStepRunner {
    fn run<'a>(&'a self, job: &'a LeasedJob) -> JobFuture<'a> {
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
            JobError::Defer(_, wait) => assert_eq!(wait, recheck),
            other => panic!("{other:?}"),
        }
        let other = EngineError::Other("git failed".into());
        assert!(matches!(
            other.into_job_error(0, recheck),
            JobError::Retry(_)
        ));
    }

    #[test]
    fn an_outage_defers_the_step_and_a_refusal_is_retried_as_a_failure() {
        let outages = [
            EngineError::GitHub(GitHubError::Server { status: 502 }),
            EngineError::GitHub(GitHubError::Network("connection refused".into())),
            EngineError::GitHub(GitHubError::RateLimited { until: 60_000 }),
            EngineError::LlmUnavailable("HTTP 503".into()),
            EngineError::AgentModelUnavailable("API Error: 529 Overloaded".into()),
        ];
        for e in outages {
            let shown = e.to_string();
            assert!(
                matches!(e.into_job_error(0, Duration::ZERO), JobError::Defer(..)),
                "{shown}"
            );
        }
        let refused = EngineError::GitHub(GitHubError::Forbidden {
            message: "Resource not accessible by integration".into(),
        });
        assert!(matches!(
            refused.into_job_error(0, Duration::ZERO),
            JobError::Retry(_)
        ));
    }

    #[test]
    fn unreadable_run_data_is_not_retried() {
        let corrupt = EngineError::CorruptRun {
            run: RunId::from_stored("r1"),
            message: "expected value".into(),
        };
        assert!(matches!(
            corrupt.into_job_error(0, Duration::ZERO),
            JobError::Permanent(_)
        ));
    }
}
