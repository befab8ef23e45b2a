//! A file as one commit has it, copied into a directory closer owns: how
//! the `custom` completion handler is read (from the base commit's objects,
//! outside the worktree, so an agent that rewrites the script in its
//! worktree changes nothing about who decides), and how the head's test
//! files reach the reproduction's checkout (byte for byte, and only when
//! the file is exactly the commit's blob). Paths are literal (no pathspec
//! magic); a path that leaves the repository, a symbolic link and anything
//! that is not a file are refused.

use std::path::{Component, Path, PathBuf};

use super::{Sandbox, SandboxError, Worktree};
use crate::agent::fork_lock;

/// One entry of a commit's tree: `ls-tree`'s mode and object.
struct TreeEntry {
    mode: String,
    object: String,
}

impl Sandbox {
    /// Copies `path` as it is in the worktree's base commit to `dest/<path>`,
    /// executable when the base commit has it executable; answers the copy.
    pub async fn copy_from_base(
        &self,
        worktree: &Worktree,
        path: &str,
        dest: &Path,
    ) -> Result<PathBuf, SandboxError> {
        let refused = |why: &str| SandboxError::BaseFile(format!("`{path}` {why}"));
        if !plain(path) {
            return Err(refused("is not a relative path inside the repository"));
        }
        let Some(entry) = self
            .tree_entry(worktree, &worktree.base_commit, path)
            .await?
        else {
            return Err(refused("is not a file in the base commit"));
        };
        if entry.mode == "120000" {
            return Err(refused("is a symbolic link in the base commit"));
        }
        let content = self
            .git()
            .run(&worktree.mirror, &["cat-file", "blob", &entry.object])
            .await?;
        let copy = dest.join(path);
        if let Some(parent) = copy.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        let bits = if entry.mode == "100755" { 0o700 } else { 0o600 };
        fork_lock::write_file(copy.clone(), content.into_bytes(), bits).await?;
        Ok(copy)
    }

    /// The object id of the regular file `path` is in `commit`; `None`
    /// when the commit has none there (deleted, a symbolic link, a
    /// directory, a submodule) or the path is not a plain relative one.
    pub async fn committed_blob(
        &self,
        worktree: &Worktree,
        commit: &str,
        path: &str,
    ) -> Result<Option<String>, SandboxError> {
        if !plain(path) {
            return Ok(None);
        }
        let entry = self.tree_entry(worktree, commit, path).await?;
        Ok(entry
            .filter(|e| matches!(e.mode.as_str(), "100644" | "100755"))
            .map(|e| e.object))
    }

    /// The blob (a file or a link) at the literal `path` in `commit`.
    async fn tree_entry(
        &self,
        worktree: &Worktree,
        commit: &str,
        path: &str,
    ) -> Result<Option<TreeEntry>, SandboxError> {
        let listing = self
            .git()
            .run(
                &worktree.mirror,
                &["--literal-pathspecs", "ls-tree", commit, "--", path],
            )
            .await?;
        // `<mode> <type> <object>\t<path>`
        let entry = listing.lines().next().unwrap_or_default();
        let mut fields = entry.split_whitespace();
        Ok(match (fields.next(), fields.next(), fields.next()) {
            (Some(mode), Some("blob"), Some(object)) => Some(TreeEntry {
                mode: mode.to_owned(),
                object: object.to_owned(),
            }),
            _ => None,
        })
    }

    /// Copies `path` from `worktree` to `dest/<path>` byte for byte, when
    /// the file there is exactly `blob` (as `git hash-object` reads it, no
    /// filter applied) and neither side has a symbolic link on its way.
    /// Whether it was copied.
    pub async fn copy_committed(
        &self,
        worktree: &Worktree,
        path: &str,
        blob: &str,
        dest: &Path,
    ) -> Result<bool, SandboxError> {
        let source = worktree.path.join(path);
        if !plain(path)
            || !regular_file_beneath(&worktree.path, path)
            || !no_link_beneath(dest, path)
        {
            return Ok(false);
        }
        let source_str = source.display().to_string();
        let hashed = self
            .git()
            .run(
                &worktree.mirror,
                &["hash-object", "--no-filters", "--", &source_str],
            )
            .await?;
        if hashed.trim() != blob {
            return Ok(false);
        }
        let target = dest.join(path);
        if let Some(parent) = target.parent() {
            tokio::fs::create_dir_all(parent).await?;
        }
        // Only a file that can be executed needs to be written apart from
        // forks; a large fixture must not hold every spawn up meanwhile.
        let executable = {
            use std::os::unix::fs::PermissionsExt as _;
            tokio::fs::symlink_metadata(&source)
                .await?
                .permissions()
                .mode()
                & 0o111
                != 0
        };
        match executable {
            true => fork_lock::copy_file(&source, &target).await?,
            false => tokio::fs::copy(&source, &target).await?,
        };
        Ok(true)
    }
}

/// A relative path of plain components.
fn plain(path: &str) -> bool {
    !path.is_empty()
        && Path::new(path)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
}

/// Whether `root/relative` is a regular file reached through directories
/// only: no component on the way is a symbolic link.
pub fn regular_file_beneath(root: &Path, relative: &str) -> bool {
    let mut at = root.to_path_buf();
    let mut parts = Path::new(relative).components().peekable();
    while let Some(part) = parts.next() {
        let Component::Normal(name) = part else {
            return false;
        };
        at.push(name);
        let Ok(meta) = std::fs::symlink_metadata(&at) else {
            return false;
        };
        let wanted = match parts.peek() {
            Some(_) => meta.file_type().is_dir(),
            None => meta.file_type().is_file(),
        };
        if !wanted {
            return false;
        }
    }
    at != root
}

/// Whether writing `root/relative` follows no symbolic link: none of its
/// components that exist is one (a checkout may hold links anywhere).
pub fn no_link_beneath(root: &Path, relative: &str) -> bool {
    let mut at = root.to_path_buf();
    for part in Path::new(relative).components() {
        let Component::Normal(name) = part else {
            return false;
        };
        at.push(name);
        match std::fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => return false,
            Ok(_) => {}
            Err(_) => return true,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_anywhere_on_the_way_is_refused_and_plain_paths_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("wt");
        std::fs::create_dir_all(root.join("tests")).unwrap();
        std::fs::write(root.join("tests/t.py"), "x").unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("environ"), "SECRET").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("linked")).unwrap();
        std::os::unix::fs::symlink(outside.join("environ"), root.join("tests/l.py")).unwrap();

        // The control: the same kind of path without a link is a file.
        assert!(regular_file_beneath(&root, "tests/t.py"));
        assert!(
            std::fs::metadata(root.join("linked/environ"))
                .unwrap()
                .is_file()
        );
        assert!(
            !regular_file_beneath(&root, "linked/environ"),
            "a linked directory"
        );
        assert!(!regular_file_beneath(&root, "tests/l.py"), "a linked file");
        assert!(!regular_file_beneath(&root, "tests"), "a directory");
        assert!(!regular_file_beneath(&root, "../outside/environ"));
        assert!(!regular_file_beneath(&root, "tests/missing.py"));

        assert!(no_link_beneath(&root, "tests/t.py"));
        assert!(no_link_beneath(&root, "new/dir/t.py"), "nothing there yet");
        assert!(!no_link_beneath(&root, "linked/new.py"));
        assert!(!no_link_beneath(&root, "tests/l.py"));
        assert!(!no_link_beneath(&root, "/etc/passwd"));
    }
}
