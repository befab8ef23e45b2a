//! The `run` job: one step of a run per job. `start` (config, task type,
//! status comment, labels, sandbox, baseline), `iterate` (prompt, agent,
//! verification, judgment, decision) and `finish` (push, pull request,
//! close). Each step first checks the run is still in the state the step
//! expects, so a step queued twice or resumed after a crash does nothing
//! twice.

use std::sync::Arc;
use std::time::Duration;

use super::data::{IterationRecord, RunData};
use super::failure::RunFailure;
use super::triggers::parse_config;
use super::usage::{agent_usage, ceiling};
use super::{Engine, EngineError, Step, state};
use crate::agent::adapter::{AgentRequest, AgentResult, AgentStatus, run_agent};
use crate::agent::sandbox::{RepoSource, Worktree};
use crate::config::repo::RepoConfig;
use crate::engine::baseline::{self, Baseline};
use crate::engine::classify::classify;
use crate::engine::closer::Closer;
use crate::engine::convergence::{CheckId, DecisionKind, Stage};
use crate::engine::goal_outcome::GoalOutcome;
use crate::engine::handlers::{
    Continuation, HandlerEnv, IssueContext, IterationSummary, build_handler,
};
use crate::engine::judge::{Decision, JudgeContext, JudgeInput, judge};
use crate::engine::task_type::TaskType;
use crate::engine::verify::{IterationVerification, VerifyContext, verify_iteration};
use crate::github::InstallationClient;
use crate::github::types::IssueNumber;
use crate::llm::Usage;
use crate::prompts::{EtagCache, GitHubPromptSource, PromptResolver};
use crate::store::runs::{self, RunRow};
use crate::store::verification as evidence;

fn other(e: impl std::fmt::Display) -> EngineError {
    EngineError::Other(e.to_string())
}

impl Engine {
    /// Runs one step of a run.
    pub(super) async fn step(&self, run_id: &str, step: Step) -> Result<(), EngineError> {
        let Some(run) = self.load(run_id).await? else {
            return Ok(());
        };
        let data = RunData::from_json(&run.data);
        if run.state == state::FAILED && !data.diagnosis_posted {
            let client = self.client(run.installation_id).await?;
            return self.report_failure(&client, run, data).await;
        }
        if step == Step::Iterate
            && run.state == state::AWAITING_RESPONSE
            && data.question_posted != Some(run.iteration)
        {
            return self.resume_question(run, data).await;
        }
        match step {
            Step::Start if run.state == state::QUEUED => self.start(run, data).await,
            Step::Iterate if run.state == state::RUNNING => self.iterate(run, data).await,
            Step::Finish if run.state == state::VERIFYING => self.finish(run, data).await,
            Step::Resume if run.state == state::AWAITING_RESPONSE => self.resume(run, data).await,
            _ => Ok(()),
        }
    }

