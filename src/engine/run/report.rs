//! What a run shows on GitHub: the status comment (one per run, found again
//! by its marker, edited at most once per step and only when its text
//! changed) and the labels (exactly one `phase:*`, `awaiting-response`,
//! `closer:failed`), each touched only when the state changes.
//!
//! Rendering lives in `crate::comment`; this module only maps the run onto
//! its view structs and writes. It must never trust a marker in a comment
//! that our App did not write.

use super::data::{IterationRecord, RunData};
use super::triggers::{is_ours, parse_config};
use super::{Engine, EngineError, state};
use crate::comment::{
    self, BaselineRow, ChecklistRow, GoalRow, GoalStatus, NextStep, Phase, QuestionView, RunState,
    ScopeRow, SignalRow, Stage, StatusView, UsageView, VerificationView,
};
use crate::config::repo::CloseOn;
use crate::engine::task_type::TaskType;
use crate::github::types::{InstallationId, IssueNumber, RepoName};
use crate::github::{
    CommentId, InstallationClient, LabelCreated, ProjectSyncError, sync_project_status,
};
use crate::store::runs::{self, RunRow};

impl Engine {
    /// The last finished iteration of a run, as the engine stored it.
    pub(super) async fn last_record(
        &self,
        run_id: &str,
    ) -> Result<Option<IterationRecord>, EngineError> {
        let rows = runs::iterations(self.store.pool(), run_id).await?;
        Ok(rows
            .iter()
            .rev()
            .filter_map(|r| r.judgment.as_deref())
            .find_map(IterationRecord::from_json))
    }

    /// Everything the status comment shows.
    pub(super) async fn status_view(
        &self,
        run: &RunRow,
        data: &RunData,
    ) -> Result<StatusView, EngineError> {
        let last = self.last_record(&run.id).await?;
        let config = parse_config(data.config_text.as_deref(), &self.agent_names()).ok();
        let run_state = run_state(&run.state);
        let close_on_merge = config
            .as_ref()
            .is_some_and(|c| c.close_on == CloseOn::Merged);
        let next = match run_state {
            RunState::Queued => NextStep::Queued,
            RunState::Running if run.iteration == 0 => NextStep::Working { iteration: 1 },
            RunState::Running => {
                // Shown by the edit that ends a step: the iteration that
                // runs next (or runs again after a crash).
                let judged = last
                    .as_ref()
                    .is_some_and(|r| i64::from(r.summary.iteration) == run.iteration);
                NextStep::Working {
                    iteration: run.iteration as u32 + u32::from(judged),
                }
            }
            RunState::Verifying => match run.pull_request {
                Some(n) => NextStep::PullRequestOpen {
                    number: IssueNumber(n as u64),
                    close_on_merge,
                },
                None => NextStep::Verifying {
                    iteration: run.iteration as u32,
                },
            },
            RunState::AwaitingResponse => NextStep::WaitingFor {
                author: data.issue_author.clone(),
            },
            RunState::Done => NextStep::Closed,
            RunState::Failed => NextStep::Failed,
            RunState::Stopped => NextStep::Stopped,
        };
        let mut view = StatusView {
            run_id: run.id.clone(),
            state: run_state,
            phase: phase(&run.phase),
            task_type: run.task_type.as_deref().and_then(TaskType::parse),
            iteration: run.iteration.max(0) as u32,
            max_iterations: run.max_iterations.max(0) as u32,
            stage: match data.convergence.stage.number() {
                1 => Stage::Normal,
                2 => Stage::MinimalFix,
                _ => Stage::Stopped,
            },
            summary: None,
            checklist: Vec::new(),
            pending_actions: Vec::new(),
            verification: None,
            question: None,
            usage: UsageView {
                tokens: run.tokens_used.max(0) as u64,
                cost_usd: run.cost_usd,
                max_tokens: config.as_ref().and_then(|c| c.budget.max_tokens),
                max_cost_usd: config.as_ref().and_then(|c| c.budget.max_cost_usd),
            },
            dashboard_url: self
                .dashboard_url
                .as_ref()
                .map(|u| format!("{}/runs/{}", u.trim_end_matches('/'), run.id)),
            next,
            notices: data.board_problem.iter().cloned().collect(),
        };
        if let Some(last) = last {
            fill_from_record(&mut view, &last);
        }
        Ok(view)
    }

