//! The end of a verified run: push the branch, open (or update) the pull
//! request that `Closes #n`, `phase:review`, then close the issue as
//! completed with `phase:complete` — or, with `close_on: merged`, wait for
//! the merge. A `read_info`/`report` run posts its answer instead and closes.
//!
//! The pull request is found again by its head branch, so a repeated step
//! never opens a second one.

use super::data::{IterationRecord, RunData};
use super::triggers::parse_config;
use super::{Engine, EngineError, state};
use crate::comment::{self, CommitRow, FileRow, PullRequestView, VerificationView};
use crate::config::repo::CloseOn;
use crate::engine::task_type::TaskType;
use crate::github::types::IssueNumber;
use crate::github::{InstallationClient, NewPullRequest, PullEdit, PullState};
use crate::store::runs::RunRow;

fn other(e: impl std::fmt::Display) -> EngineError {
    EngineError::Other(e.to_string())
}

impl Engine {
    pub(super) async fn finish(
        &self,
        mut run: RunRow,
        mut data: RunData,
    ) -> Result<(), EngineError> {
        if data.awaiting_merge {
            return Ok(());
        }
        let client = self.client(run.installation_id).await?;
        let config =
            parse_config(data.config_text.as_deref(), &self.agent_names()).unwrap_or_default();
        let task = run
            .task_type
            .as_deref()
            .and_then(TaskType::parse)
            .unwrap_or(TaskType::Feature);
        let last = self.last_record(&run.id).await?;
        if !task.changes_code() {
            if !data.deliverable_posted {
                let answer = last
                    .as_ref()
                    .map(|r| r.summary.output_text.clone())
                    .unwrap_or_default();
                let footer = crate::comment::DeliverableFooter {
                    iterations: run.iteration as u32,
                    usage: self.status_view(&run, &data).await?.usage,
                    dashboard_url: None,
                    closing: true,
                };
                let body = crate::comment::deliverable_comment(&answer, &footer);
                self.post_once_for_run(&client, &run, "answer", &body)
                    .await?;
                data.deliverable_posted = true;
                self.save(&mut run, &data).await?;
            }
            return self.complete(&client, run).await;
        }
        let source = self.source(&client, &run).await?;
        let worktree = match data.worktree.clone() {
            Some(w) if w.path.exists() => w,
            _ => self
                .sandbox
                .prepare(&source, run.issue_number as u64, &run.id)
                .await
                .map_err(other)?,
        };
        self.sandbox.push(&worktree, &source).await.map_err(other)?;
        let number = self
            .open_pull_request(&client, &run, &data, task, last.as_ref())
            .await?;
        run.pull_request = Some(number as i64);
        self.save(&mut run, &data).await?;
        self.set_phase(&client, &mut run, &mut data, "review")
            .await?;
        if config.close_on == CloseOn::Merged {
            data.awaiting_merge = true;
            self.save(&mut run, &data).await?;
            return self.publish_status(&client, &mut run, &mut data).await;
        }
        self.complete(&client, run).await
    }

    /// Closes the issue as completed: `phase:complete`, state `done`.
    pub(super) async fn complete(
        &self,
        client: &InstallationClient,
        mut run: RunRow,
    ) -> Result<(), EngineError> {
        let mut data = RunData::from_json(&run.data);
        let repo = Self::repo_name(&run)?;
        let number = IssueNumber(run.issue_number as u64);
        client
            .close_issue(&repo, number, crate::github::StateReason::Completed)
            .await?;
        self.set_phase(client, &mut run, &mut data, "complete")
            .await?;
        run.state = state::DONE.to_owned();
        run.outcome = Some("completed".to_owned());
        data.awaiting_merge = false;
        self.save(&mut run, &data).await?;
        self.publish_status(client, &mut run, &mut data).await?;
        if let Some(w) = data.worktree.as_ref()
            && let Err(e) = self.sandbox.remove(w, &run.id).await
        {
            tracing::warn!(run = %run.id, error = %e, "worktree not removed");
        }
        Ok(())
    }

    /// Opens the pull request for the run's branch, or updates the open one.
    async fn open_pull_request(
        &self,
        client: &InstallationClient,
        run: &RunRow,
        data: &RunData,
        task: TaskType,
        last: Option<&IterationRecord>,
    ) -> Result<u64, EngineError> {
        let repo = Self::repo_name(run)?;
        let number = IssueNumber(run.issue_number as u64);
        let status = self.status_view(run, data).await?;
        let verification = last.and_then(|r| r.verification.as_ref());
        let view = PullRequestView {
            issue: number,
            issue_title: data.issue_title.clone(),
            task_type: task,
            summary: last
                .and_then(|r| r.judgment.closer.as_ref())
                .map(|c| c.output.summary.clone())
                .unwrap_or_default(),
            commits: verification
                .map(|v| {
                    v.artifacts
                        .commits
                        .iter()
                        .map(|c| CommitRow {
                            sha: c.sha.clone(),
                            subject: c.message.clone(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            files: verification
                .map(|v| {
                    v.artifacts
                        .all_files()
                        .map(|f| FileRow {
                            path: f.path.clone(),
                            added: f.added,
                            deleted: f.deleted,
                        })
                        .collect()
                })
                .unwrap_or_default(),
            verification: status
                .verification
                .unwrap_or_else(VerificationView::default),
            iterations: run.iteration.max(0) as u32,
            usage: status.usage,
            dashboard_url: status.dashboard_url,
        };
        let title = comment::pull_request_title(number, &data.issue_title, task);
        let body = comment::pull_request_body(&view);
        if let Some(existing) = client.find_pull_by_head(&repo, &run.branch).await?
            && existing.state == PullState::Open
        {
            let edit = PullEdit {
                title: Some(title),
                body: Some(body),
                state: None,
            };
            client.update_pull(&repo, existing.number, &edit).await?;
            return Ok(existing.number.0);
        }
        let base = match &run.default_branch {
            Some(b) => b.clone(),
            None => client.get_repository(&repo).await?.default_branch,
        };
        let pull = NewPullRequest {
            title,
            body,
            head: run.branch.clone(),
            base,
        };
        Ok(client.create_pull(&repo, &pull).await?.number.0)
    }
}
