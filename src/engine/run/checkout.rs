//! The clean checkout every goal runs on: a detached worktree of one commit
//! (the iteration's head, or the base commit for the baseline and the
//! reproduction) beside the run's own, with a home made empty for this one
//! check, and the repository's `setup` run in it first.
//!
//! The agent's worktree is never where a goal runs. What the agent left
//! there beside its commit (ignored files, build output, a `.pyc` compiled
//! from a fix it then reverted, a patched `node_modules/`) would be trusted
//! by the checks, and the verdict would be about code that is not what is
//! pushed (decision 146). A check's result is a function of the commit and
//! of what the setup installs for it.

use std::path::PathBuf;

use super::{Engine, EngineError, other};
use crate::agent::sandbox::Worktree;
use crate::agent::sandbox::purpose::Purpose;
use crate::agent::sandbox::remove::remove_tree;
use crate::engine::artifacts::Artifacts;
use crate::engine::diff::AddedLine;
use crate::engine::goals::{GoalContext, GoalSettings};

/// A checkout made for one check; give it back with [`Engine::release`].
#[derive(Debug)]
pub(super) struct Checkout {
    pub worktree: Worktree,
    /// Shared by the setup and the goals of this check.
    pub home: PathBuf,
}

impl Engine {
    /// A clean checkout of `commit` for `purpose`, with an empty home. One
    /// a crash left behind is replaced.
    pub(super) async fn checkout(
        &self,
        run: &Worktree,
        run_id: &str,
        commit: &str,
        purpose: Purpose,
    ) -> Result<Checkout, EngineError> {
        let sandbox = self.workspace.sandbox();
        let worktree = sandbox
            .checkout(run, run_id, commit, purpose)
            .await
            .map_err(other)?;
        let home = self.workspace.check_home(run_id, purpose);
        let checkout = Checkout { worktree, home };
        let made = async {
            remove_tree(&checkout.home).await?;
            tokio::fs::create_dir_all(checkout.home.join("tmp")).await
        };
        if let Err(e) = made.await {
            self.release(checkout, run_id).await;
            return Err(other(e));
        }
        Ok(checkout)
    }

    /// Removes a checkout and its home; a failure is logged (the next
    /// checkout for the same purpose replaces what is left).
    pub(super) async fn release(&self, checkout: Checkout, run_id: &str) {
        let sandbox = self.workspace.sandbox();
        if let Err(e) = sandbox.remove(&checkout.worktree, run_id).await {
            tracing::warn!(run = %run_id, error = %e, "checkout not removed");
        }
        if let Err(e) = remove_tree(&checkout.home).await {
            tracing::warn!(run = %run_id, error = %e, "checkout's home not removed");
        }
    }
}

impl Checkout {
    /// What a goal run in this checkout sees.
    pub fn goal_context<'a>(
        &'a self,
        artifacts: &'a Artifacts,
        added_lines: &'a [AddedLine],
        settings: &'a GoalSettings,
    ) -> GoalContext<'a> {
        GoalContext {
            worktree: &self.worktree.path,
            mirror: Some(&self.worktree.mirror),
            home: Some(&self.home),
            artifacts,
            added_lines,
            settings,
        }
    }
}