    /// Writes the status comment if its text changed: edits the known one,
    /// else finds ours by marker, else creates it (and remembers its id).
    /// Writes of one installation are at least a second apart (the
    /// engine's throttle); each step calls this at most once.
    pub(super) async fn publish_status(
        &self,
        client: &InstallationClient,
        run: &mut RunRow,
        data: &mut RunData,
    ) -> Result<(), EngineError> {
        let repo = Self::repo_name(run)?;
        if run.state != state::STOPPED
            && let Some(stored) = runs::get(self.store.pool(), &run.id).await?
            && stored.state == state::STOPPED
        {
            return Err(EngineError::Stopped);
        }
        let body = comment::status_comment(&self.status_view(run, data).await?);
        if data.last_status.as_deref() == Some(body.as_str()) && run.status_comment_id.is_some() {
            return Ok(());
        }
        self.status_edits
            .wait(InstallationId(run.installation_id))
            .await;
        match run.status_comment_id {
            Some(id) => {
                client
                    .edit_comment(&repo, CommentId(id as u64), &body)
                    .await?;
            }
            None => {
                let number = IssueNumber(run.issue_number as u64);
                let id = match self
                    .find_status_comment(client, &repo, number, &run.id)
                    .await?
                {
                    Some(id) => {
                        client.edit_comment(&repo, id, &body).await?;
                        id
                    }
                    None => client.create_comment(&repo, number, &body).await?.id,
                };
                run.status_comment_id = Some(id.0 as i64);
            }
        }
        data.last_status = Some(body);
        self.save(run, data).await
    }

    /// Posts a one-off comment of a run (question, diagnosis, answer) at
    /// most once; see [`Self::post_once_marked`].
    pub(super) async fn post_once_for_run(
        &self,
        client: &InstallationClient,
        run: &RunRow,
        key: &str,
        body: &str,
    ) -> Result<(), EngineError> {
        let repo = Self::repo_name(run)?;
        let number = IssueNumber(run.issue_number as u64);
        self.post_once_marked(client, &repo, number, &format!("{}:{key}", run.id), body)
            .await
    }

    /// Posts a comment at most once, even across a crash or a `MaybeApplied`
    /// between posting it and recording that it was posted: the body carries
    /// a hidden `<!-- closer:once=<key> -->` marker, and a comment of ours
    /// already carrying it is not posted again when the step is retried.
    pub(super) async fn post_once_marked(
        &self,
        client: &InstallationClient,
        repo: &RepoName,
        number: IssueNumber,
        key: &str,
        body: &str,
    ) -> Result<(), EngineError> {
        let marker = format!("<!-- closer:once={key} -->");
        let app = self.app_info().await?;
        let posted = client
            .list_comments(repo, number)
            .await?
            .iter()
            .any(|c| super::triggers::is_ours(&app, c) && c.body.contains(&marker));
        if !posted {
            client
                .create_comment(repo, number, &format!("{body}\n{marker}"))
                .await?;
        }
        Ok(())
    }

    /// Our status comment of this run, by its marker.
    async fn find_status_comment(
        &self,
        client: &InstallationClient,
        repo: &RepoName,
        number: IssueNumber,
        run_id: &str,
    ) -> Result<Option<CommentId>, EngineError> {
        let app = self.app_info().await?;
        let comments = client.list_comments(repo, number).await?;
        Ok(comments
            .iter()
            .find(|c| {
                is_ours(&app, c) && comment::parse_run_marker(&c.body).as_deref() == Some(run_id)
            })
            .map(|c| c.id))
    }

    /// Creates the bot's labels the repository lacks (fixed colours).
    pub(super) async fn ensure_labels(
        &self,
        client: &InstallationClient,
        repo: &RepoName,
        trigger: &str,
    ) -> Result<(), EngineError> {
        let existing: Vec<String> = client
            .list_repo_labels(repo)
            .await?
            .into_iter()
            .map(|l| l.name.to_lowercase())
            .collect();
        let mut wanted: Vec<crate::github::Label> =
            comment::LABELS.iter().map(|l| l.to_label()).collect();
        wanted.push(comment::trigger_label_def(trigger));
        for label in wanted {
            if existing.contains(&label.name.to_lowercase()) {
                continue;
            }
            match client.create_label(repo, &label).await? {
                LabelCreated::Created(_) | LabelCreated::AlreadyExists => {}
            }
        }
        Ok(())
    }

    /// Moves the run to `phase`: the row first, then the one `phase:*` label.
    pub(super) async fn set_phase(
        &self,
        client: &InstallationClient,
        run: &mut RunRow,
        data: &mut RunData,
        phase: &str,
    ) -> Result<(), EngineError> {
        run.phase = phase.to_owned();
        self.save(run, data).await?;
        let label = format!("phase:{phase}");
        if data.phase_label.as_deref() == Some(label.as_str()) {
            return Ok(());
        }
        let repo = Self::repo_name(run)?;
        let number = IssueNumber(run.issue_number as u64);
        client.add_labels(&repo, number, &[&label]).await?;
        if let Some(old) = data.phase_label.replace(label) {
            client.remove_label(&repo, number, &old).await?;
        }
        self.save(run, data).await?;
        self.sync_board(client, run, data, phase).await
    }

