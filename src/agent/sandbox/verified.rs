//! The last check before a push: what is pushed is exactly the commit
//! verification checked. The worktree must be clean (nothing tracked
//! modified, nothing untracked beyond closer's build-output excludes) and
//! its `HEAD` must be the verified commit; a goal, a completion handler or
//! any process that changed or committed something after verification
//! makes the push refused, with the reason.

use super::commit::exclude_file;
use super::{Sandbox, SandboxError, Worktree};

/// Why a worktree may not be pushed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PushRefusal {
    #[error("no verified commit is recorded for this run")]
    NotVerified,
    #[error("the worktree changed after verification ({files})")]
    Dirty { files: String },
    #[error("HEAD moved after verification (verified {verified}, HEAD is {head})")]
    Moved { verified: String, head: String },
}

/// At most this many changed paths are named in a refusal.
const NAMED_PATHS: usize = 5;

impl Sandbox {
    /// Why `worktree` may not be pushed as the `verified` commit, if it may not.
    pub async fn push_refusal(
        &self,
        worktree: &Worktree,
        verified: Option<&str>,
    ) -> Result<Option<PushRefusal>, SandboxError> {
        let Some(verified) = verified.filter(|v| !v.is_empty()) else {
            return Ok(Some(PushRefusal::NotVerified));
        };
        let exclude = exclude_file(worktree).await?;
        let excludes = format!("core.excludesFile={}", exclude.display());
        super::nested::unnest(self.git(), worktree).await?;
        let status = worktree
            .git(
                self.git(),
                &[
                    "-c",
                    &excludes,
                    "status",
                    "--porcelain",
                    "--untracked-files=all",
                    "--ignore-submodules=dirty",
                ],
            )
            .await?;
        let changed: Vec<&str> = status.lines().filter(|l| !l.trim().is_empty()).collect();
        if !changed.is_empty() {
            let mut files: Vec<String> = changed
                .iter()
                .take(NAMED_PATHS)
                .map(|l| l.get(3..).unwrap_or(l).to_owned())
                .collect();
            if changed.len() > NAMED_PATHS {
                files.push(format!("and {} more", changed.len() - NAMED_PATHS));
            }
            return Ok(Some(PushRefusal::Dirty {
                files: files.join(", "),
            }));
        }
        let head = self.head(worktree).await?;
        if head != verified {
            return Ok(Some(PushRefusal::Moved {
                verified: verified.to_owned(),
                head,
            }));
        }
        Ok(None)
    }
}
