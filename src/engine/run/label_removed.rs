//! The trigger label taken off an issue whose run it started: the run stops
//! at once, as the docs promise (reconciliation would notice within ten
//! minutes, the agent working on meanwhile).
//!
//! Only a user with `commands.min_permission` may stop a run so: taken off
//! by anyone else (a triage user tidying labels), the label is put back with
//! one short refusal, and the label goes on showing what permitted users
//! asked for. A delivery says what happened, not what is so now: GitHub is
//! asked first, so a replayed `unlabeled` neither stops a run whose label is
//! back nor puts back a label a maintainer took off since. Removals by bots
//! and by closer itself never get here (`triggers.rs`).

use super::RunData;
use super::triggers::{LabelChange, Thread};
use super::{Engine, EngineError};
use crate::comment::same_label;
use crate::events::Actor;
use crate::store::runs;

impl Engine {
    /// `issues.unlabeled`: `label` is the label taken off.
    pub(super) async fn on_unlabeled(
        &self,
        thread: &Thread<'_>,
        label: Option<&str>,
        sender: &Actor,
    ) -> Result<String, EngineError> {
        let (repo, number) = (&thread.repo.name, thread.issue.number);
        let run = runs::by_issue(self.runs.store().pool(), repo, number).await?;
        let Some(run) = run.filter(|run| !run.state.is_final()) else {
            return Ok("label removed: no active run".to_owned());
        };
        if !RunData::of(&run)?.by_label {
            return Ok("label removed: the run was not started by the label".to_owned());
        }
        let Some(ctx) = self.context(&run.id).await? else {
            return Ok("label removed: no run".to_owned());
        };
        // The label that started the run, as reconciliation reads it.
        let trigger = ctx.config.trigger_label.clone();
        if !label.is_some_and(|l| same_label(l, &trigger)) {
            return Ok("label removed: not the trigger label".to_owned());
        }
        let client = &ctx.client;
        let now = client.get_issue(repo, number).await?;
        if now.labels.iter().any(|l| same_label(l, &trigger)) {
            return Ok("trigger label removed, but back on GitHub now: run goes on".to_owned());
        }
        let config = self.read_config(client, thread.repo).await?;
        let minimum = self.commands_minimum(&config, repo, number).await?;
        if !self.permitted(client, repo, &sender.login, minimum).await? {
            return self
                .undo_label_change(
                    client,
                    thread,
                    sender,
                    LabelChange::Removed(&trigger),
                    minimum,
                )
                .await;
        }
        self.stop(&ctx.run, "the trigger label was removed").await?;
        Ok("trigger label removed: run stopped".to_owned())
    }
}