    /// Sets the project board's Status to the phase, when the config names
    /// a board. A problem with the board or its fields is reported once in
    /// the status comment and not retried; a GitHub failure is.
    async fn sync_board(
        &self,
        client: &InstallationClient,
        run: &mut RunRow,
        data: &mut RunData,
        phase: &str,
    ) -> Result<(), EngineError> {
        let config = parse_config(data.config_text.as_deref(), &self.agent_names()).ok();
        let Some(board) = config.and_then(|c| c.project) else {
            return Ok(());
        };
        if data.board_problem.is_some() {
            return Ok(());
        }
        let repo = Self::repo_name(run)?;
        let number = IssueNumber(run.issue_number as u64);
        match sync_project_status(client, &board, &repo, number, phase).await {
            Ok(()) => Ok(()),
            Err(e) if e.is_config_problem() => {
                tracing::warn!(run = %run.id, error = %e, "project board not updated");
                data.board_problem = Some(format!(
                    "The project board {}/{} is not updated: {e}.",
                    board.owner, board.number
                ));
                self.save(run, data).await
            }
            Err(ProjectSyncError::GitHub(e)) => Err(e.into()),
            Err(e) => Err(EngineError::Other(e.to_string())),
        }
    }

    /// Puts on or takes off `awaiting-response`, if it changes.
    pub(super) async fn set_awaiting_label(
        &self,
        client: &InstallationClient,
        repo: &RepoName,
        run: &mut RunRow,
        data: &mut RunData,
        on: bool,
    ) -> Result<(), EngineError> {
        if data.awaiting_label == on {
            return Ok(());
        }
        let number = IssueNumber(run.issue_number as u64);
        if on {
            client
                .add_labels(repo, number, &[comment::labels::AWAITING_RESPONSE])
                .await?;
        } else {
            client
                .remove_label(repo, number, comment::labels::AWAITING_RESPONSE)
                .await?;
        }
        data.awaiting_label = on;
        self.save(run, data).await
    }

    /// Answers `/closer status` with a short comment, once per `key`.
    pub(super) async fn answer_status(
        &self,
        client: &InstallationClient,
        repo: &RepoName,
        number: IssueNumber,
        key: &str,
    ) -> Result<(), EngineError> {
        let run = runs::by_issue(self.store.pool(), &repo.to_string(), number.0 as i64).await?;
        let view = match &run {
            Some(run) => Some(
                self.status_view(run, &RunData::from_json(&run.data))
                    .await?,
            ),
            None => None,
        };
        let body = comment::status_answer(view.as_ref(), None);
        self.post_once_marked(client, repo, number, key, &body)
            .await
    }
}

fn fill_from_record(view: &mut StatusView, last: &IterationRecord) {
    let judgment = &last.judgment;
    if let Some(closer) = &judgment.closer {
        view.summary = Some(closer.output.summary.clone()).filter(|s| !s.is_empty());
        view.checklist = closer
            .output
            .checklist
            .iter()
            .map(|i| ChecklistRow {
                description: i.description.clone(),
                completed: i.completed,
                evidence: i.evidence.clone(),
            })
            .collect();
    }
    if !last.complete {
        view.pending_actions = judgment.pending_actions.clone();
        if let Some(v) = &last.verification {
            for reason in &v.decision.reasons {
                let action = format!("Fix: {reason}");
                if !view.pending_actions.contains(&action) && !v.complete() {
                    view.pending_actions.push(action);
                }
            }
        }
    }
    if let Some(v) = &last.verification {
        view.verification = Some(VerificationView {
            goals: v
                .goals
                .iter()
                .map(|g| GoalRow {
                    name: g.name(),
                    status: if g.passed {
                        GoalStatus::Passed
                    } else {
                        GoalStatus::Failed
                    },
                    required: g.required,
                    evidence: g.evidence.clone(),
                })
                .collect(),
            baseline: Some(BaselineRow {
                new_failures: v.new_failures.iter().map(|f| f.summary()).collect(),
                already_failing: v.failures.len().saturating_sub(v.new_failures.len()),
            }),
            scope: Some(if v.scope.out_of_scope.is_empty() {
                ScopeRow::Ok
            } else {
                ScopeRow::OutOfScope(v.scope.out_of_scope.clone())
            }),
        });
    }
    if view.state == RunState::AwaitingResponse {
        view.question = Some(QuestionView {
            score: judgment.question.score,
            threshold: crate::engine::question::THRESHOLD,
            signals: judgment
                .question
                .signals
                .iter()
                .map(|s| SignalRow {
                    kind: format!("{:?}", s.kind),
                    weight: s.weight,
                    excerpt: s.excerpt.clone(),
                })
                .collect(),
            stated_by_agent: !judgment.questions.is_empty() && judgment.question.signals.is_empty(),
        });
    }
}

fn run_state(s: &str) -> RunState {
    match s {
        state::RUNNING => RunState::Running,
        state::AWAITING_RESPONSE => RunState::AwaitingResponse,
        state::VERIFYING => RunState::Verifying,
        state::DONE => RunState::Done,
        state::FAILED => RunState::Failed,
        state::STOPPED => RunState::Stopped,
        _ => RunState::Queued,
    }
}

fn phase(s: &str) -> Phase {
    match s {
        "processing" => Phase::Processing,
        "review" => Phase::Review,
        "complete" => Phase::Complete,
        _ => Phase::Preparation,
    }
}
