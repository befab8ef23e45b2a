//! The issue edited while its run is open. A run works from the issue as it
//! was when it started; an edit by a user with `commands.min_permission` (a
//! maintainer refining what is asked, adding a `- [ ]` acceptance
//! criterion) is taken by the run's own [`super::Step::TakeEdit`], so the
//! next prompt shows it and the next judgment holds the run to it. A run
//! judged complete whose `finish` has not run yet goes back to work on a
//! new body (its iteration limit raised to allow at least one more
//! iteration, its convergence started afresh) rather than closing the
//! issue on the old one, unless its budget is spent or a half-failed
//! `finish` had posted its answer.
//!
//! Only what the edit changed is taken, and only when the edit was made on
//! the text the run has (`changes.<field>.from`): a maintainer's edit of the
//! title, or a tick in a task list, does not carry in the body an author
//! edited before it (an edit by someone without the permission is never
//! taken; they can comment instead, and the author may answer closer's
//! question). The edit travels in the job as the delivery shows it, not as
//! GitHub shows it when the step runs, which may be a later edit by someone
//! else. An edit older than the run's text (a replay, or deliveries out of
//! order) changes nothing: GitHub's `updated_at` moves with every change and
//! a replay carries the old one. It is written to the second, so two edits
//! within one second that arrive out of order leave the older text.

use serde::{Deserialize, Serialize};

use super::triggers::Thread;
use super::{Engine, EngineError, RunData, Step};
use crate::events::{Actor, IssueChanges};
use crate::model::{RunId, RunState, Stage};
use crate::store::runs;

/// An edit of an issue's title or body: each changed field's text before
/// and after (`None`: the edit did not change it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IssueEdit {
    pub title: Option<FieldEdit>,
    pub body: Option<FieldEdit>,
    /// The issue's `updated_at` in the edit's delivery.
    pub updated_at: String,
    /// Who edited it.
    pub editor: String,
}

/// One field's text before and after an edit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FieldEdit {
    pub from: String,
    pub to: String,
}

impl Engine {
    /// `issues.edited` (bots and closer itself never get here).
    pub(super) async fn on_edited(
        &self,
        thread: &Thread<'_>,
        changes: &IssueChanges,
        sender: &Actor,
    ) -> Result<String, EngineError> {
        let (repo, issue) = (&thread.repo.name, thread.issue);
        let run = runs::by_issue(self.runs.store().pool(), repo, issue.number).await?;
        let Some(run) = run.filter(|run| !run.state.is_final()) else {
            return Ok("issue edited: no active run".to_owned());
        };
        let field = |from: &Option<String>, to: &str| {
            from.as_ref().map(|from| FieldEdit {
                from: from.clone(),
                to: to.to_owned(),
            })
        };
        let (title, body) = (
            field(&changes.title_from, &issue.title),
            field(&changes.body_from, &issue.body),
        );
        if title.is_none() && body.is_none() {
            return Ok("issue edited: neither title nor body changed".to_owned());
        }
        let Some(at) = &issue.updated_at else {
            return Ok("issue edited: no updated_at; ignored".to_owned());
        };
        let client = self.github.client(thread.installation).await?;
        let config = self.read_config(&client, thread.repo).await?;
        let minimum = self.commands_minimum(&config, repo, issue.number).await?;
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
            title,
            body,
            updated_at: at.clone(),
            editor: sender.login.clone(),
        };
        self.runs.enqueue_edit(&run.id, edit).await?;
        Ok(format!(
            "issue edited by {}: queued for the run",
            sender.login
        ))
    }

    /// [`Step::TakeEdit`]: the run takes what the edit changed, unless the
    /// run has ended or has a text from a later second; a run judged
    /// complete and not finished yet goes back to work on a new body.
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
        let taken = apply(&mut ctx.data, edit);
        if !taken.title && !taken.body {
            tracing::info!(run = %run_id, editor = %edit.editor,
                "an edit made on a text the run does not have is not taken");
            return Ok(());
        }
        tracing::info!(run = %run_id, editor = %edit.editor, "the run takes the edited issue");
        if !(taken.body && self.may_go_back_to_work(&ctx)) {
            return self.runs.save(&mut ctx).await;
        }
        // Judged complete on the old text: the queued `finish` finds the
        // run at work and does nothing. The maintainer changed the task,
        // so the run starts its convergence afresh, as a retry does.
        ctx.run.state = RunState::Running;
        ctx.run.max_iterations = ctx.run.max_iterations.max(ctx.run.iteration + 1);
        ctx.run.stage = Stage::Normal;
        let convergence = std::mem::take(&mut ctx.data.convergence);
        ctx.data.convergence = convergence.restarted(ctx.run.iteration, "the issue was edited");
        self.runs.save(&mut ctx).await?;
        self.runs.enqueue(run_id, Step::Iterate).await?;
        // The next iteration's status edit says it too.
        if let Err(e) = self.status.publish(&mut ctx).await {
            tracing::warn!(run = %run_id, error = %e, "the status after an edit was not written");
        }
        Ok(())
    }

    /// Whether a run judged complete on the old text goes back to work:
    /// its `finish` has not run yet, has posted no answer (a `read_info` or
    /// `report` run's), and the budget allows another iteration (else the
    /// edit would fail a verified run).
    fn may_go_back_to_work(&self, ctx: &super::RunContext) -> bool {
        ctx.run.state == RunState::Verifying
            && !ctx.data.awaiting_merge
            && !ctx.data.deliverable_posted
            && self.budget.exhausted(ctx).is_none()
    }
}

