//! Asking the author and resuming on the reply: what an iteration whose agent
//! asked something does (label `awaiting-response`, one question comment, the
//! status), written so that a step which failed half-way resumes where it
//! stopped when its job is retried; and the `resume` step a reply queues
//! (`triggers.rs` stores the reply).

use super::data::{IterationRecord, RunData};
use super::{Engine, EngineError, Step, state};
use crate::github::InstallationClient;
use crate::store::runs::{self, RunRow};

impl Engine {
    /// Asks the author the agent's questions (the run is already
    /// `awaiting_response`): label, one question comment, status. A step
    /// that failed before the question was recorded (GitHub answered 5xx)
    /// resumes here when its job is retried; a status edit that failed after
    /// it is redone by the run's next step.
    pub(super) async fn ask(
        &self,
        client: &InstallationClient,
        mut run: RunRow,
        mut data: RunData,
        questions: &[String],
    ) -> Result<(), EngineError> {
        let n = run.iteration;
        let repo = Self::repo_name(&run)?;
        self.set_awaiting_label(client, &repo, &mut run, &mut data, true)
            .await?;
        if data.question_posted != Some(n) {
            let body = crate::comment::question_comment(&data.issue_author, questions);
            self.post_once_for_run(client, &run, &format!("question:{n}"), &body)
                .await?;
            data.question_posted = Some(n);
            self.save(&mut run, &data).await?;
        }
        self.publish_status(client, &mut run, &mut data).await
    }

    /// An `awaiting_response` run whose question was not posted yet (its step
    /// failed after the state was saved): ask it now, from the iteration's
    /// stored judgment.
    pub(super) async fn resume_question(
        &self,
        run: RunRow,
        data: RunData,
    ) -> Result<(), EngineError> {
        let last = runs::iterations(self.store.pool(), &run.id)
            .await?
            .into_iter()
            .rfind(|i| i.number == run.iteration);
        let record = last
            .and_then(|i| i.judgment)
            .and_then(|j| serde_json::from_str::<IterationRecord>(&j).ok());
        let Some(record) = record else {
            return Err(EngineError::Other(format!(
                "run {} awaits a response but iteration {} has no stored judgment",
                run.id, run.iteration
            )));
        };
        let client = self.client(run.installation_id).await?;
        self.ask(&client, run, data, &record.judgment.questions)
            .await
    }

    /// The `resume` step: a reply is stored for the run; it leaves
    /// `awaiting_response`, loses the label, and the next iteration is
    /// queued (its prompt carries the reply).
    pub(super) async fn resume(
        &self,
        mut run: RunRow,
        mut data: RunData,
    ) -> Result<(), EngineError> {
        if !self.reply_waiting(&run.id).await? {
            return Ok(());
        }
        run.state = state::RUNNING.to_owned();
        self.save(&mut run, &data).await?;
        self.enqueue(&run.id, Step::Iterate).await?;
        let client = self.client(run.installation_id).await?;
        let repo = Self::repo_name(&run)?;
        self.set_awaiting_label(&client, &repo, &mut run, &mut data, false)
            .await
    }

    /// Whether a reply is stored that no prompt has carried yet.
    pub(super) async fn reply_waiting(&self, run_id: &str) -> Result<bool, EngineError> {
        Ok(runs::messages(self.store.pool(), run_id)
            .await?
            .iter()
            .any(|m| m.used_in.is_none()))
    }
}
