//! While the agent works on an iteration, the run is watched for a stop.
//!
//! A stop (`/closer stop`, the issue closed by hand, reconciliation) is a
//! write to the run's row, possibly by another replica. The iteration step
//! reads the row every [`STOP_POLL`] while its agent runs; once the run is no
//! longer `running`, the agent is told to stop (`AgentRequest::stop`), which
//! kills its process group and reads what it printed so far (what it spent
//! counts in the run's totals), and the iteration is recorded as stopped. Without this watch a
//! stopped run's agent worked on until its iteration ended (up to its
//! timeout).

use std::time::Duration;

use tokio::time::MissedTickBehavior;

use super::Engine;
use crate::model::{RunId, RunState};
use crate::store::runs;

/// How often a working agent's run is checked for a stop: the longest an
/// agent works on after its run was stopped (plus one database read).
pub(super) const STOP_POLL: Duration = Duration::from_secs(2);

impl Engine {
    /// Resolves once the stored run is no longer `running`; never while it
    /// is (a failed read is logged and the watch goes on).
    pub(super) async fn stopped_meanwhile(&self, run_id: &RunId) {
        let mut tick = tokio::time::interval(STOP_POLL);
        tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
        tick.tick().await; // the first tick is immediate
        loop {
            tick.tick().await;
            match runs::state_of(self.runs.store().pool(), run_id).await {
                Ok(Some(state)) if state != RunState::Running => return,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(run = %run_id, error = %e, "could not check whether the run was stopped");
                }
            }
        }
    }
}
