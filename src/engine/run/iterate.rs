//! The `iterate` step, as a sequence of small steps: the limits, the
//! iteration's setup (worktree, completion handler, prompt), the agent, the
//! verification, the judgment, and the decision (`decide.rs`).
//!
//! An iteration a crash interrupted (started, never finished) runs again
//! under its own number; when its agent had finished (its result is kept
//! before the judgment), only the verification and the judgment run again.
//! The iteration's end is written with the run's decision on it, in one
//! transaction (`RunContext::judged`), so no crash leaves one without the
//! other.
//! A run whose pull request (a review round's, or one a restart kept open)
//! was merged or closed meanwhile ends before another iteration starts
//! (`finish.rs`).
//! A stop that lands while the agent works kills the agent and records the
//! iteration as stopped. An agent whose model provider is down leaves no
//! iteration behind: it runs again once the provider answers
//! (`model_outage.rs`).

use std::sync::Arc;
use std::time::Duration;

use super::checkout::Checkout;
use super::context::RunContext;
use super::data::IterationRecord;
use super::failure::RunFailure;
use super::{Engine, EngineError, other};
use crate::agent::adapter::{AgentRequest, AgentResult, AgentStatus};
use crate::agent::confine::{Kind, View};
use crate::agent::outcome::AgentFailure;
use crate::agent::sandbox::Worktree;
use crate::agent::sandbox::purpose::Purpose;
use crate::config::agents::AgentConfig;
use crate::config::repo::CompletionType;
use crate::engine::artifacts::Artifacts;
use crate::engine::baseline::Baseline;
use crate::engine::completion_check::{CompletionCheck, PreviousCheck};
use crate::engine::convergence::{CheckId, ConvergenceState};
use crate::engine::evidence;
use crate::engine::goal_outcome::GoalOutcome;
use crate::engine::handlers::{
    CompletionHandler, HandlerEnv, IssueContext, IterationSummary, build_handler,
};
use crate::engine::judge::{JudgeContext, JudgeInput, Judgment, judge};
use crate::engine::tolerance::failure_id;
use crate::engine::verify::{self, IterationVerification, VerifyContext};
use crate::llm::LlmClient;
use crate::model::{Decision, IterationEnd, Phase, RunState, TaskType};
use crate::prompts::PromptResolver;
use crate::redact::Channel;
use crate::store::{messages, runs};

/// How long a stopped agent's result is waited for once its group is killed.
const STOPPED_AGENT_GRACE: Duration = Duration::from_secs(10);

/// What one iteration works with, set up before its agent starts.
pub(super) struct Iteration {
    /// Its number (1, 2, …).
    pub n: u32,
    pub task: TaskType,
    pub issue: IssueContext,
    pub handler: Arc<dyn CompletionHandler>,
    pub prompts: PromptResolver,
    pub worktree: Worktree,
    pub llm: Arc<dyn LlmClient>,
}

