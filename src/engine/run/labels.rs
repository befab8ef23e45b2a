//! The labels a run keeps on its issue — exactly one `phase:*`,
//! `awaiting-response` while it waits, `closer:failed` when it failed —
//! each touched only when it changes (the run data remembers what is on),
//! and the project board's Status that follows the phase.

use super::EngineError;
use super::context::RunContext;
use super::status::StatusPublisher;
use crate::comment::labels::same_label;
use crate::comment::{self, labels};
use crate::github::{
    Board, InstallationClient, IssueState, LabelCreated, ProjectSyncError, clear_project_status,
    sync_project_status,
};
use crate::model::{Named, Phase, RepoName};

impl StatusPublisher {
    /// Creates the bot's labels the repository lacks (fixed colours).
    pub async fn ensure_labels(
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

    /// Moves the run to `phase`: the row first, then the one `phase:*`
    /// label, then the board. Every other `phase:*` label the issue carries
    /// is taken off, not only the one this run remembers, so the issue shows
    /// exactly one phase even after two steps raced or a write half-failed.
    pub async fn set_phase(&self, ctx: &mut RunContext, phase: Phase) -> Result<(), EngineError> {
        ctx.run.phase = phase;
        self.runs().save(ctx).await?;
        if ctx.data.phase_label == Some(phase) {
            return Ok(());
        }
        let (repo, number) = (ctx.repo().clone(), ctx.issue());
        let label = phase.issue_label();
        ctx.client.add_labels(&repo, number, &[&label]).await?;
        let on_issue = ctx.client.get_issue(&repo, number).await?.labels;
        // As the issue spells them: GitHub names labels without regard to
        // case, so a repository's `Phase:Review` is the label added for
        // `phase:review` (decision 241).
        let others = on_issue
            .iter()
            .filter(|l| is_phase_label(l) && !same_label(l, &label));
        for other in others {
            ctx.client.remove_label(&repo, number, other).await?;
        }
        ctx.data.phase_label = Some(phase);
        self.runs().save(ctx).await?;
        self.sync_board(ctx, Some(phase)).await
    }

    /// Takes every `phase:*` label off the issue, and empties its status on
    /// the project board (a run whose pull request was closed unmerged:
    /// `closer:failed` says where it stands).
    pub async fn clear_phase(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        self.take_phase_labels_off(ctx).await?;
        self.sync_board(ctx, None).await
    }

    /// A stopped run is in no phase (decision 248): its `phase:*` labels
    /// come off, and its board status is emptied while the issue is open
    /// (`/closer stop`). A person closed the issue otherwise, and the
    /// board's own workflow for closed items has the last word there.
    pub async fn clear_phase_of_stopped(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        match self.take_phase_labels_off(ctx).await? {
            IssueState::Open => self.sync_board(ctx, None).await,
            IssueState::Closed => Ok(()),
        }
    }

    /// Takes every `phase:*` label off the issue; the issue's state.
    async fn take_phase_labels_off(&self, ctx: &mut RunContext) -> Result<IssueState, EngineError> {
        let (repo, number) = (ctx.repo().clone(), ctx.issue());
        let issue = ctx.client.get_issue(&repo, number).await?;
        for label in issue.labels.iter().filter(|l| is_phase_label(l)) {
            ctx.client.remove_label(&repo, number, label).await?;
        }
        ctx.data.phase_label = None;
        self.runs().save(ctx).await?;
        Ok(issue.state)
    }

    /// Sets the project board's Status to the phase (empties it for
    /// `None`), when the config names a board. A problem with the board or
    /// its fields is reported once in the status comment and not retried;
    /// a GitHub failure is.
    async fn sync_board(
        &self,
        ctx: &mut RunContext,
        phase: Option<Phase>,
    ) -> Result<(), EngineError> {
        let Some(project) = &ctx.config.project else {
            return Ok(());
        };
        if ctx.data.board_problem.is_some() {
            return Ok(());
        }
        let board = Board {
            owner: project.owner.clone(),
            number: project.number,
            status_field: project.status_field.clone(),
        };
        let (client, repo, issue) = (&ctx.client, ctx.repo(), ctx.issue());
        let synced = match phase {
            Some(phase) => sync_project_status(client, &board, repo, issue, phase.as_str()).await,
            None => clear_project_status(client, &board, repo, issue).await,
        };
        match synced {
            Ok(()) => Ok(()),
            Err(e) if e.is_config_problem() => {
                tracing::warn!(run = %ctx.run.id, error = %e, "project board not updated");
                ctx.data.board_problem = Some(format!(
                    "The project board {}/{} is not updated: {e}.",
                    board.owner, board.number
                ));
                self.runs().save(ctx).await
            }
            // Emptying the board's status is the failed run's last word on
            // the board, before its diagnosis: only what may pass is
            // tried again, so nothing else holds the diagnosis up.
            Err(ProjectSyncError::GitHub(e)) if phase.is_none() && !e.is_transient() => {
                tracing::warn!(run = %ctx.run.id, error = %e, "project board status not emptied");
                Ok(())
            }
            Err(ProjectSyncError::GitHub(e)) => Err(e.into()),
            Err(e) => Err(EngineError::Other(e.to_string())),
        }
    }

    /// Puts on or takes off `awaiting-response`, if it changes.
    pub async fn set_awaiting_label(
        &self,
        ctx: &mut RunContext,
        on: bool,
    ) -> Result<(), EngineError> {
        if ctx.data.awaiting_label == on {
            return Ok(());
        }
        let (repo, number) = (ctx.repo().clone(), ctx.issue());
        match on {
            true => {
                ctx.client
                    .add_labels(&repo, number, &[labels::AWAITING_RESPONSE])
                    .await?
            }
            false => {
                ctx.client
                    .remove_label(&repo, number, labels::AWAITING_RESPONSE)
                    .await?
            }
        }
        ctx.data.awaiting_label = on;
        self.runs().save(ctx).await
    }

    /// Puts on or takes off `closer:failed`, if it changes.
    pub async fn set_failed_label(
        &self,
        ctx: &mut RunContext,
        on: bool,
    ) -> Result<(), EngineError> {
        if ctx.data.failed_label == on {
            return Ok(());
        }
        let (repo, number) = (ctx.repo().clone(), ctx.issue());
        match on {
            true => {
                ctx.client
                    .add_labels(&repo, number, &[labels::FAILED])
                    .await?
            }
            false => {
                ctx.client
                    .remove_label(&repo, number, labels::FAILED)
                    .await?
            }
        }
        ctx.data.failed_label = on;
        self.runs().save(ctx).await
    }
}

/// Whether `label` is one of the `phase:*` labels, in any case.
fn is_phase_label(label: &str) -> bool {
    Phase::ALL
        .iter()
        .any(|p| same_label(label, &p.issue_label()))
}