    async fn start(&self, mut run: RunRow, mut data: RunData) -> Result<(), EngineError> {
        let client = self.client(run.installation_id).await?;
        let repo = Self::repo_name(&run)?;
        let config = match parse_config(data.config_text.as_deref(), &self.agent_names()) {
            Ok(c) => c,
            Err(e) => {
                let message = format!("the repository config is invalid: {e}");
                return self
                    .fail(&client, run, data, RunFailure::Error { message })
                    .await;
            }
        };
        self.ensure_labels(&client, &repo, &config.trigger_label)
            .await?;
        self.set_phase(&client, &mut run, &mut data, "preparation")
            .await?;
        if data.failed_label {
            // A retry: the run is no longer failed.
            let number = IssueNumber(run.issue_number as u64);
            client
                .remove_label(&repo, number, crate::comment::labels::FAILED)
                .await?;
            data.failed_label = false;
            self.save(&mut run, &data).await?;
        }
        let Some(llm) = self.llm.clone() else {
            tracing::error!(run = %run.id, "no LLM configured (CLOSER_LLM_*): runs cannot be judged");
            let message =
                "closer has no LLM configured; the operator must set CLOSER_LLM_PROVIDER, \
                           CLOSER_LLM_BASE_URL and CLOSER_LLM_MODEL"
                    .to_owned();
            return self
                .fail(&client, run, data, RunFailure::Error { message })
                .await;
        };
        if run.task_type.is_none() {
            let prompts = self.prompts(&run).await;
            let c = classify(
                &data.issue_labels,
                &data.issue_title,
                &data.issue_body,
                &llm,
                &prompts,
            )
            .await
            .map_err(|e| other(format!("classifying the issue failed: {e}")))?;
            run.task_type = Some(c.task_type.as_str().to_owned());
            self.add_usage(&mut run, c.usage);
            self.save(&mut run, &data).await?;
        }
        let source = self.source(&client, &run).await?;
        let worktree = self
            .sandbox
            .prepare(&source, run.issue_number as u64, &run.id)
            .await
            .map_err(other)?;
        match self.baseline(&run, &worktree, &config).await? {
            Ok(b) => {
                evidence::save_baseline(self.store.pool(), &run.id, &b, self.store.now_ms())
                    .await?;
                data.baseline = Some(b);
            }
            Err(detail) => {
                let failure = RunFailure::BaselineBroken { detail };
                return self.fail(&client, run, data, failure).await;
            }
        }
        run.base_commit = Some(worktree.base_commit.clone());
        data.worktree = Some(worktree);
        run.state = state::RUNNING.to_owned();
        self.save(&mut run, &data).await?;
        self.enqueue(&run.id, Step::Iterate).await?;
        // The step's one status edit: iteration 1 is being worked on.
        self.publish_status(&client, &mut run, &mut data).await
    }

    /// The baseline on a clean worktree of the base commit.
    async fn baseline(
        &self,
        run: &RunRow,
        worktree: &Worktree,
        config: &RepoConfig,
    ) -> Result<Result<Baseline, String>, EngineError> {
        let clean = self
            .sandbox
            .baseline_worktree(worktree, &run.id)
            .await
            .map_err(other)?;
        let taken = baseline::take(self.sandbox.git(), &clean, &config.dod, &self.goals).await;
        if let Err(e) = self.sandbox.remove(&clean, &run.id).await {
            tracing::warn!(run = %run.id, error = %e, "baseline worktree not removed");
        }
        Ok(taken.map_err(|e| e.to_string()))
    }