impl Engine {
    pub(super) async fn iterate(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        // A pull request that ended meanwhile ends the run before another
        // iteration is spent on it (an interrupted one is finished first:
        // its kept work must not wait for a later life of the run).
        if ctx.run.pull_request.is_some()
            && !self.runs.interrupted(&ctx.run).await?
            && self.end_if_pull_ended(ctx).await?
        {
            return Ok(());
        }
        // A review round keeps the phase the pull request gave the issue.
        if !ctx.data.keeps_phase() {
            self.status.set_phase(ctx, Phase::Processing).await?;
        }
        if let Some(failure) = self.limits(ctx).await? {
            return self.fail(ctx, failure).await;
        }
        let agent_name = ctx.config.agent.clone();
        let (Some(llm), Some(agent)) = (self.checks.llm(), self.agents.get(&agent_name)) else {
            let message = format!("the agent `{agent_name}` or the LLM is not configured");
            return self.fail(ctx, RunFailure::Error { message }).await;
        };
        let iteration = self.set_up(ctx, llm, agent).await?;
        // The agent's result is kept, as it came, until it is judged: an
        // iteration whose judgment did not happen (the LLM was down, a
        // crash) is judged again without the agent working twice.
        let mut result = match self.runs.unjudged_work(&ctx.run, iteration.n).await? {
            Some(result) => result,
            None => {
                // A fresh iteration continues from the branch on GitHub.
                self.follow_branch(ctx, &iteration.worktree).await?;
                let prompt = self.begin(ctx, &iteration).await?;
                let work = (agent_name.as_str(), agent);
                let result = self.work(ctx, &iteration, work, prompt).await;
                if !matches!(result.failure, Some(AgentFailure::ModelUnavailable { .. })) {
                    self.runs.keep_work(&ctx.run, iteration.n, &result).await?;
                }
                result
            }
        };
        let counted_before = ctx.data.usage_counted == Some(iteration.n);
        if !counted_before {
            account_session(ctx, &mut result);
            self.budget.add_agent(&mut ctx.run, &result.usage);
            ctx.data.usage_counted = Some(iteration.n);
        }
        if self
            .stopped_since_start(ctx, &iteration, &result, counted_before)
            .await?
        {
            return Ok(());
        }
        if let Some(AgentFailure::ModelUnavailable { detail }) = &result.failure {
            return self.model_down(ctx, &iteration, &result, detail).await;
        }
        self.model_back(ctx).await?;
        if let Some(failure) = result.failure.clone().filter(AgentFailure::fatal) {
            let message = format!("{failure}. Every iteration would fail the same way.");
            return self.cannot_run(ctx, &iteration, &result, message).await;
        }
        self.commit_for_agent(&iteration, &mut result).await;
        let (verification, record) = self.check_and_judge(ctx, &iteration, &result).await?;
        self.record(ctx, &iteration, &result, &record)?;
        let llm_error = record
            .judgment
            .check
            .as_ref()
            .and_then(|c| c.llm_error.as_ref());
        if let Some(e) = llm_error.filter(|e| e.is_refusal()) {
            let message = super::start::llm_refused(e);
            let failure = RunFailure::Error { message };
            return self.fail_unless_pull_ended(ctx, failure).await;
        }
        self.decide(ctx, record, &verification).await
    }

    /// Why no further iteration may start, if none may.
    async fn limits(&self, ctx: &RunContext) -> Result<Option<RunFailure>, EngineError> {
        let run = &ctx.run;
        if run.iteration >= run.max_iterations && !self.runs.interrupted(run).await? {
            let max = run.max_iterations;
            return Ok(Some(RunFailure::IterationLimit { max }));
        }
        Ok(self.budget.exhausted(ctx))
    }

    /// The worktree, the completion handler, the prompts and the number.
    pub(super) async fn set_up(
        &self,
        ctx: &RunContext,
        llm: Arc<dyn LlmClient>,
        agent: &AgentConfig,
    ) -> Result<Iteration, EngineError> {
        let task = ctx.run.task_type.unwrap_or(TaskType::Feature);
        let worktree = self.workspace.prepare(ctx).await?;
        // Never less than an iteration: a HOME in use is never swept.
        let keep = Duration::from_secs(agent.keep_home_secs.max(agent.timeout_secs + 60));
        self.workspace.sweep_homes(&ctx.run.id, keep).await;
        let completion = &ctx.config.completion;
        let handler_path = match completion.kind {
            CompletionType::Custom => completion.handler.as_deref(),
            _ => None,
        };
        let scripts = self
            .workspace
            .handler_scripts(&ctx.run.id, &worktree, handler_path)
            .await?;
        // The handler judges the commit, as the goals do: it runs in the
        // checks' clean checkout, which stands while the iteration is judged.
        let checks = self
            .workspace
            .sandbox()
            .checkout_path(ctx.run.id.as_str(), Purpose::Checks);
        let handler_env = HandlerEnv {
            worktree: checks.clone(),
            scripts,
            env: self.agents.base_env().vars().into_iter().collect(),
            timeout: Duration::from_secs(agent.timeout_secs),
            jail: Some(self.agents.confinement().jail(
                Kind::Handler,
                View {
                    read_write: Vec::new(),
                    read_only: vec![checks, worktree.mirror.clone()],
                },
            )),
        };
        let handler = build_handler(&ctx.config.completion, &handler_env).map_err(other)?;
        let issue = IssueContext {
            issue_ref: format!("{}#{}", ctx.repo(), ctx.issue()),
            title: ctx.data.issue_title.clone(),
            body: ctx.data.issue_body.clone(),
            task_type: Some(task),
        };
        let n = match self.runs.interrupted(&ctx.run).await? {
            true => ctx.run.iteration,
            false => ctx.run.iteration + 1,
        };
        Ok(Iteration {
            n,
            task,
            issue,
            handler,
            prompts: self.checks.prompts(ctx),
            worktree,
            llm,
        })
    }

