//! The issue edited while its run is open. A run works from the issue as it
//! was when it started; an edit by a user with `commands.min_permission` (a
//! maintainer refining what is asked, adding a `- [ ]` acceptance
//! criterion) is taken by the run's own [`super::Step::TakeEdit`], so the next
//! prompt shows it and the next judgment holds the run to it.
//!
//! The edit travels in the job as the delivery shows it, not as GitHub
//! shows it when the step runs: someone without the permission (the
//! issue's author, whose text is not trusted) may have edited it since.
//! Such an edit is not taken; they can comment instead (the author may
//! answer closer's question). An edit older than the text the run has (a
//! replay, or deliveries out of order) is not taken either: GitHub's
//! `updated_at` moves with every change and a replay carries the old one.
//! `updated_at` is written to the second, so two edits within one second
//! that arrive out of order leave the older text.

use serde::{Deserialize, Serialize};

use super::triggers::Thread;
use super::{Engine, EngineError, RunData};
use crate::events::Actor;
use crate::model::RunId;
use crate::store::runs;

/// An issue's title and body as an edit left them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssueEdit {
    pub title: String,
    pub body: String,
    /// The issue's `updated_at` in the edit's delivery.
    pub updated_at: String,
    /// Who edited it.
    pub editor: String,
}

impl Engine {
    /// `issues.edited` (bots and closer itself never get here).
    pub(super) async fn on_edited(
        &self,
        thread: &Thread<'_>,
        sender: &Actor,
    ) -> Result<String, EngineError> {
        let (repo, issue) = (&thread.repo.name, thread.issue);
        let run = runs::by_issue(self.runs.store().pool(), repo, issue.number).await?;
        let Some(run) = run.filter(|run| !run.state.is_final()) else {
            return Ok("issue edited: no active run".to_owned());
        };
        let data = RunData::of(&run)?;
        if data.issue_title == issue.title && data.issue_body == issue.body {
            return Ok("issue edited: the run has this title and body".to_owned());
        }
        let Some(at) = &issue.updated_at else {
            return Ok("issue edited: no updated_at; ignored".to_owned());
        };
        let client = self.github.client(thread.installation).await?;
        let minimum = self
            .read_config(&client, thread.repo)
            .await?
            .min_permission();
        if !self
            .permitted(&client, repo, &sender.login, minimum)
            .await?
        {
            return Ok(format!(
                "issue edited by {}: not authorised; the run keeps the text it has",
                sender.login
            ));
        }
        let edit = IssueEdit {
            title: issue.title.clone(),
            body: issue.body.clone(),
            updated_at: at.clone(),
            editor: sender.login.clone(),
        };
        self.runs.enqueue_edit(&run.id, edit).await?;
        Ok(format!(
            "issue edited by {}: the run takes the new text",
            sender.login
        ))
    }

    /// [`super::Step::TakeEdit`]: the run's title and body become the edit's,
    /// unless the run has ended or has a text from a later second already.
    pub(super) async fn take_edit(
        &self,
        run_id: &RunId,
        edit: &IssueEdit,
    ) -> Result<(), EngineError> {
        let Some(mut ctx) = self.context(run_id).await? else {
            return Ok(());
        };
        if ctx.run.state.is_final() || !newer(edit, ctx.data.issue_updated_at.as_deref()) {
            return Ok(());
        }
        ctx.data.issue_title = edit.title.clone();
        ctx.data.issue_body = edit.body.clone();
        ctx.data.issue_updated_at = Some(edit.updated_at.clone());
        ctx.data.issue_edited_by = Some(edit.editor.clone());
        tracing::info!(run = %run_id, editor = %edit.editor, "the run takes the edited issue");
        self.runs.save(&mut ctx).await
    }
}

/// Whether `edit` is not older than the text the run has (taken at
/// `have`). GitHub writes `updated_at` as `YYYY-MM-DDTHH:MM:SSZ`, which
/// sorts as text, and only to the second: an edit in the same second as the
/// run's text is taken (a replay of the edit the run has changes nothing).
/// A run without one (started before closer kept it) takes any edit.
fn newer(edit: &IssueEdit, have: Option<&str>) -> bool {
    have.is_none_or(|have| edit.updated_at.as_str() >= have)
}

#[cfg(test)]
mod tests {
    use super::super::{RunJob, Step};
    use super::*;

    fn edit_at(at: &str) -> IssueEdit {
        IssueEdit {
            title: "t".into(),
            body: "b".into(),
            updated_at: at.into(),
            editor: "maria".into(),
        }
    }

    #[test]
    fn only_an_edit_newer_than_the_runs_text_is_taken() {
        let have = Some("2026-11-27T10:00:00Z");
        assert!(newer(&edit_at("2026-11-27T10:00:01Z"), have));
        assert!(
            newer(&edit_at("2026-11-27T10:00:00Z"), have),
            "the same second"
        );
        assert!(
            !newer(&edit_at("2026-11-27T09:59:59Z"), have),
            "out of order"
        );
        assert!(newer(&edit_at("2026-11-27T09:59:59Z"), None));
    }

    #[test]
    fn a_take_edit_job_round_trips_and_old_jobs_read_without_an_edit() {
        let job = RunJob {
            run_id: RunId::from_stored("r1"),
            step: Step::TakeEdit,
            edit: Some(edit_at("2026-11-27T10:00:01Z")),
        };
        let text = serde_json::to_string(&job).unwrap();
        let back: RunJob = serde_json::from_str(&text).unwrap();
        assert_eq!(back.edit, job.edit);
        let old: RunJob = serde_json::from_str(r#"{"run_id":"r1","step":"iterate"}"#).unwrap();
        assert_eq!((old.step, old.edit), (Step::Iterate, None));
    }
}
