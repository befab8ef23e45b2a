//! The run's branch on the remote, which people may push to: what its head
//! is, continuing the worktree from it (fast-forward, or the run's own
//! unpushed commits rebased onto it, or — when they do not apply — dropped
//! for the agent to redo), and the lease a push is made against.
//!
//! It must never discard a commit that is on the remote, nor bring back
//! one a person took off it: closer pushes with `--force-with-lease`
//! against the head it last saw (see [`super::Sandbox::push`]), and the
//! worktree only ever moves to the remote's head or onto it. Only the
//! commits after the head closer last saw are the run's own unpushed work;
//! the ones before it are the branch's history as the remote had it, and
//! when the remote no longer has them (a person reset or rewrote the
//! branch) they are gone from the worktree too.

use serde::{Deserialize, Serialize};

use super::git::GitError;
use super::{RepoSource, Sandbox, SandboxError, Worktree, safe_name};

/// What continuing from the remote branch did to the worktree.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BranchSync {
    /// The branch is not on the remote (nothing pushed yet).
    Absent,
    /// The worktree already holds the remote's head.
    UpToDate,
    /// The remote had new commits and the worktree none of its own: moved
    /// forward to them.
    FastForwarded,
    /// Both had new commits: the worktree's were rebased onto the remote's.
    Rebased,
    /// Both had new commits and the worktree's did not apply on the
    /// remote's: the worktree now holds the remote's head, its own commits
    /// are to be redone.
    Redone,
    /// A person reset or rewrote the branch: commits closer had seen on it
    /// are not on it any more. The worktree holds the remote's head, with
    /// the run's unpushed commits (if any) rebased onto it.
    Rewritten,
    /// The branch closer had seen on the remote is gone (a person deleted
    /// it, for a fresh start): the worktree is back at the commit it was
    /// made from (its `base_commit`), its earlier commits dropped.
    Deleted,
    /// The remote holds the branch already merged, left on GitHub (a run
    /// restarted after its merge): the worktree is left as it is, and the
    /// next push replaces that branch.
    MergedLeft,
}

impl BranchSync {
    /// Whether somebody else's commits were taken in.
    pub fn took_others(self) -> bool {
        matches!(
            self,
            BranchSync::FastForwarded
                | BranchSync::Rebased
                | BranchSync::Redone
                | BranchSync::Rewritten
        )
    }
}

impl Sandbox {
    /// The head of `worktree.branch` on the remote, fetched into the mirror
    /// (`refs/closer/remote/<branch>`); `None` when the remote has no such
    /// branch.
    pub async fn fetch_branch(
        &self,
        worktree: &Worktree,
        source: &RepoSource,
    ) -> Result<Option<String>, SandboxError> {
        let remote_ref = format!("refs/heads/{}", worktree.branch);
        let _lock = super::lock::lock(&worktree.mirror.with_extension("lock")).await?;
        self.reset_config(&worktree.mirror).await?;
        let listed = self
            .git
            .run_with(
                &worktree.mirror,
                &["ls-remote", &source.url, &remote_ref],
                source.token(),
            )
            .await?;
        let Some(sha) = listed
            .lines()
            .find_map(|l| l.split_once('\t').filter(|(_, r)| *r == remote_ref))
            .map(|(sha, _)| sha.trim().to_owned())
        else {
            return Ok(None);
        };
        let local = format!("refs/closer/remote/{}", safe_name(&worktree.branch));
        let refspec = format!("+{remote_ref}:{local}");
        self.git
            .run_with(
                &worktree.mirror,
                &["fetch", "--quiet", "--no-tags", &source.url, &refspec],
                source.token(),
            )
            .await?;
        Ok(Some(sha))
    }