    /// Writes the prompt and the iteration's start, and marks the replies
    /// the prompt carries (one stored since waits for the next prompt);
    /// returns the prompt.
    async fn begin(
        &self,
        ctx: &mut RunContext,
        iteration: &Iteration,
    ) -> Result<String, EngineError> {
        let prompt = self.prompt(ctx, iteration).await?;
        let pool = self.runs.store().pool();
        let now = self.runs.store().now_ms();
        let n = iteration.n;
        runs::start_iteration(pool, &ctx.run.id, n, &prompt.text, now).await?;
        messages::mark_used_by_id(pool, &ctx.run.id, &prompt.carried, n).await?;
        ctx.run.iteration = n;
        // Past the iteration an answer resumed: the author's window is shut.
        if ctx.data.answered_for.is_some_and(|k| n > k) {
            ctx.data.answered_for = None;
        }
        for (root, newest) in prompt.threads {
            if !ctx.data.pending_threads.contains(&root) {
                ctx.data.pending_threads.push(root);
            }
            let seen = ctx.data.threads_seen.entry(root).or_default();
            *seen = (*seen).max(newest);
        }
        ctx.data.reverified = None;
        // No status edit here: the edit that ended the previous step
        // already says this iteration is being worked on.
        self.runs.save(ctx).await?;
        Ok(prompt.text)
    }

    /// Runs the agent; a stop of the run meanwhile kills it (and its process
    /// group) at once, and what it printed so far (its usage) is still read.
    async fn work(
        &self,
        ctx: &RunContext,
        iteration: &Iteration,
        (name, agent): (&str, &AgentConfig),
        prompt: String,
    ) -> AgentResult {
        let (stop_tx, stop) = tokio::sync::watch::channel(false);
        let request = AgentRequest {
            run_id: ctx.run.id.to_string(),
            iteration: iteration.n,
            issue: iteration.issue.issue_ref.clone(),
            prompt,
            worktree: iteration.worktree.path.clone(),
            scratch_dir: self.workspace.scratch(&ctx.run.id),
            home: Some(self.workspace.home(&ctx.run.id)),
            mirror: Some(iteration.worktree.mirror.clone()),
            resume: ctx.data.agent_session.clone().filter(|_| agent.resume),
            progress: None,
            stop: Some(stop),
        };
        let run = self.run_agent_watched(ctx, (name, agent), request);
        tokio::pin!(run);
        tokio::select! {
            result = &mut run => result,
            () = self.stopped_meanwhile(&ctx.run.id) => {
                let _ = stop_tx.send(true);
                // Killed with its group, its output is read at once; should
                // anything still hold the run up, it is dropped (which kills
                // the group as well) and its usage is lost.
                tokio::time::timeout(STOPPED_AGENT_GRACE, run)
                    .await
                    .unwrap_or_else(|_| AgentResult::failed(AgentFailure::Stopped))
            }
        }
    }

    /// Commits what the agent left changed; a commit closer cannot make is
    /// the iteration's failure, named.
    async fn commit_for_agent(&self, iteration: &Iteration, result: &mut AgentResult) {
        let fallback = format!(
            "Work on {} (iteration {})",
            iteration.issue.issue_ref, iteration.n
        );
        // The subject is pushed, past the write door's filter: the agent's
        // words may hold a secret it was given or found (decision 239).
        let summary = self.github.redactor().redact(Channel::Git, &result.message);
        let committed = self
            .workspace
            .sandbox()
            .commit_changes(&iteration.worktree, &summary, &fallback)
            .await;
        if let Err(e) = committed {
            result.fail(AgentFailure::CommitFailed {
                detail: e.to_string(),
            });
        }
    }