    async fn iterate(&self, mut run: RunRow, mut data: RunData) -> Result<(), EngineError> {
        let client = self.client(run.installation_id).await?;
        let config = match parse_config(data.config_text.as_deref(), &self.agent_names()) {
            Ok(c) => c,
            Err(e) => {
                let message = format!("the repository config is invalid: {e}");
                return self
                    .fail(&client, run, data, RunFailure::Error { message })
                    .await;
            }
        };
        self.set_phase(&client, &mut run, &mut data, "processing")
            .await?;
        if run.iteration >= run.max_iterations && !self.interrupted(&run).await? {
            let max = run.max_iterations as u32;
            return self
                .fail(&client, run, data, RunFailure::IterationLimit { max })
                .await;
        }
        let max_tokens = ceiling(config.budget.max_tokens, self.max_tokens_per_run);
        if let Some(max) = max_tokens
            && run.tokens_used.max(0) as u64 >= max
        {
            let used = run.tokens_used.max(0) as u64;
            return self
                .fail(&client, run, data, RunFailure::TokenBudget { used, max })
                .await;
        }
        let max_cost = ceiling(config.budget.max_cost_usd, self.max_cost_usd_per_run);
        if let Some(max_usd) = max_cost
            && run.cost_usd >= max_usd
        {
            let used_usd = run.cost_usd;
            return self
                .fail(
                    &client,
                    run,
                    data,
                    RunFailure::CostBudget { used_usd, max_usd },
                )
                .await;
        }
        let (Some(llm), Some(agent)) = (self.llm.clone(), self.agents.get(&config.agent)) else {
            let message = format!("the agent `{}` or the LLM is not configured", config.agent);
            return self
                .fail(&client, run, data, RunFailure::Error { message })
                .await;
        };
        let task = run
            .task_type
            .as_deref()
            .and_then(TaskType::parse)
            .unwrap_or(TaskType::Feature);
        let source = self.source(&client, &run).await?;
        let worktree = self
            .sandbox
            .prepare(&source, run.issue_number as u64, &run.id)
            .await
            .map_err(other)?;
        let handler = build_handler(
            &config.completion,
            &HandlerEnv {
                worktree: worktree.path.clone(),
                env: self.base_env.vars().into_iter().collect(),
                timeout: Duration::from_secs(agent.timeout_secs),
            },
        )
        .map_err(other)?;
        let issue = IssueContext {
            issue_ref: format!("{}#{}", run.repository, run.issue_number),
            title: data.issue_title.clone(),
            body: data.issue_body.clone(),
            task_type: Some(task),
        };
        let prompts = self.prompts(&run).await;
        // An iteration a crash interrupted (started, never finished) runs
        // again under its own number.
        let interrupted = self.interrupted(&run).await?;
        let n = if interrupted {
            run.iteration
        } else {
            run.iteration + 1
        };
        let (prompt, carried) = self
            .prompt(&run, &data, handler.as_ref(), &prompts, &issue, n)
            .await?;
        let now = self.store.now_ms();
        runs::start_iteration(self.store.pool(), &run.id, n, &prompt, now).await?;
        // Only the replies this prompt carries: one stored since (a reply
        // while the agent works) waits for the next prompt.
        runs::mark_messages_used_by_id(self.store.pool(), &run.id, &carried, n).await?;
        run.iteration = n;
        self.save(&mut run, &data).await?;
        // No status edit here: the edit that ended the previous step
        // already says this iteration is being worked on.

        let request = AgentRequest {
            run_id: run.id.clone(),
            iteration: n as u32,
            issue: issue.issue_ref.clone(),
            prompt,
            worktree: worktree.path.clone(),
            scratch_dir: self.scratch.join(&run.id),
        };
        let passed = self
            .passed_env
            .get(&config.agent)
            .cloned()
            .unwrap_or_default();
        // A stop that lands while the agent works ends it (and its process
        // group) at once; the check below then records the iteration.
        let result = tokio::select! {
            result = run_agent(agent, &self.base_env, &passed, &request) => {
                result.unwrap_or_else(|e| agent_error(e.to_string()))
            }
            () = self.stopped_meanwhile(&run.id) => {
                agent_error("the run was stopped; the agent's processes were killed".to_owned())
            }
        };
        let spent = agent_usage(&result.structured);
        run.tokens_used += spent.tokens.min(i64::MAX as u64) as i64;
        run.cost_usd += spent.cost_usd;
        if let Some(fresh) = self.load(&run.id).await?
            && fresh.state != state::RUNNING
        {
            let agent_json = serde_json::to_string(&result).unwrap_or_default();
            let now = self.store.now_ms();
            runs::finish_iteration(
                self.store.pool(),
                &run.id,
                n,
                &agent_json,
                "{}",
                "stopped",
                now,
            )
            .await?;
            return Ok(());
        }
        let baseline = data
            .baseline
            .clone()
            .unwrap_or_else(|| Baseline::empty(&worktree.base_commit));
        let ctx = VerifyContext {
            git: self.sandbox.git(),
            worktree: &worktree,
            repo: &config,
            task,
            acceptance: &[],
            baseline: &baseline,
            settings: &self.goals,
        };
        let check = CheckId::generate(&mut fastrand::Rng::new());
        let verification = verify_iteration(ctx, &mut data.convergence, n as u32, check)
            .await
            .map_err(other)?;
        evidence::save_iteration(
            self.store.pool(),
            &run.id,
            &verification,
            &data.convergence,
            self.store.now_ms(),
        )
        .await?;
        run.stage = i64::from(data.convergence.stage.number());

        let summary = IterationSummary {
            iteration: n as u32,
            output_text: result.message.clone(),
            structured_output: result.structured.clone(),
            goals: verification
                .goals
                .iter()
                .map(|g| GoalOutcome {
                    name: g.name(),
                    passed: g.passed || g.baseline_only,
                    required: g.required,
                    evidence: g.evidence.clone(),
                })
                .collect(),
            failed: result.status == AgentStatus::Error,
        };
        let judge_ctx = JudgeContext {
            closer: Closer::new(
                llm.clone(),
                prompts.clone(),
                config.completion.confidence_threshold,
            ),
            handler,
            task_type: task,
            issue,
        };
        let judgment = judge(
            &judge_ctx,
            JudgeInput {
                summary: summary.clone(),
            },
        )
        .await;
        self.add_usage(&mut run, judgment.usage);
        let complete = judgment.decision == Decision::Complete && verification.complete();
        let decision = decision_name(&judgment.decision, complete);
        let record = IterationRecord {
            summary,
            judgment,
            verification: Some(verification.clone()),
            complete,
        };
        let agent_json = serde_json::to_string(&result).unwrap_or_default();
        let record_json = serde_json::to_string(&record).unwrap_or_default();
        runs::finish_iteration(
            self.store.pool(),
            &run.id,
            n,
            &agent_json,
            &record_json,
            decision,
            self.store.now_ms(),
        )
        .await?;
        self.decide(&client, run, data, record, &verification).await
    }

