//! Repositories the agent nests in its worktree, taken apart before
//! closer's git reads the worktree. A nested repository keeps a config and
//! attributes of its own (`.git/config`, `.git/info/attributes`) that
//! closer's `-c` flags and `GIT_ATTR_SOURCE` do not reach, and git runs
//! `status` inside a populated submodule when it compares the outer
//! worktree (`status`, `diff`): a filter named there would run in closer's
//! unconfined git. So each nested repository's `.git` is removed and its
//! files become the worktree's own. Since a process the agent left running
//! could put one back right after (decision 201), closer's git also keeps
//! out of them on its own: every `status` and `diff` of a worktree passes
//! `--ignore-submodules=dirty` on its command line (a `.gitmodules` in the
//! worktree overrides the same setting given as config; gitlinks added or
//! removed still show), and the commit's `add -A` leaves every gitlink out
//! of its pathspec (`commit.rs`). Listing them is safe: `ls-files` reads
//! no file's content, so it runs no filter.

use std::path::{Component, Path};

use super::Worktree;
use super::git::{GitError, GitRunner};

/// Nested repositories inside nested repositories are found round by
/// round; past this many rounds the worktree is refused.
const MAX_ROUNDS: usize = 8;

/// Removes the `.git` of every repository nested in `worktree` (tracked as
/// a gitlink, or untracked); answers the paths it took apart.
pub async fn unnest(git: &GitRunner, worktree: &Worktree) -> Result<Vec<String>, GitError> {
    let mut removed = Vec::new();
    for _ in 0..MAX_ROUNDS {
        let found = nested_repositories(git, worktree).await?;
        if found.is_empty() {
            return Ok(removed);
        }
        for path in found {
            remove_git(&worktree.path, &path).map_err(|e| {
                GitError::Spawn(format!(
                    "cannot take apart the nested repository {path}: {e}"
                ))
            })?;
            removed.push(path);
        }
    }
    Err(GitError::Spawn(format!(
        "repositories nested more than {MAX_ROUNDS} deep in the worktree"
    )))
}

/// Gitlinks in the index and untracked directories git sees as
/// repositories (listed with a trailing `/`), whose `.git` exists.
async fn nested_repositories(
    git: &GitRunner,
    worktree: &Worktree,
) -> Result<Vec<String>, GitError> {
    let gitlinks = gitlinks(git, worktree).await?;
    let untracked = worktree
        .git(git, &["ls-files", "--others", "--exclude-standard", "-z"])
        .await?;
    let repositories = untracked
        .split('\0')
        .filter_map(|entry| entry.strip_suffix('/'))
        .map(str::to_owned);
    Ok(gitlinks
        .into_iter()
        .chain(repositories)
        .filter(|path| std::fs::symlink_metadata(worktree.path.join(path).join(".git")).is_ok())
        .collect())
}

/// The paths of the worktree's index that are gitlinks (submodules).
pub(super) async fn gitlinks(
    git: &GitRunner,
    worktree: &Worktree,
) -> Result<Vec<String>, GitError> {
    let staged = worktree.git(git, &["ls-files", "--stage", "-z"]).await?;
    Ok(staged
        .split('\0')
        .filter_map(|entry| entry.strip_prefix("160000 "))
        .filter_map(|rest| rest.split_once('\t').map(|(_, path)| path.to_owned()))
        .collect())
}

/// Removes `root/path/.git` (a directory, a `gitdir:` file or a link),
/// reached through real directories only, each opened from the one before
/// and never through a link: a link on the way is refused, and a
/// directory swapped for one meanwhile (a process the agent left running)
/// is not followed, so nothing outside the worktree is removed.
fn remove_git(root: &Path, path: &str) -> std::io::Result<()> {
    use rustix::fs::{CWD, Mode, OFlags};
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut at = rustix::fs::openat(CWD, root, flags, Mode::empty())?;
    for part in Path::new(path).components() {
        let Component::Normal(name) = part else {
            return Err(std::io::Error::other("not a path inside the worktree"));
        };
        at = rustix::fs::openat(&at, name, flags, Mode::empty()).map_err(|e| match e {
            rustix::io::Errno::NOTDIR | rustix::io::Errno::LOOP => {
                std::io::Error::other("a symbolic link or file on the way")
            }
            e => e.into(),
        })?;
    }
    super::remove::remove_at(&at, c".git")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_on_the_way_is_refused_and_a_real_directory_taken_apart() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(outside.path().join(".git")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.path().join("link")).unwrap();
        let err = remove_git(root.path(), "link").unwrap_err();
        assert!(err.to_string().contains("on the way"), "{err}");
        assert!(outside.path().join(".git").exists());
        // The control: a real directory's `.git` is removed.
        std::fs::create_dir_all(root.path().join("real/.git/refs")).unwrap();
        remove_git(root.path(), "real").unwrap();
        assert!(!root.path().join("real/.git").exists());
        assert!(root.path().join("real").exists());
    }
}
