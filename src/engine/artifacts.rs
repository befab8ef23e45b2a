//! What an iteration physically produced: commits since the run's
//! base, changed files with line counts against the base, untracked files,
//! the branch — and which of those the task type expects.
//!
//! Read from git only; what the agent says it did is never consulted.
//! Everything read is bounded (the diff, the added lines, the untracked
//! files' number and bytes) and symbolic links are never followed: a
//! worktree past a bound is a named failure, not memory without end.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::diff::{AddedLine, parse_added};
use crate::agent::sandbox::Worktree;
use crate::agent::sandbox::commit::exclude_file;
use crate::agent::sandbox::git::{GIT_OUTPUT_CAP, GitError, GitRunner};
use crate::model::TaskType;

const MIB: usize = 1024 * 1024;
// Bounds on what reading a worktree holds in memory; past any of them the
// reading fails, named (`GitError::TooLarge`), instead of growing.
/// Untracked files larger than this are listed but not read.
const MAX_UNTRACKED_READ: u64 = MIB as u64;
/// Bytes read from untracked files, all together.
const MAX_UNTRACKED_BYTES: u64 = 32 * MIB as u64;
/// Untracked files listed.
const MAX_UNTRACKED_FILES: usize = 10_000;
/// The diff against the base (`--binary`), in bytes.
const MAX_DIFF_BYTES: usize = 32 * MIB;
/// Added lines kept for the checks; each costs a copy of its path and text.
const MAX_ADDED_LINES: usize = 200_000;

/// A commit made in the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Commit {
    pub sha: String,
    /// The subject line.
    pub message: String,
}

/// A file that differs from the base commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChangedFile {
    pub path: String,
    /// Lines added / deleted (0 for binary files).
    pub added: u64,
    pub deleted: u64,
    /// The file did not exist at the base commit.
    pub new: bool,
}

/// An iteration's artifacts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Artifacts {
    pub base_commit: String,
    pub head: String,
    /// The checked-out branch (`None` when detached).
    pub branch: Option<String>,
    /// Oldest first.
    pub commits: Vec<Commit>,
    /// Tracked files, committed or not, against the base.
    pub changed_files: Vec<ChangedFile>,
    /// Files git does not track and does not ignore (`new` is always true).
    pub untracked: Vec<ChangedFile>,
    /// A hash of the whole change (diff against base + untracked contents):
    /// equal hashes mean the iteration changed nothing.
    pub diff_hash: String,
}

impl Artifacts {
    /// Changed and untracked files.
    pub fn all_files(&self) -> impl Iterator<Item = &ChangedFile> {
        self.changed_files.iter().chain(self.untracked.iter())
    }

    /// Lines added plus deleted, untracked files included.
    pub fn changed_lines(&self) -> u64 {
        self.all_files().map(|f| f.added + f.deleted).sum()
    }
}

/// A kind of artifact a task type expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactKind {
    Commit,
    Branch,
}

impl ArtifactKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ArtifactKind::Commit => "commit",
            ArtifactKind::Branch => "branch",
        }
    }
}

/// The artifacts a task type must leave.
pub fn expected(task: TaskType) -> &'static [ArtifactKind] {
    match task {
        TaskType::Feature | TaskType::Bug | TaskType::Refactor => {
            &[ArtifactKind::Commit, ArtifactKind::Branch]
        }
        TaskType::Docs | TaskType::Test => &[ArtifactKind::Commit],
        TaskType::ReadInfo | TaskType::Report => &[],
    }
}

/// Expected artifacts that are not there. A branch counts when the run's
/// branch is checked out and ahead of the base.
pub fn missing(task: TaskType, artifacts: &Artifacts, run_branch: &str) -> Vec<ArtifactKind> {
    expected(task)
        .iter()
        .copied()
        .filter(|kind| match kind {
            ArtifactKind::Commit => artifacts.commits.is_empty(),
            ArtifactKind::Branch => {
                artifacts.branch.as_deref() != Some(run_branch)
                    || artifacts.head == artifacts.base_commit
            }
        })
        .collect()
}

/// Artifacts plus the added lines (for the secret scanner; not stored).
#[derive(Debug, Clone)]
pub struct Collected {
    pub artifacts: Artifacts,
    pub added_lines: Vec<AddedLine>,
}