    /// Brings the worktree (clean: closer committed the agent's work) onto
    /// `remote`, the branch's head on the remote, keeping both sides'
    /// commits where they apply. `seen` is the head closer last saw on the
    /// remote (`None`: it never saw the branch there): the worktree's
    /// commits after it are the run's own, the ones before it the remote's.
    pub async fn continue_from(
        &self,
        worktree: &Worktree,
        remote: &str,
        seen: Option<&str>,
    ) -> Result<BranchSync, SandboxError> {
        let head = self.head(worktree).await?;
        if head == remote {
            return Ok(BranchSync::UpToDate);
        }
        // A head the mirror no longer has (a data directory made afresh, a
        // commit collected since) is in neither history: as if unseen.
        let rewritten = match seen.filter(|s| *s != remote) {
            Some(seen) if self.has_commit(worktree, seen).await => {
                self.is_ancestor(worktree, seen, &head).await?
                    && !self.is_ancestor(worktree, seen, remote).await?
            }
            _ => false,
        };
        if rewritten {
            return self
                .rewritten(worktree, remote, seen.unwrap_or_default(), &head)
                .await;
        }
        if self.is_ancestor(worktree, remote, &head).await? {
            return Ok(BranchSync::UpToDate);
        }
        if self.is_ancestor(worktree, &head, remote).await? {
            self.reset_to(worktree, remote).await?;
            return Ok(BranchSync::FastForwarded);
        }
        match self.rebase_onto(worktree, remote, None).await? {
            true => Ok(BranchSync::Rebased),
            false => Ok(BranchSync::Redone),
        }
    }

    /// The remote no longer has `seen`, the head closer last saw (a person
    /// reset or rewrote the branch): the worktree takes the remote's head,
    /// and only its own commits after `seen` are rebased onto it.
    async fn rewritten(
        &self,
        worktree: &Worktree,
        remote: &str,
        seen: &str,
        head: &str,
    ) -> Result<BranchSync, SandboxError> {
        if head == seen {
            self.reset_to(worktree, remote).await?;
            return Ok(BranchSync::Rewritten);
        }
        match self.rebase_onto(worktree, remote, Some(seen)).await? {
            true => Ok(BranchSync::Rewritten),
            false => Ok(BranchSync::Redone),
        }
    }

    /// The worktree back at the commit it was made from, every commit of
    /// the run dropped: the branch it had pushed was deleted on the remote.
    pub async fn start_afresh(&self, worktree: &Worktree) -> Result<BranchSync, SandboxError> {
        self.reset_to(worktree, &worktree.base_commit).await?;
        Ok(BranchSync::Deleted)
    }

    async fn reset_to(&self, worktree: &Worktree, commit: &str) -> Result<(), SandboxError> {
        worktree
            .git(&self.git, &["reset", "--quiet", "--hard", commit])
            .await?;
        Ok(())
    }

