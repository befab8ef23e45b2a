//! What an iteration physically produced: commits since the run's
//! base, changed files with line counts against the base, untracked files,
//! the branch — and which of those the task type expects.
//!
//! Read from git only; what the agent says it did is never consulted.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::diff::{AddedLine, parse_added};
use crate::agent::sandbox::Worktree;
use crate::agent::sandbox::git::{GitError, GitRunner};
use crate::model::TaskType;

/// Untracked files larger than this are listed but not read.
const MAX_UNTRACKED_READ: u64 = 1024 * 1024;

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
    let dir = worktree.path.as_path();
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
    let diff = worktree
        .git(
            git,
            &[
                "diff",
                "--no-color",
                "--no-ext-diff",
                "--no-textconv",
                "--no-renames",
                "--binary",
                base,
                "--",
            ],
        )
        .await?;
    let mut added_lines = parse_added(&diff);
    let mut hasher = Sha256::new();
    hasher.update(diff.as_bytes());
    let listed = worktree
        .git(git, &["ls-files", "--others", "--exclude-standard", "-z"])
        .await?;
    let mut untracked = Vec::new();
    for path in listed.split('\0').filter(|p| !p.is_empty()) {
        let (lines, content) = read_untracked(&dir.join(path)).await;
        hasher.update(path.as_bytes());
        hasher.update([0u8]);
        hasher.update(Sha256::digest(content.as_bytes()));
        added_lines.extend(content.lines().enumerate().map(|(i, text)| AddedLine {
            path: path.to_owned(),
            line: u32::try_from(i + 1).unwrap_or(u32::MAX),
            text: text.to_owned(),
        }));
        untracked.push(ChangedFile {
            path: path.to_owned(),
            added: lines,
            deleted: 0,
            new: true,
        });
    }
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

/// Line count and text of an untracked file (empty text when binary or large).
async fn read_untracked(path: &Path) -> (u64, String) {
    let Ok(meta) = tokio::fs::metadata(path).await else {
        return (0, String::new());
    };
    if !meta.is_file() || meta.len() > MAX_UNTRACKED_READ {
        return (0, String::new());
    }
    match tokio::fs::read(path).await {
        Ok(bytes) if !bytes.contains(&0) => {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            (text.lines().count() as u64, text)
        }
        _ => (0, String::new()),
    }
}