/// The fields an edit gave the run.
#[derive(Debug, Default, PartialEq, Eq)]
struct Taken {
    title: bool,
    body: bool,
}

/// Writes into the run each field the edit changed from the text the run
/// has; which it wrote.
fn apply(data: &mut RunData, edit: &IssueEdit) -> Taken {
    let take = |field: &Option<FieldEdit>, have: &mut String| {
        let f = field.as_ref().filter(|f| f.from == *have && f.to != *have);
        f.map(|f| have.clone_from(&f.to)).is_some()
    };
    let taken = Taken {
        title: take(&edit.title, &mut data.issue_title),
        body: take(&edit.body, &mut data.issue_body),
    };
    if taken.title || taken.body {
        data.issue_updated_at = Some(edit.updated_at.clone());
        data.issue_edited_by = Some(edit.editor.clone());
    }
    taken
}

/// Whether `edit` is not older than the text the run has (taken at
/// `have`). GitHub writes `updated_at` as `YYYY-MM-DDTHH:MM:SSZ`, which
/// sorts as text, and only to the second: an edit in the same second as the
/// run's text is taken. A run without one (started before closer kept it)
/// takes any edit.
fn newer(edit: &IssueEdit, have: Option<&str>) -> bool {
    have.is_none_or(|have| edit.updated_at.as_str() >= have)
}

#[cfg(test)]
mod tests {
    use super::super::{RunJob, Step};
    use super::*;

    fn edit_at(at: &str) -> IssueEdit {
        IssueEdit {
            title: None,
            body: Some(FieldEdit {
                from: "a".into(),
                to: "b".into(),
            }),
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
    fn only_what_changed_from_the_runs_own_text_is_taken() {
        let mut data = RunData {
            issue_title: "t".into(),
            issue_body: "a".into(),
            ..RunData::default()
        };
        // A body edited by someone else before: the maintainer's edit was
        // made on "x", not on the run's "a".
        let mut other = edit_at("2026-11-27T10:00:00Z");
        other.body = Some(FieldEdit {
            from: "x".into(),
            to: "y".into(),
        });
        other.title = Some(FieldEdit {
            from: "t".into(),
            to: "T".into(),
        });
        assert_eq!(
            apply(&mut data, &other),
            Taken {
                title: true,
                body: false
            }
        );
        assert_eq!(
            (data.issue_title.as_str(), data.issue_body.as_str()),
            ("T", "a")
        );
        assert_eq!(data.issue_edited_by.as_deref(), Some("maria"));

        assert_eq!(
            apply(&mut data, &edit_at("2026-11-27T10:00:01Z")),
            Taken {
                title: false,
                body: true
            }
        );
        assert_eq!(data.issue_body, "b");
        assert_eq!(
            apply(&mut data, &edit_at("2026-11-27T10:00:02Z")),
            Taken::default(),
            "from a, have b"
        );
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