    /// Rebases the worktree's commits (those after `upstream`, or all not
    /// on `onto`) onto `onto`; when they do not apply, the worktree holds
    /// `onto` and the answer is `false`.
    async fn rebase_onto(
        &self,
        worktree: &Worktree,
        onto: &str,
        upstream: Option<&str>,
    ) -> Result<bool, SandboxError> {
        let mut args = vec!["-c", "core.editor=true", "rebase", "--quiet"];
        match upstream {
            Some(upstream) => args.extend(["--onto", onto, upstream]),
            None => args.push(onto),
        }
        match worktree.git(&self.git, &args).await {
            Ok(_) => Ok(true),
            Err(GitError::Failed { .. }) => {
                let _ = worktree.git(&self.git, &["rebase", "--abort"]).await;
                self.reset_to(worktree, onto).await?;
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn has_commit(&self, worktree: &Worktree, sha: &str) -> bool {
        let object = format!("{sha}^{{commit}}");
        worktree
            .git(&self.git, &["cat-file", "-e", &object])
            .await
            .is_ok()
    }

    async fn is_ancestor(
        &self,
        worktree: &Worktree,
        ancestor: &str,
        of: &str,
    ) -> Result<bool, SandboxError> {
        match worktree
            .git(&self.git, &["merge-base", "--is-ancestor", ancestor, of])
            .await
        {
            Ok(_) => Ok(true),
            Err(GitError::Failed { detail, .. }) if detail.starts_with("exit Some(1)") => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

/// Whether a failed push was refused because the branch moved on the remote
/// (the lease did not hold), not for another reason.
pub fn is_stale(error: &GitError) -> bool {
    match error {
        GitError::Failed { detail, .. } => {
            detail.contains("stale info")
                || detail.contains("[rejected]")
                || detail.contains("fetch first")
                || detail.contains("non-fast-forward")
        }
        _ => false,
    }
}

/// The workflow file GitHub named when it refused a push because the
/// pushed commits create or update a file under `.github/workflows/` and
/// the token has no `workflows` permission (closer's App never asks for
/// it). GitHub reports it as the ref's rejection reason:
/// `! [remote rejected] a -> a (refusing to allow a GitHub App to create or
/// update workflow `.github/workflows/ci.yml` without `workflows`
/// permission)`.
pub fn refused_workflow(error: &GitError) -> Option<String> {
    const MARK: &str = "to create or update workflow `";
    let GitError::Failed { detail, .. } = error else {
        return None;
    };
    let (_, rest) = detail.split_once(MARK)?;
    let (path, _) = rest.split_once('`')?;
    Some(path.to_owned())
}

/// The rules GitHub named when it declined a push for breaking the
/// repository's rules (rulesets: signed commits, file paths or sizes,
/// secrets; or classic branch protection), `Some(vec![])` when it named
/// none. GitHub lists them as `remote: - <rule>` lines before the ref's
/// `(push declined due to repository rule violations)`.
pub fn refused_by_rules(error: &GitError) -> Option<Vec<String>> {
    const DECLINED: [&str; 2] = [
        "push declined due to repository rule violations",
        "protected branch hook declined",
    ];
    let GitError::Failed { detail, .. } = error else {
        return None;
    };
    if !DECLINED.iter().any(|d| detail.contains(d)) {
        return None;
    }
    let rules = detail
        .split(" | ")
        // The first line kept carries git's exit status before it.
        .filter_map(|line| line.split_once("remote:").map(|(_, rest)| rest))
        .filter_map(|line| line.trim().strip_prefix("- "))
        .map(|rule| rule.trim().to_owned())
        .filter(|rule| !rule.is_empty())
        .collect();
    Some(rules)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(detail: &str) -> GitError {
        GitError::Failed {
            args: "push --quiet".to_owned(),
            detail: detail.to_owned(),
        }
    }

    #[test]
    fn a_workflow_refusal_names_the_file_github_named() {
        let refused = failed(
            "exit Some(1): To https://github.com/acme/widget.git |  ! [remote rejected] \
             1f2e -> closer/issue-7 (refusing to allow a GitHub App to create or update \
             workflow `.github/workflows/ci.yml` without `workflows` permission) | \
             error: failed to push some refs to 'https://github.com/acme/widget.git'",
        );
        assert_eq!(
            refused_workflow(&refused).as_deref(),
            Some(".github/workflows/ci.yml")
        );
        assert!(!is_stale(&refused), "not a moved branch");
    }

    #[test]
    fn other_refusals_are_not_workflow_refusals() {
        let stale = failed("exit Some(1): ! [rejected] a -> a (stale info)");
        assert_eq!(refused_workflow(&stale), None);
        assert!(is_stale(&stale));
        let hook = failed("exit Some(1): ! [remote rejected] a -> a (pre-receive hook declined)");
        assert_eq!(refused_workflow(&hook), None);
        assert_eq!(refused_workflow(&GitError::Spawn("x".into())), None);
        assert_eq!(refused_by_rules(&hook), None);
        assert_eq!(refused_by_rules(&stale), None);
    }

    #[test]
    fn a_rules_refusal_names_the_rules_github_listed() {
        let declined = failed(
            "exit Some(1): remote: error: GH013: Repository rule violations found for \
             refs/heads/closer/issue-7. | remote: Review all repository rules at \
             https://github.com/acme/widget/rules?ref=refs%2Fheads%2Fcloser%2Fissue-7 | \
             remote: | remote: - Commits must have verified signatures. | remote: | \
             remote: - Changes must be made through a pull request. | remote: | \
             To https://github.com/acme/widget.git |  ! [remote rejected] 1f2e -> \
             closer/issue-7 (push declined due to repository rule violations) | \
             error: failed to push some refs to 'https://github.com/acme/widget.git'",
        );
        assert_eq!(
            refused_by_rules(&declined),
            Some(vec![
                "Commits must have verified signatures.".to_owned(),
                "Changes must be made through a pull request.".to_owned(),
            ])
        );
        assert_eq!(refused_workflow(&declined), None);
        assert!(!is_stale(&declined));
        let first = failed(
            "exit Some(1): remote: - Commit message must match a given regex pattern | \
             remote:   Found 1 violation: | remote: | remote:   1f2e3d | remote: | \
             ! [remote rejected] a -> a (push declined due to repository rule violations)",
        );
        assert_eq!(
            refused_by_rules(&first),
            Some(vec![
                "Commit message must match a given regex pattern".to_owned()
            ])
        );
        let protected =
            failed("exit Some(1): ! [remote rejected] a -> a (protected branch hook declined)");
        assert_eq!(refused_by_rules(&protected), Some(vec![]));
    }
}