/// Reads the worktree's state against its base commit.
pub async fn collect(git: &GitRunner, worktree: &Worktree) -> Result<Collected, GitError> {
    // A repository the agent (or, for a checkout, a goal) nested is taken
    // apart first.
    crate::agent::sandbox::nested::unnest(git, worktree).await?;
    let base = worktree.base_commit.as_str();
    let head = worktree
        .git(git, &["rev-parse", "HEAD"])
        .await?
        .trim()
        .to_owned();
    let branch = worktree
        .git(git, &["symbolic-ref", "--quiet", "--short", "HEAD"])
        .await
        .ok()
        .map(|b| b.trim().to_owned())
        .filter(|b| !b.is_empty());
    let range = format!("{base}..HEAD");
    let log = worktree
        .git(git, &["log", "--reverse", "--format=%H%x00%s", &range])
        .await?;
    let commits = log
        .lines()
        .filter_map(|l| l.split_once('\0'))
        .map(|(sha, message)| Commit {
            sha: sha.to_owned(),
            message: message.to_owned(),
        })
        .collect();
    let changed_files = changed_files(git, worktree, base).await?;
    let diff = diff_against_base(git, worktree, base).await?;
    let mut hasher = Sha256::new();
    hasher.update(diff.as_bytes());
    let mut added_lines = parse_added(&diff, MAX_ADDED_LINES).map_err(|_| too_many_lines())?;
    drop(diff);
    let untracked = untracked_files(git, worktree, &mut hasher, &mut added_lines).await?;
    Ok(Collected {
        artifacts: Artifacts {
            base_commit: base.to_owned(),
            head,
            branch,
            commits,
            changed_files,
            untracked,
            diff_hash: hex::encode(&hasher.finalize()[..8]),
        },
        added_lines,
    })
}

async fn changed_files(
    git: &GitRunner,
    worktree: &Worktree,
    base: &str,
) -> Result<Vec<ChangedFile>, GitError> {
    let numstat = worktree
        .git(
            git,
            &[
                "diff",
                "--numstat",
                "--ignore-submodules=dirty",
                "--no-renames",
                "--no-textconv",
                "--no-ext-diff",
                "-z",
                base,
                "--",
            ],
        )
        .await?;
    let status = worktree
        .git(
            git,
            &[
                "diff",
                "--name-status",
                "--ignore-submodules=dirty",
                "--no-renames",
                "--no-ext-diff",
                "-z",
                base,
                "--",
            ],
        )
        .await?;
    let mut new_files = std::collections::HashSet::new();
    let mut fields = status.split('\0');
    while let (Some(code), Some(path)) = (fields.next(), fields.next()) {
        if code == "A" {
            new_files.insert(path.to_owned());
        }
    }
    Ok(numstat
        .split('\0')
        .filter_map(|entry| {
            let mut parts = entry.splitn(3, '\t');
            let (added, deleted, path) = (parts.next()?, parts.next()?, parts.next()?);
            Some(ChangedFile {
                path: path.to_owned(),
                added: added.parse().unwrap_or(0),
                deleted: deleted.parse().unwrap_or(0),
                new: new_files.contains(path),
            })
        })
        .collect())
}

/// `git diff` against the base, refused when longer than [`MAX_DIFF_BYTES`]
/// (the git runner cuts longer output, so a cut diff is refused too).
async fn diff_against_base(
    git: &GitRunner,
    worktree: &Worktree,
    base: &str,
) -> Result<String, GitError> {
    let args = [
        "diff",
        "--no-color",
        "--ignore-submodules=dirty",
        "--no-ext-diff",
        "--no-textconv",
        "--no-renames",
        "--binary",
        base,
        "--",
    ];
    let diff = worktree.git(git, &args).await?;
    if diff.len() > MAX_DIFF_BYTES {
        return Err(GitError::TooLarge(format!(
            "the diff against the base is over {} MiB",
            MAX_DIFF_BYTES / MIB
        )));
    }
    Ok(diff)
}

fn too_many_lines() -> GitError {
    GitError::TooLarge(format!("more than {MAX_ADDED_LINES} added lines"))
}

