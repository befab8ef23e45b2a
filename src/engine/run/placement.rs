//! Which workspace (data directory) a run's steps work in.
//!
//! A run's worktree, with the agent's commits not yet pushed and its
//! session, lives in the data directory of the process that made it. With
//! several replicas sharing one PostgreSQL queue, each with a data
//! directory of its own, any worker may claim the run's next step; one in
//! another data directory would make the worktree afresh from the branch
//! on GitHub and lose that work, or find the verified head missing at
//! `finish`. So the run records its workspace, a step claimed elsewhere
//! goes back to the queue while that workspace is alive, and once it is
//! gone (not heard from for `workspaces::ALIVE_WITHIN`, or left at
//! shutdown) the next step is taken over where it is claimed
//! (decision 254). Processes sharing a data directory share its id.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use super::context::RunContext;
use super::{Engine, EngineError};
use crate::store::workspaces;

/// How long a step claimed outside its run's workspace waits before it is
/// claimable again.
const ELSEWHERE_WAIT: Duration = Duration::from_secs(5);

impl Engine {
    /// Sends the step back to the queue while the run's worktree is in
    /// another workspace that is alive; else records this one as the run's
    /// (saved with the step's next write of the run).
    pub(super) async fn in_the_runs_workspace(
        &self,
        ctx: &mut RunContext,
    ) -> Result<(), EngineError> {
        let here = self.workspace.id();
        if let Some(there) = ctx.data.workspace.as_deref().filter(|w| *w != here) {
            let store = self.runs.store();
            if workspaces::alive(store.pool(), there, store.now_ms()).await? {
                return Err(EngineError::NotYet {
                    why: "the run's worktree is in another workspace",
                    wait: ELSEWHERE_WAIT,
                });
            }
            tracing::warn!(run = %ctx.run.id, workspace = there, here,
                "the run's workspace is gone: its steps are taken over here, from its branch on GitHub");
        }
        ctx.data.workspace = Some(here.to_owned());
        Ok(())
    }

    /// Says `process` works in this workspace every `workspaces::BEAT`
    /// until `shutdown`, then that it left. A failed write is logged: the
    /// next beat may land, and meanwhile the runs wait or are taken over.
    /// Only a process with workers says so: one without never takes the
    /// steps it would hold.
    pub async fn announce_workspace_forever(
        self: Arc<Self>,
        process: String,
        mut shutdown: watch::Receiver<bool>,
    ) {
        let (id, store) = (self.workspace.id(), self.runs.store());
        tracing::info!(workspace = id, "this data directory's workspace");
        loop {
            if let Err(e) = workspaces::beat(store.pool(), id, &process, store.now_ms()).await {
                tracing::warn!(error = %e, "cannot record this workspace as alive");
            }
            tokio::select! {
                _ = tokio::time::sleep(workspaces::BEAT) => {}
                _ = shutdown.changed() => break,
            }
        }
        if let Err(e) = workspaces::leave(store.pool(), id, &process).await {
            tracing::warn!(error = %e, "cannot record that this workspace left");
        }
    }
}