    /// An agent that cannot run at all (not installed, not authenticated,
    /// refusing to start, its model provider down for hours) fails the run
    /// at once with `message`; the iteration is recorded, not judged.
    pub(super) async fn cannot_run(
        &self,
        ctx: &mut RunContext,
        iteration: &Iteration,
        result: &AgentResult,
        message: String,
    ) -> Result<(), EngineError> {
        let why = result
            .failure
            .as_ref()
            .map_or_else(|| message.clone(), AgentFailure::describe);
        let record = IterationRecord {
            summary: summary_of(iteration, result, &[], Vec::new()),
            judgment: Judgment::not_run(why),
            verification: None,
            complete: false,
        };
        self.record(ctx, iteration, result, &record)?;
        // Nobody acted on the replies the prompt carried: a retry shows them.
        let pool = self.runs.store().pool();
        runs::release_messages(pool, &ctx.run.id, iteration.n).await?;
        self.fail_unless_pull_ended(ctx, RunFailure::Error { message })
            .await
    }

    /// Records the iteration as stopped when the run was stopped while the
    /// agent worked, with what it spent unless the stored totals hold it
    /// (`counted`); `true` then.
    async fn stopped_since_start(
        &self,
        ctx: &RunContext,
        iteration: &Iteration,
        result: &AgentResult,
        counted: bool,
    ) -> Result<bool, EngineError> {
        let Some(fresh) = self.runs.load(&ctx.run.id).await? else {
            return Ok(true);
        };
        if fresh.state == RunState::Running {
            return Ok(false);
        }
        let agent_json = serde_json::to_string(result).map_err(other)?;
        let now = self.runs.store().now_ms();
        let pool = self.runs.store().pool();
        let spent = match counted {
            true => runs::Spent::default(),
            false => runs::Spent {
                tokens: result.usage.tokens.total(),
                cost_usd: result.usage.cost_usd.unwrap_or(0.0),
            },
        };
        runs::stop_iteration(pool, &ctx.run.id, iteration.n, &agent_json, spent, now).await?;
        Ok(true)
    }

    /// The checks on a clean checkout of the head, and the judgment while
    /// that checkout stands: the `custom` handler runs in it, as the goals
    /// do, and sees only the commit.
    async fn check_and_judge(
        &self,
        ctx: &mut RunContext,
        iteration: &Iteration,
        result: &AgentResult,
    ) -> Result<(IterationVerification, IterationRecord), EngineError> {
        let checkout = self.checkout_head(ctx, iteration).await?;
        let judged = async {
            let before = ctx.data.convergence.clone();
            let verification = self.verify(ctx, iteration, &checkout).await?;
            let record = self.judge(ctx, iteration, result, &verification).await?;
            if record.judgment.decision == Decision::AwaitingResponse {
                // A question is no attempt at the task: an iteration that
                // only asks changes nothing, and counted, it would look
                // like going round in circles while the run waits.
                ctx.run.stage = before.stage;
                ctx.data.convergence = before;
            }
            Ok((verification, record))
        }
        .await;
        self.release(checkout, ctx.run.id.as_str()).await;
        judged
    }

    /// The goals at head (in `checkout`), the reproduction (for a bug), the
    /// baseline, the scope and the convergence controller; the evidence is
    /// stored.
    async fn verify(
        &self,
        ctx: &mut RunContext,
        iteration: &Iteration,
        checkout: &Checkout,
    ) -> Result<IterationVerification, EngineError> {
        let mut state = ctx.data.convergence.clone();
        let verification = self.check_in(ctx, iteration, checkout, &mut state).await?;
        ctx.data.convergence = state;
        let store = self.runs.store();
        let run_id = ctx.run.id.as_str();
        let convergence = &ctx.data.convergence;
        evidence::save_iteration(
            store.pool(),
            run_id,
            &verification,
            convergence,
            store.now_ms(),
        )
        .await?;
        ctx.run.stage = ctx.data.convergence.stage;
        Ok(verification)
    }