    /// Whether the run's current iteration started and never finished.
    async fn interrupted(&self, run: &RunRow) -> Result<bool, EngineError> {
        Ok(runs::iterations(self.store.pool(), &run.id)
            .await?
            .last()
            .is_some_and(|i| i.number == run.iteration && i.finished_at.is_none()))
    }

    /// What follows an iteration.
    async fn decide(
        &self,
        client: &InstallationClient,
        mut run: RunRow,
        mut data: RunData,
        record: IterationRecord,
        verification: &IterationVerification,
    ) -> Result<(), EngineError> {
        let n = run.iteration;
        if record.judgment.decision == Decision::AwaitingResponse {
            run.state = state::AWAITING_RESPONSE.to_owned();
            self.save(&mut run, &data).await?;
            return self
                .ask(client, run, data, &record.judgment.questions)
                .await;
        }
        if record.complete {
            run.state = state::VERIFYING.to_owned();
            self.save(&mut run, &data).await?;
            self.enqueue(&run.id, Step::Finish).await?;
            return self.publish_status(client, &mut run, &mut data).await;
        }
        if verification.decision.decision == DecisionKind::Failed
            || data.convergence.stage == Stage::Stopped
        {
            return self
                .fail(client, run, data, RunFailure::ConvergenceStopped)
                .await;
        }
        if n >= run.max_iterations {
            let max = run.max_iterations as u32;
            return self
                .fail(client, run, data, RunFailure::IterationLimit { max })
                .await;
        }
        self.save(&mut run, &data).await?;
        self.enqueue(&run.id, Step::Iterate).await?;
        self.publish_status(client, &mut run, &mut data).await
    }

