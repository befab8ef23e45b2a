//! Reconciliation: webhooks can be missed and a process can die between
//! writing a run and queueing its next step, so on start and on a timer the
//! engine compares the runs with the queue and with GitHub:
//! an open run with no live job gets its next step queued again, and an open
//! run whose issue was closed (or whose trigger label, when the label started
//! it, was removed) is stopped. It never starts a run and never touches a
//! run that has ended.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::data::RunData;
use super::triggers::parse_config;
use super::{Engine, EngineError, Step, state};
use crate::github::types::IssueNumber;
use crate::github::{GitHubError, IssueState};
use crate::store::jobs;
use crate::store::runs::{self, RunRow};

/// What one reconciliation pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reconciled {
    /// Runs whose next step was queued again.
    pub requeued: Vec<String>,
    /// Runs stopped because GitHub says so.
    pub stopped: Vec<String>,
}

impl Engine {
    /// One pass over the open runs.
    pub async fn reconcile(&self) -> Result<Reconciled, EngineError> {
        let open = runs::in_states(
            self.store.pool(),
            &[
                state::QUEUED,
                state::RUNNING,
                state::AWAITING_RESPONSE,
                state::VERIFYING,
            ],
        )
        .await?;
        let mut done = Reconciled::default();
        for run in open {
            let id = run.id.clone();
            match self.reconcile_run(run).await {
                Ok(Some(Action::Requeued)) => done.requeued.push(id),
                Ok(Some(Action::Stopped)) => done.stopped.push(id),
                Ok(None) => {}
                Err(e) => tracing::warn!(run = %id, error = %e, "reconciliation of a run failed"),
            }
        }
        Ok(done)
    }

    async fn reconcile_run(&self, run: RunRow) -> Result<Option<Action>, EngineError> {
        let data = RunData::from_json(&run.data);
        if let Some(why) = self.gone_on_github(&run, &data).await? {
            self.stop(run, why).await?;
            return Ok(Some(Action::Stopped));
        }
        let step = match run.state.as_str() {
            state::QUEUED => Step::Start,
            state::RUNNING => Step::Iterate,
            state::VERIFYING if !data.awaiting_merge => Step::Finish,
            // Its question was never posted (the step's job gave up):
            // the Iterate step resumes it (`ask.rs`).
            state::AWAITING_RESPONSE if data.question_posted != Some(run.iteration) => {
                Step::Iterate
            }
            // A reply is stored but its `resume` step was lost.
            state::AWAITING_RESPONSE if self.reply_waiting(&run.id).await? => Step::Resume,
            _ => return Ok(None),
        };
        if jobs::has_live_job(self.store.pool(), &format!("run:{}", run.id)).await? {
            return Ok(None);
        }
        tracing::info!(run = %run.id, ?step, "reconciliation: the run had no queued step");
        self.enqueue(&run.id, step).await?;
        Ok(Some(Action::Requeued))
    }

    /// Why the run should stop according to GitHub, if it should.
    async fn gone_on_github(
        &self,
        run: &RunRow,
        data: &RunData,
    ) -> Result<Option<&'static str>, EngineError> {
        let client = self.client(run.installation_id).await?;
        let repo = Self::repo_name(run)?;
        let issue = match client
            .get_issue(&repo, IssueNumber(run.issue_number as u64))
            .await
        {
            Ok(issue) => issue,
            Err(GitHubError::NotFound) => return Ok(Some("the issue is gone")),
            Err(e) => return Err(e.into()),
        };
        if issue.state == IssueState::Closed && !data.awaiting_merge {
            return Ok(Some("the issue was closed"));
        }
        let trigger = parse_config(data.config_text.as_deref(), &self.agent_names())
            .map(|c| c.trigger_label)
            .unwrap_or_else(|_| "closer".to_owned());
        if data.by_label && !issue.labels.contains(&trigger) {
            return Ok(Some("the trigger label was removed"));
        }
        Ok(None)
    }

    /// Reconciles now and then every `every`, until `shutdown` turns true.
    pub async fn reconcile_forever(
        self: Arc<Self>,
        every: Duration,
        mut shutdown: watch::Receiver<bool>,
    ) {
        loop {
            match self.reconcile().await {
                Ok(r) if r.requeued.is_empty() && r.stopped.is_empty() => {}
                Ok(r) => tracing::info!(
                    requeued = r.requeued.len(),
                    stopped = r.stopped.len(),
                    "reconciled runs"
                ),
                Err(e) => tracing::warn!(error = %e, "reconciliation failed"),
            }
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = shutdown.changed() => return,
            }
        }
    }
}

enum Action {
    Requeued,
    Stopped,
}