    /// The checks at the iteration's head against the run's baseline, with
    /// the reproduction, concluded with `state` (the run's convergence
    /// history, or a copy when the check is not one of the agent's). The
    /// goals run on a clean checkout of the head (`checkout`), never in the
    /// agent's worktree.
    pub(super) async fn check_head(
        &self,
        ctx: &RunContext,
        iteration: &Iteration,
        state: &mut ConvergenceState,
    ) -> Result<IterationVerification, EngineError> {
        let checkout = self.checkout_head(ctx, iteration).await?;
        let checked = self.check_in(ctx, iteration, &checkout, state).await;
        self.release(checkout, ctx.run.id.as_str()).await;
        checked
    }

    /// A clean checkout of the iteration's head for its checks.
    async fn checkout_head(
        &self,
        ctx: &RunContext,
        iteration: &Iteration,
    ) -> Result<Checkout, EngineError> {
        let sandbox = self.workspace.sandbox();
        let head = sandbox.head(&iteration.worktree).await.map_err(other)?;
        let run_id = ctx.run.id.as_str();
        self.checkout(&iteration.worktree, run_id, &head, Purpose::Checks)
            .await
    }

    /// [`Engine::check_head`] in `checkout`.
    async fn check_in(
        &self,
        ctx: &RunContext,
        iteration: &Iteration,
        checkout: &Checkout,
        state: &mut ConvergenceState,
    ) -> Result<IterationVerification, EngineError> {
        let baseline = ctx
            .data
            .baseline
            .clone()
            .unwrap_or_else(|| Baseline::empty(&iteration.worktree.base_commit));
        let verify = VerifyContext {
            git: self.workspace.sandbox().git(),
            worktree: &iteration.worktree,
            checkout: &checkout.worktree.path,
            home: Some(&checkout.home),
            repo: &ctx.config,
            task: iteration.task,
            acceptance: &[],
            baseline: &baseline,
            settings: self.checks.goals(),
        };
        let found = verify::evaluate(verify).await.map_err(other)?;
        let reproduction = self.reproduce(ctx, iteration, &baseline, &found).await?;
        let check = CheckId::generate(&mut fastrand::Rng::new());
        verify::conclude(verify, found, reproduction, state, iteration.n, check).map_err(other)
    }

    /// The completion check on the agent's report and the goal results. An
    /// LLM that cannot be reached ends the step here, the iteration not
    /// judged: the step waits for the LLM, no iteration is spent.
    async fn judge(
        &self,
        ctx: &mut RunContext,
        iteration: &Iteration,
        result: &AgentResult,
        verification: &IterationVerification,
    ) -> Result<IterationRecord, EngineError> {
        let tolerated = verification.tolerated.iter().map(failure_id).collect();
        let summary = summary_of(iteration, result, &verification.goals, tolerated);
        let threshold = ctx.config.completion.confidence_threshold;
        let judge_ctx = JudgeContext {
            check: CompletionCheck::new(
                iteration.llm.clone(),
                iteration.prompts.clone(),
                threshold,
            ),
            handler: iteration.handler.clone(),
            task_type: iteration.task,
            issue: iteration.issue.clone(),
        };
        let input = JudgeInput {
            summary: summary.clone(),
            previous: self.previous_check(ctx, verification).await,
        };
        let judgment = judge(&judge_ctx, input).await;
        let llm_error = judgment.check.as_ref().and_then(|c| c.llm_error.as_ref());
        if let Some(e) = llm_error.filter(|e| e.is_outage()) {
            return Err(EngineError::LlmUnavailable(e.to_string()));
        }
        self.budget.add_llm(&mut ctx.run, judgment.usage);
        let complete =
            judgment.decision == crate::model::Decision::Complete && verification.complete();
        Ok(IterationRecord {
            summary,
            judgment,
            verification: Some(verification.clone()),
            complete,
        })
    }

    /// The last check, when it found the work incomplete, with what changed
    /// since: the completion check's retry starts from it. A record that
    /// cannot be read counts as none (logged): the check then starts afresh.
    async fn previous_check(
        &self,
        ctx: &RunContext,
        now: &IterationVerification,
    ) -> Option<PreviousCheck> {
        let last = match self.runs.last_record(&ctx.run.id).await {
            Ok(last) => last?,
            Err(e) => {
                tracing::warn!(run = %ctx.run.id, error = %e, "previous check unreadable");
                return None;
            }
        };
        let check = last.judgment.check.as_ref().filter(|_| !last.complete)?;
        let before = last.verification.as_ref().map(|v| &v.artifacts);
        Some(PreviousCheck {
            checklist: check.output.checklist.clone(),
            changes_since: changes_since(before, &now.artifacts),
        })
    }

