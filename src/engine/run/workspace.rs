//! Where a run's work happens: the mirror and the run's worktree (through
//! the sandbox), where its repository comes from (the clone URL, with a
//! token for http(s)), and the scratch directory for prompt files.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::context::RunContext;
use super::{EngineError, other};
use crate::agent::process::BaseEnv;
use crate::agent::sandbox::{RepoSource, Sandbox, SandboxOptions, Worktree};
use crate::model::RunId;

/// The identity of the commits closer makes.
const COMMITTER_NAME: &str = "closer";
const COMMITTER_EMAIL: &str = "closer@users.noreply.github.com";

/// Mirrors, worktrees and scratch space under the data directory.
pub struct Workspace {
    sandbox: Sandbox,
    scratch: PathBuf,
}

impl Workspace {
    pub fn new(data_dir: &Path, base_env: &BaseEnv) -> Workspace {
        Workspace {
            sandbox: Sandbox::new(SandboxOptions {
                root: data_dir.join("sandbox"),
                base_env: base_env.clone(),
                git_timeout: Duration::from_secs(600),
                committer_name: COMMITTER_NAME.to_owned(),
                committer_email: COMMITTER_EMAIL.to_owned(),
            }),
            scratch: data_dir.join("scratch"),
        }
    }

    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// The run's own scratch directory (prompt files).
    pub fn scratch(&self, run: &RunId) -> PathBuf {
        self.scratch.join(run.as_str())
    }

    /// Where the repository is cloned from, with the token for http(s).
    pub async fn source(&self, ctx: &RunContext) -> Result<RepoSource, EngineError> {
        let run = &ctx.run;
        let (url, branch) = match (&run.clone_url, &run.default_branch) {
            (Some(u), Some(b)) => (u.clone(), b.clone()),
            _ => {
                let r = ctx.client.get_repository(ctx.repo()).await?;
                (
                    run.clone_url.clone().unwrap_or(r.clone_url),
                    run.default_branch.clone().unwrap_or(r.default_branch),
                )
            }
        };
        let token = match url.starts_with("http") {
            true => Some(ctx.client.token().await?),
            false => None,
        };
        Ok(RepoSource {
            url,
            token,
            default_branch: Some(branch),
        })
    }

    /// The run's worktree, made (or found again) from the mirror.
    pub async fn prepare(&self, ctx: &RunContext) -> Result<Worktree, EngineError> {
        let source = self.source(ctx).await?;
        self.sandbox
            .prepare(&source, ctx.issue().0, ctx.run.id.as_str())
            .await
            .map_err(other)
    }

    /// The worktree the run's data remembers, if it is still there; else
    /// made again.
    pub async fn existing_or_prepare(&self, ctx: &RunContext) -> Result<Worktree, EngineError> {
        match ctx.data.worktree.clone() {
            Some(w) if w.path.exists() => Ok(w),
            _ => self.prepare(ctx).await,
        }
    }

    /// Pushes the run's branch.
    pub async fn push(&self, ctx: &RunContext, worktree: &Worktree) -> Result<(), EngineError> {
        let source = self.source(ctx).await?;
        self.sandbox.push(worktree, &source).await.map_err(other)
    }

    /// Removes the run's worktree; a failure is logged, not fatal.
    pub async fn remove(&self, worktree: &Worktree, run: &RunId) {
        if let Err(e) = self.sandbox.remove(worktree, run.as_str()).await {
            tracing::warn!(run = %run, error = %e, "worktree not removed");
        }
    }
}