/// The untracked files (not ignored), their contents hashed into `hasher`
/// and their lines appended to `added`, within the bounds above.
async fn untracked_files(
    git: &GitRunner,
    worktree: &Worktree,
    hasher: &mut Sha256,
    added: &mut Vec<AddedLine>,
) -> Result<Vec<ChangedFile>, GitError> {
    // With closer's own exclude list: build output closer never commits
    // (`tests/node_modules/`, say) is no artifact of the agent's work.
    let exclude = exclude_file(worktree).await?;
    let excludes = format!("core.excludesFile={}", exclude.display());
    let listed = worktree
        .git(
            git,
            &[
                "-c",
                &excludes,
                "ls-files",
                "--others",
                "--exclude-standard",
                "-z",
            ],
        )
        .await?;
    let paths: Vec<&str> = listed.split('\0').filter(|p| !p.is_empty()).collect();
    if paths.len() > MAX_UNTRACKED_FILES || listed.len() >= GIT_OUTPUT_CAP {
        return Err(GitError::TooLarge(format!(
            "{} untracked files (at most {MAX_UNTRACKED_FILES} are read)",
            paths.len()
        )));
    }
    let mut budget = MAX_UNTRACKED_BYTES;
    let mut untracked = Vec::with_capacity(paths.len());
    for path in paths {
        let file = read_untracked(&worktree.path.join(path), &mut budget).await?;
        hasher.update(path.as_bytes());
        hasher.update([0u8]);
        hasher.update(file.fingerprint);
        for (i, text) in file.text.lines().enumerate() {
            if added.len() == MAX_ADDED_LINES {
                return Err(too_many_lines());
            }
            added.push(AddedLine {
                path: path.to_owned(),
                line: u32::try_from(i + 1).unwrap_or(u32::MAX),
                text: text.to_owned(),
            });
        }
        untracked.push(ChangedFile {
            path: path.to_owned(),
            added: file.lines,
            deleted: 0,
            new: true,
        });
    }
    Ok(untracked)
}

/// What was learnt of one untracked file.
struct Untracked {
    lines: u64,
    /// The text, when it was read (empty for a binary, large or special
    /// file, and for a symbolic link, which is never followed).
    text: String,
    /// Changes when the file does: its content's hash, or for what is not
    /// read, its link target or its size and time.
    fingerprint: [u8; 32],
}

/// Reads one untracked file of at most [`MAX_UNTRACKED_READ`] bytes,
/// charging `budget`. A symbolic link is not followed (its target could be
/// any file closer can read); a larger file is listed, not read.
async fn read_untracked(path: &Path, budget: &mut u64) -> Result<Untracked, GitError> {
    let unread = |fingerprint: &[u8]| Untracked {
        lines: 0,
        text: String::new(),
        fingerprint: Sha256::digest(fingerprint).into(),
    };
    let Ok(meta) = tokio::fs::symlink_metadata(path).await else {
        return Ok(unread(b"gone"));
    };
    if meta.file_type().is_symlink() {
        let target = tokio::fs::read_link(path).await.unwrap_or_default();
        return Ok(unread(format!("symlink {}", target.display()).as_bytes()));
    }
    if !meta.is_file() || meta.len() > MAX_UNTRACKED_READ {
        let modified = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok());
        return Ok(unread(format!("{} {modified:?}", meta.len()).as_bytes()));
    }
    if meta.len() > *budget {
        return Err(GitError::TooLarge(format!(
            "untracked files over {} MiB together",
            MAX_UNTRACKED_BYTES / MIB as u64
        )));
    }
    let Ok(bytes) = read_no_follow(path).await else {
        return Ok(unread(b"unreadable"));
    };
    *budget = budget.saturating_sub(bytes.len() as u64);
    let fingerprint = Sha256::digest(&bytes).into();
    if bytes.contains(&0) {
        return Ok(Untracked {
            lines: 0,
            text: String::new(),
            fingerprint,
        });
    }
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Ok(Untracked {
        lines: text.lines().count() as u64,
        text,
        fingerprint,
    })
}

/// The file's first [`MAX_UNTRACKED_READ`] bytes, opened without following
/// a symbolic link put in its place since it was looked at.
async fn read_no_follow(path: &Path) -> std::io::Result<Vec<u8>> {
    use tokio::io::AsyncReadExt;
    let file = tokio::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .await?;
    let mut bytes = Vec::new();
    file.take(MAX_UNTRACKED_READ)
        .read_to_end(&mut bytes)
        .await?;
    Ok(bytes)
}