    /// Writes the iteration's result on its row.
    /// Holds the iteration's end for the save that writes the run's
    /// decision on it: both land in one transaction.
    fn record(
        &self,
        ctx: &mut RunContext,
        iteration: &Iteration,
        result: &AgentResult,
        record: &IterationRecord,
    ) -> Result<(), EngineError> {
        // The notes the prompt carried are spent with the judged iteration,
        // not when the prompt is written: an iteration taken back (the
        // model was down) or run again after a crash carries them again.
        ctx.data.branch_note = None;
        ctx.data.issue_edited_by = None;
        ctx.judged = Some(runs::IterationFinish {
            number: iteration.n,
            agent: serde_json::to_string(result).map_err(other)?,
            judgment: serde_json::to_string(record).map_err(other)?,
            decision: IterationEnd::judged(record.judgment.decision, record.complete),
            at: self.runs.store().now_ms(),
        });
        Ok(())
    }
}

/// Keeps the tool's session for the next iteration and turns a session's
/// running total of tokens (Codex) into this iteration's share.
fn account_session(ctx: &mut RunContext, result: &mut AgentResult) {
    let same_session = result.session_id.is_some() && result.session_id == ctx.data.agent_session;
    if result.usage.session_total {
        let total = result.usage.tokens;
        if same_session {
            result.usage.tokens = result.usage.since(&ctx.data.agent_session_tokens);
        }
        ctx.data.agent_session_tokens = total;
    }
    if result.session_id.is_some() {
        ctx.data.agent_session = result.session_id.clone();
    }
}

/// What the iteration produced, for the judgment and the next prompt.
fn summary_of(
    iteration: &Iteration,
    result: &AgentResult,
    goals: &[crate::engine::goals::GoalResult],
    tolerated: Vec<String>,
) -> IterationSummary {
    IterationSummary {
        iteration: iteration.n,
        output_text: result.message.clone(),
        structured_output: result.structured.clone(),
        goals: goals.iter().map(goal_outcome).collect(),
        failed: result.status == AgentStatus::Error,
        agent_failure: result.failure.as_ref().map(AgentFailure::describe),
        tolerated,
    }
}

/// The commits and files of `now` that `before` did not have, in a few
/// lines: at most 20 of each, every subject and path on its own line (the
/// agent names both, and a line break in one would pose as the prompt's
/// own section; decision 245).
fn changes_since(before: Option<&Artifacts>, now: &Artifacts) -> String {
    use crate::prompts::fence::one_line;
    let known = |sha: &str| before.is_some_and(|b| b.commits.iter().any(|c| c.sha == sha));
    let commits: Vec<String> = now
        .commits
        .iter()
        .filter(|c| !known(&c.sha))
        .take(20)
        .map(|c| {
            format!(
                "- commit {}: {}",
                crate::comment::markdown::head(&c.sha, 10),
                one_line(&c.message, 200)
            )
        })
        .collect();
    let was = |path: &str, added: u64, deleted: u64| {
        before.is_some_and(|b| {
            b.all_files()
                .any(|f| f.path == path && f.added == added && f.deleted == deleted)
        })
    };
    let files: Vec<String> = now
        .all_files()
        .filter(|f| !was(&f.path, f.added, f.deleted))
        .take(20)
        .map(|f| format!("- {} (+{} −{})", one_line(&f.path, 300), f.added, f.deleted))
        .collect();
    match (commits.is_empty(), files.is_empty()) {
        (true, true) => "Nothing: the change is the same as at the previous check.".to_owned(),
        _ => [commits, files].concat().join("\n"),
    }
}

/// A goal's result as the completion check sees it: a goal whose failures
/// the repository tolerates counts as passed here (the tolerated failures
/// are put to the check separately, for it to judge their scope).
fn goal_outcome(g: &crate::engine::goals::GoalResult) -> GoalOutcome {
    GoalOutcome {
        name: g.name(),
        passed: g.passed || g.tolerated,
        required: g.required,
        evidence: g.evidence.clone(),
    }
}
