//! The engine's access to its runs in the store: reading and writing a run
//! (never over a stop), its iterations and replies, and queueing its steps.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use super::context::RunContext;
use super::data::IterationRecord;
use super::data::RunData;
use super::{EngineError, IssueEdit, RunJob, Step};
use crate::clock::Millis;
use crate::model::{IterationEnd, JobKind, Outcome, Run, RunId, RunState, run_job_key};
use crate::store::Store;
use crate::store::jobs::{self, NewJob};
use crate::store::messages::{self, MessageRow};
use crate::store::runs;
use crate::worker::JobError;

/// Runs in the store, and the queue of their steps.
#[derive(Clone)]
pub struct Runs {
    store: Store,
    /// Wakes the workers when a step is queued.
    ready: Arc<Notify>,
    max_attempts: i64,
    recheck_after: Duration,
}

impl Runs {
    pub fn new(
        store: Store,
        ready: Arc<Notify>,
        max_attempts: i64,
        recheck_after: Duration,
    ) -> Runs {
        Runs {
            store,
            ready,
            max_attempts: max_attempts.max(1),
            recheck_after,
        }
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// What the queue makes of a failed engine action.
    pub fn job_error(&self, e: EngineError) -> JobError {
        e.into_job_error(self.store.now_ms(), self.recheck_after)
    }

    pub async fn load(&self, id: &RunId) -> Result<Option<Run>, EngineError> {
        Ok(runs::get(self.store.pool(), id).await?)
    }

    /// The run a step works on: `None` for one that is gone, was set
    /// aside (its repository's name passed to another repository), or was
    /// stopped because closer lost its access to the repository
    /// ([`crate::model::Withdrawal`]). Their steps still queued do nothing,
    /// not even write the status.
    pub async fn load_active(&self, id: &RunId) -> Result<Option<Run>, EngineError> {
        let active = |run: &Run| !run.is_set_aside() && run.withdrawn().is_none();
        Ok(self.load(id).await?.filter(active))
    }

    /// Writes the run with its data and stamps `updated_at`; refused (as
    /// [`EngineError::Stopped`]) once the stored run was stopped. An
    /// iteration judged since the last save ([`RunContext::judged`]) is
    /// finished in the same transaction.
    pub async fn save(&self, ctx: &mut RunContext) -> Result<(), EngineError> {
        ctx.run.data = ctx.data.to_json();
        ctx.run.updated_at = self.store.now_ms();
        let pool = self.store.pool();
        let saved = match ctx.judged.take() {
            Some(finish) => runs::save_judged(pool, &ctx.run, &finish).await?,
            None => runs::save_unless_stopped(pool, &ctx.run).await?,
        };
        match saved {
            true => Ok(()),
            false => Err(EngineError::Stopped),
        }
    }

    /// Writes the run whatever its stored state (a restart of a stopped run)
    /// as its next generation: what a step of its earlier life still saves
    /// is refused from now on.
    pub async fn save_restart(&self, run: &mut Run) -> Result<(), EngineError> {
        run.updated_at = self.store.now_ms();
        run.generation = run.generation.saturating_add(1);
        runs::save(self.store.pool(), run).await?;
        Ok(())
    }

    /// Queues a step of a run.
    pub async fn enqueue(&self, run_id: &RunId, step: Step) -> Result<(), EngineError> {
        let now = self.store.now_ms();
        let job = self.step_job(run_id, step, now)?;
        jobs::enqueue(self.store.pool(), &job, now).await?;
        self.ready.notify_one();
        Ok(())
    }

    /// Queues a step of a run for the re-check delay later (30 s in
    /// `closer serve`).
    pub async fn enqueue_after_recheck(
        &self,
        run_id: &RunId,
        step: Step,
    ) -> Result<(), EngineError> {
        let now = self.store.now_ms();
        let job = self.step_job(run_id, step, self.after_recheck(now))?;
        jobs::enqueue(self.store.pool(), &job, now).await?;
        self.ready.notify_one();
        Ok(())
    }

    /// Stops a run not over yet ([`runs::mark_stopped`]) and, in the same
    /// transaction, queues its [`Step::ShowStop`] for the re-check delay
    /// later (30 s in `closer serve`, as for a write that may have been
    /// applied): the stop's writes on GitHub are made at once by the
    /// caller, and checked again by that step, which writes what failed or
    /// what a dying process never wrote. Nothing is written when the run
    /// had ended meanwhile.
    pub async fn mark_stopped(&self, run_id: &RunId, outcome: &Outcome) -> Result<(), EngineError> {
        let now = self.store.now_ms();
        let job = self.step_job(run_id, Step::ShowStop, self.after_recheck(now))?;
        let pool = self.store.pool();
        runs::mark_stopped(pool, run_id, outcome, &job, now).await?;
        Ok(())
    }

    /// The re-check delay after `now`.
    fn after_recheck(&self, now: Millis) -> Millis {
        let again = i64::try_from(self.recheck_after.as_millis()).unwrap_or(i64::MAX);
        now.saturating_add(again)
    }

    /// Queues the run's [`Step::TakeEdit`] of `edit`, behind the step at
    /// work.
    pub async fn enqueue_edit(&self, run_id: &RunId, edit: IssueEdit) -> Result<(), EngineError> {
        let now = self.store.now_ms();
        let job = self.job(
            RunJob {
                run_id: run_id.clone(),
                step: Step::TakeEdit,
                edit: Some(edit),
            },
            now,
        )?;
        jobs::enqueue(self.store.pool(), &job, now).await?;
        self.ready.notify_one();
        Ok(())
    }

    fn step_job(&self, run_id: &RunId, step: Step, run_at: Millis) -> Result<NewJob, EngineError> {
        let job = RunJob {
            run_id: run_id.clone(),
            step,
            edit: None,
        };
        self.job(job, run_at)
    }

    fn job(&self, job: RunJob, run_at: Millis) -> Result<NewJob, EngineError> {
        let payload = serde_json::to_string(&job).map_err(super::other)?;
        Ok(NewJob {
            kind: JobKind::Run,
            key: run_job_key(&job.run_id),
            payload,
            max_attempts: self.max_attempts,
            run_at,
        })
    }

    /// Queues a step of a run unless one is queued or running already;
    /// `true` when it did ([`jobs::enqueue_unless_live`]).
    pub async fn enqueue_unless_live(
        &self,
        run_id: &RunId,
        step: Step,
    ) -> Result<bool, EngineError> {
        let now = self.store.now_ms();
        let job = self.step_job(run_id, step, now)?;
        let backend = self.store.backend();
        let added = jobs::enqueue_unless_live(self.store.pool(), backend, &job, now).await?;
        if added {
            self.ready.notify_one();
        }
        Ok(added)
    }

    /// [`Runs::save`] only while the stored run is still in state `was`
    /// ([`runs::save_if_still`]); `true` when it was written.
    pub async fn save_if_still(
        &self,
        ctx: &mut RunContext,
        was: RunState,
    ) -> Result<bool, EngineError> {
        ctx.run.data = ctx.data.to_json();
        ctx.run.updated_at = self.store.now_ms();
        Ok(runs::save_if_still(self.store.pool(), &ctx.run, was).await?)
    }

    /// The id of the newest queue job ([`jobs::newest_id`]).
    pub async fn newest_job(&self) -> Result<i64, EngineError> {
        Ok(jobs::newest_id(self.store.pool()).await?)
    }

    /// Whether a step of the run is queued or running.
    pub async fn has_live_step(&self, run_id: &RunId) -> Result<bool, EngineError> {
        Ok(jobs::has_live_job(self.store.pool(), &run_job_key(run_id)).await?)
    }

    /// How many of the run's steps died in a row (since one last
    /// completed, and since `since`: the run's restart), with the newest
    /// one's error.
    pub async fn dead_steps(
        &self,
        run_id: &RunId,
        since: Millis,
    ) -> Result<(u32, Option<String>), EngineError> {
        Ok(jobs::dead_in_a_row(self.store.pool(), &run_job_key(run_id), since).await?)
    }

    /// Every judged iteration of the run, oldest first; a record that does
    /// not parse is an error.
    pub async fn records(&self, run_id: &RunId) -> Result<Vec<IterationRecord>, EngineError> {
        runs::iterations(self.store.pool(), run_id)
            .await?
            .iter()
            .filter(|i| judged(i))
            .filter_map(|i| i.judgment.as_deref().map(|j| (i.number, j)))
            .map(|(n, j)| {
                IterationRecord::from_json(j).map_err(|e| EngineError::CorruptRun {
                    run: run_id.clone(),
                    message: format!("iteration {n}: {e}"),
                })
            })
            .collect()
    }

    /// The last judged iteration of the run.
    pub async fn last_record(
        &self,
        run_id: &RunId,
    ) -> Result<Option<IterationRecord>, EngineError> {
        Ok(self.records(run_id).await?.pop())
    }

    /// The judged record of iteration `n`, if it was judged.
    pub async fn record_of(
        &self,
        run_id: &RunId,
        n: u32,
    ) -> Result<Option<IterationRecord>, EngineError> {
        let row = runs::iterations(self.store.pool(), run_id)
            .await?
            .into_iter()
            .rfind(|i| i.number == n)
            .filter(judged);
        row.and_then(|i| i.judgment)
            .map(|j| {
                IterationRecord::from_json(&j).map_err(|e| EngineError::CorruptRun {
                    run: run_id.clone(),
                    message: format!("iteration {n}: {e}"),
                })
            })
            .transpose()
    }

    /// Whether the run's current iteration started and never finished.
    pub async fn interrupted(&self, run: &Run) -> Result<bool, EngineError> {
        Ok(runs::iterations(self.store.pool(), &run.id)
            .await?
            .last()
            .is_some_and(|i| i.number == run.iteration && i.finished_at.is_none()))
    }

    /// Keeps what the agent did in iteration `n` until it is judged.
    pub async fn keep_work(
        &self,
        run: &Run,
        n: u32,
        result: &crate::agent::adapter::AgentResult,
    ) -> Result<(), EngineError> {
        let json = serde_json::to_string(result).map_err(super::other)?;
        runs::keep_agent_result(self.store.pool(), &run.id, n, &json).await?;
        Ok(())
    }

    /// The agent's result of iteration `n`, when the agent finished it and
    /// the iteration was never judged (interrupted after the agent).
    pub async fn unjudged_work(
        &self,
        run: &Run,
        n: u32,
    ) -> Result<Option<crate::agent::adapter::AgentResult>, EngineError> {
        let iterations = runs::iterations(self.store.pool(), &run.id).await?;
        let Some(kept) = iterations
            .iter()
            .find(|i| i.number == n && i.finished_at.is_none())
            .and_then(|i| i.agent.as_deref())
        else {
            return Ok(None);
        };
        serde_json::from_str(kept)
            .map(Some)
            .map_err(|e| EngineError::CorruptRun {
                run: run.id.clone(),
                message: format!("iteration {n}'s agent result: {e}"),
            })
    }

    /// The replies of a run, oldest first.
    pub async fn messages(&self, run_id: &RunId) -> Result<Vec<MessageRow>, EngineError> {
        Ok(messages::of_run(self.store.pool(), run_id).await?)
    }

    /// The stored replies that answer the run's question
    /// ([`RunData::answers_question`]).
    pub async fn answers(
        &self,
        run_id: &RunId,
        data: &RunData,
    ) -> Result<Vec<MessageRow>, EngineError> {
        let mut all = self.messages(run_id).await?;
        all.retain(|m| data.answers_question(m));
        Ok(all)
    }

    /// The replies no prompt has carried yet, by comment id.
    pub async fn unused_replies(&self, run_id: &RunId) -> Result<Vec<i64>, EngineError> {
        Ok(self
            .messages(run_id)
            .await?
            .into_iter()
            .filter(|m| m.used_in.is_none())
            .map(|m| m.comment_id)
            .collect())
    }
}

/// Whether an iteration was judged, so that its judgment holds a record.
/// A stopped one was not: it has no judgment, or (written before that was
/// so) an empty object, which is no record.
fn judged(row: &runs::IterationRow) -> bool {
    row.decision != Some(IterationEnd::Stopped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(judgment: Option<&str>, decision: Option<IterationEnd>) -> runs::IterationRow {
        runs::IterationRow {
            run_id: RunId::from_stored("r1".to_owned()),
            number: 1,
            prompt: String::new(),
            agent: Some("{}".to_owned()),
            judgment: judgment.map(str::to_owned),
            decision,
            started_at: 0,
            finished_at: Some(1),
        }
    }

    #[test]
    fn a_stopped_iteration_holds_no_record_whatever_an_earlier_version_wrote() {
        // Before decision 134 a stop wrote `{}`, which is no record.
        assert!(!judged(&row(Some("{}"), Some(IterationEnd::Stopped))));
        assert!(!judged(&row(None, Some(IterationEnd::Stopped))));
        assert!(judged(&row(Some("{…}"), Some(IterationEnd::Incomplete))));
        assert!(IterationRecord::from_json("{}").is_err(), "why it matters");
    }
}
