//! An event under a name whose runs belong to another repository (the name
//! changed hands: `store/replaced.rs`) sets those runs aside before it is
//! acted on, so the repository now holding the name gets runs of its own
//! and never another repository's run, status, history or worktree.

use super::{Engine, EngineError};
use crate::events::Event;
use crate::store::replaced;

impl Engine {
    /// Sets aside the runs stored under the event's repository name for
    /// another repository id than the event's.
    pub(super) async fn set_aside_replaced(&self, event: &Event) -> Result<(), EngineError> {
        let Some(repo) = event.repo() else {
            return Ok(());
        };
        let Some(id) = repo.id else {
            return Ok(());
        };
        let store = self.runs.store();
        let aside = replaced::set_aside(store.pool(), &repo.name, id, store.now_ms()).await?;
        if !aside.is_empty() {
            tracing::warn!(
                repository = %repo.name,
                %id,
                runs = ?aside,
                "the name now belongs to another repository: its earlier runs are set aside"
            );
        }
        Ok(())
    }
}