    /// The prompt of iteration `n`: the initial one, or the continuation
    /// with the history, the pending actions, the maintainer's replies and,
    /// in stage 2, the minimal-fix rules; with the comment ids of the
    /// replies it carries.
    async fn prompt(
        &self,
        run: &RunRow,
        data: &RunData,
        handler: &dyn crate::engine::handlers::CompletionHandler,
        prompts: &PromptResolver,
        issue: &IssueContext,
        n: i64,
    ) -> Result<(String, Vec<i64>), EngineError> {
        let rows = runs::iterations(self.store.pool(), &run.id).await?;
        let records: Vec<IterationRecord> = rows
            .iter()
            .filter_map(|r| r.judgment.as_deref())
            .filter_map(IterationRecord::from_json)
            .collect();
        let carried: Vec<runs::MessageRow> = runs::messages(self.store.pool(), &run.id)
            .await?
            .into_iter()
            .filter(|m| m.used_in.is_none() || m.used_in == Some(n))
            .collect();
        let replies: Vec<String> = carried
            .iter()
            .map(|m| format!("@{}: {}", m.author, m.body))
            .collect();
        let carried: Vec<i64> = carried.iter().map(|m| m.comment_id).collect();
        let mut text = if records.is_empty() && replies.is_empty() {
            handler
                .initial_prompt(prompts, issue)
                .await
                .map_err(other)?
                .text
        } else {
            let history: Vec<IterationSummary> =
                records.iter().map(|r| r.summary.clone()).collect();
            let mut pending = records
                .last()
                .map(|r| r.judgment.pending_actions.clone())
                .unwrap_or_default();
            if let Some(v) = records.last().and_then(|r| r.verification.as_ref()) {
                pending.extend(v.decision.reasons.iter().map(|r| format!("Fix: {r}")));
            }
            let next = Continuation {
                iteration: n as u32,
                history: &history,
                pending_actions: &pending,
                maintainer_replies: &replies,
            };
            handler
                .continuation_prompt(prompts, issue, next)
                .await
                .map_err(other)?
                .text
        };
        if data.convergence.stage == Stage::MinimalFix
            && let Some(fix) = records
                .last()
                .and_then(|r| r.verification.as_ref())
                .and_then(|v| v.decision.minimal_fix.as_ref())
        {
            text.push_str("\n\n");
            text.push_str(&fix.instructions());
        }
        Ok((text, carried))
    }

    /// Where the repository is cloned from, with the token for http(s).
    pub(super) async fn source(
        &self,
        client: &InstallationClient,
        run: &RunRow,
    ) -> Result<RepoSource, EngineError> {
        let (url, branch) = match (&run.clone_url, &run.default_branch) {
            (Some(u), Some(b)) => (u.clone(), b.clone()),
            _ => {
                let r = client.get_repository(&Self::repo_name(run)?).await?;
                (
                    run.clone_url.clone().unwrap_or(r.clone_url),
                    run.default_branch.clone().unwrap_or(r.default_branch),
                )
            }
        };
        let token = match url.starts_with("http") {
            true => Some(client.token().await?),
            false => None,
        };
        Ok(RepoSource {
            url,
            token,
            default_branch: Some(branch),
        })
    }

    /// The prompts: the repository's overrides over the built-in set.
    pub(super) async fn prompts(&self, run: &RunRow) -> PromptResolver {
        let (Ok(repo), Ok(client)) = (Self::repo_name(run), self.client(run.installation_id).await)
        else {
            return PromptResolver::builtin_only();
        };
        let branch = run
            .default_branch
            .clone()
            .unwrap_or_else(|| "main".to_owned());
        let source = Arc::new(GitHubPromptSource::new(client, repo, &branch));
        PromptResolver::new(source, "closer", EtagCache::default())
            .unwrap_or_else(|_| PromptResolver::builtin_only())
    }
}

impl Engine {
    /// Counts an LLM call: its tokens, and its cost at the operator's prices.
    fn add_usage(&self, run: &mut RunRow, usage: Usage) {
        run.tokens_used += (usage.input_tokens + usage.output_tokens) as i64;
        run.cost_usd += self.llm_prices.cost(&usage);
    }
}

fn agent_error(message: String) -> AgentResult {
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

fn decision_name(decision: &Decision, complete: bool) -> &'static str {
    match decision {
        Decision::Complete if complete => "complete",
        Decision::AwaitingResponse => "awaiting_response",
        Decision::Error => "error",
        _ => "incomplete",
    }
}
