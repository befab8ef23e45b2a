//! A file as one commit has it, copied out of the mirror into a directory
//! closer owns: how the `custom` completion handler is read (from the base
//! commit, outside the worktree, so an agent that rewrites the script in
//! its worktree changes nothing about who decides), and how the head's
//! test files reach the reproduction's checkout (as committed, not as
//! anything left in a worktree says). It reads the mirror's objects only
//! (never a worktree, never its `.git`), and refuses a path that leaves the
//! repository, a symlink and anything that is not a file.

use std::path::{Component, Path, PathBuf};

use super::{Sandbox, SandboxError, Worktree};

impl Sandbox {
    /// Copies `path` as it is in the worktree's base commit to `dest/<path>`,
    /// executable when the base commit has it executable; answers the copy.
    pub async fn copy_from_base(
        &self,
        worktree: &Worktree,
        path: &str,
        dest: &Path,
    ) -> Result<PathBuf, SandboxError> {
        self.copy_from_commit(worktree, &worktree.base_commit, path, dest)
            .await
    }

    /// Copies `path` as it is in `commit` (an object of the worktree's
    /// mirror) to `dest/<path>`, as [`Sandbox::copy_from_base`] does.
    pub async fn copy_from_commit(
        &self,
        worktree: &Worktree,
        commit: &str,
        path: &str,
        dest: &Path,
    ) -> Result<PathBuf, SandboxError> {
        let refused = |why: &str| SandboxError::BaseFile(format!("`{path}` {why}"));
        let plain = !path.is_empty()
            && Path::new(path)
                .components()
                .all(|c| matches!(c, Component::Normal(_)));
        if !plain {
            return Err(refused("is not a relative path inside the repository"));
        }
        let listing = self
            .git()
            .run(&worktree.mirror, &["ls-tree", commit, "--", path])
            .await?;
        // `<mode> <type> <object>\t<path>`
        let entry = listing.lines().next().unwrap_or_default();
        let mut fields = entry.split_whitespace();
        let (mode, kind, object) = (fields.next(), fields.next(), fields.next());
        let (Some(mode), Some("blob"), Some(object)) = (mode, kind, object) else {
            return Err(refused(&format!("is not a file in commit {commit}")));
        };
        if mode == "120000" {
            return Err(refused(&format!("is a symbolic link in commit {commit}")));
        }
        let content = self
            .git()
            .run(&worktree.mirror, &["cat-file", "blob", object])
            .await?;
        let copy = dest.join(path);
        if let Some(parent) = copy.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        tokio::fs::write(&copy, content).await?;
        let bits = if mode == "100755" { 0o700 } else { 0o600 };
        let permissions = std::os::unix::fs::PermissionsExt::from_mode(bits);
        tokio::fs::set_permissions(&copy, permissions).await?;
        Ok(copy)
    }
}
