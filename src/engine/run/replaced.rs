//! An event under a name whose runs belong to another repository (the name
//! changed hands: `store/replaced.rs`) sets those runs aside before it is
//! acted on, so the repository now holding the name gets runs of its own
//! and never another repository's run, status, history or worktree. A step
//! that finds GitHub answering its run's name with another repository
//! before it fetches or pushes (`workspace.rs`, [`EngineError::NameTaken`])
//! sets its run aside too: the new holder may never send an event.

use super::{Engine, EngineError};
use crate::events::Event;
use crate::model::{RepoName, RepositoryId};
use crate::store::replaced::{self, Holder};

impl Engine {
    /// Sets aside the runs stored under the event's repository name that
    /// are not that repository's (`store/replaced.rs`).
    pub(super) async fn set_aside_replaced(&self, event: &Event) -> Result<(), EngineError> {
        let Some(repo) = event.repo() else {
            return Ok(());
        };
        let Some(id) = repo.id else {
            return Ok(());
        };
        let holder = Holder {
            name: &repo.name,
            id,
            created_at: repo.created_at,
        };
        self.set_aside(holder, "an event").await
    }

    /// A step found `name` held by repository `holder`: the runs stored
    /// under it for another repository are set aside.
    pub(super) async fn name_taken(
        &self,
        name: &RepoName,
        holder: RepositoryId,
    ) -> Result<(), EngineError> {
        let holder = Holder {
            name,
            id: holder,
            created_at: None,
        };
        self.set_aside(holder, "a step").await
    }

    /// Sets aside the runs under `holder`'s name that are not its own, and
    /// says so when there were any; `by` is what found the name taken.
    async fn set_aside(&self, holder: Holder<'_>, by: &str) -> Result<(), EngineError> {
        let store = self.runs.store();
        let aside = replaced::set_aside(store.pool(), holder, store.now_ms()).await?;
        if !aside.is_empty() {
            tracing::warn!(
                repository = %holder.name,
                id = %holder.id,
                runs = ?aside,
                found_by = by,
                "the name now belongs to another repository: its earlier runs are set aside"
            );
        }
        Ok(())
    }
}
