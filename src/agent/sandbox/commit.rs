//! closer commits for the agent.
//!
//! At the end of each iteration, whatever the agent left changed in the
//! worktree is committed by closer, so an agent needs no write access to git
//! metadata and "forgot to commit" is not a failure. Its subject closes no
//! issue ([`crate::github::closing`]). Build output (caches,
//! virtual environments, `target/`, `node_modules/` …) never lands on the
//! branch: closer's own exclude list applies to this commit on top of the
//! repository's `.gitignore`. Nothing the commit leaves out is seen by the
//! goals either: they run on a clean checkout of it (`engine::run::checkout`).

use super::Worktree;
use super::git::{GitError, GitRunner};
use crate::github::closing::neutralize_closing_keywords;

/// Build output and tool caches closer never commits, whatever the
/// repository's `.gitignore` says (it may say nothing).
pub const BUILD_OUTPUT: &[&str] = &[
    "__pycache__/",
    "*.py[cod]",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".tox/",
    ".venv/",
    "*.egg-info/",
    ".coverage",
    "node_modules/",
    ".npm/",
    ".nyc_output/",
    "target/",
    ".gradle/",
    ".cache/",
];

/// `git add -A`, kept out of every submodule: git runs `status` inside a
/// populated one, and a process the agent left running may have put its
/// `.git` back since the take-apart (decision 201). A gitlink whose
/// directory is there is left out of the pathspec (its entry stays, as
/// `add -A` leaves a gitlink whose repository is gone). One whose directory
/// is not (removed, or a file now) is taken out of the index first: its
/// removal is staged, whatever is at its path now is added like any new
/// file, and should a repository appear there meanwhile, `add -A` takes it
/// for a new one, which it records without going into it.
async fn add_all(git: &GitRunner, worktree: &Worktree, excludes: &str) -> Result<(), GitError> {
    let gitlinks = super::nested::gitlinks(git, worktree).await?;
    let (present, gone): (Vec<String>, Vec<String>) = gitlinks.into_iter().partition(|path| {
        std::fs::symlink_metadata(worktree.path.join(path)).is_ok_and(|m| m.is_dir())
    });
    if !gone.is_empty() {
        let mut args = vec!["update-index", "--force-remove", "--"];
        args.extend(gone.iter().map(String::as_str));
        worktree.git(git, &args).await?;
    }
    let left_out: Vec<String> = present
        .iter()
        .map(|path| format!(":(top,literal,exclude){path}"))
        .collect();
    let mut args = vec!["-c", excludes, "add", "-A", "--", "."];
    args.extend(left_out.iter().map(String::as_str));
    worktree.git(git, &args).await?;
    Ok(())
}

/// The longest commit subject closer writes.
const MAX_SUBJECT_CHARS: usize = 72;

/// Who the commit is from.
#[derive(Debug, Clone)]
pub struct Author {
    pub name: String,
    pub email: String,
}

/// Commits every change in `worktree` (tracked or new, minus build output)
/// with `summary`'s first line as the subject. Returns the new commit, or
/// `None` when the agent left nothing to commit.
pub async fn commit_changes(
    git: &GitRunner,
    worktree: &Worktree,
    author: &Author,
    summary: &str,
    fallback_subject: &str,
) -> Result<Option<String>, GitError> {
    let exclude = exclude_file(worktree).await?;
    let excludes = format!("core.excludesFile={}", exclude.display());
    super::nested::unnest(git, worktree).await?;
    add_all(git, worktree, &excludes).await?;
    let staged = worktree
        .git(
            git,
            &[
                "diff",
                "--cached",
                "--name-only",
                "--no-renames",
                "--no-ext-diff",
            ],
        )
        .await?;
    if staged.trim().is_empty() {
        return Ok(None);
    }
    // The subject lands on the default branch with the merge: a closing
    // keyword in it (the agent's, or the issue title's) would close an issue.
    let subject = neutralize_closing_keywords(
        &subject(summary).unwrap_or_else(|| fallback_subject.to_owned()),
    );
    let who = format!("{} <{}>", author.name, author.email);
    let name = format!("user.name={}", author.name);
    let email = format!("user.email={}", author.email);
    worktree
        .git(
            git,
            &[
                "-c",
                &name,
                "-c",
                &email,
                "-c",
                "commit.gpgsign=false",
                "commit",
                "--quiet",
                "--no-verify",
                "--author",
                &who,
                "-m",
                &subject,
            ],
        )
        .await?;
    let head = worktree
        .git(git, &["rev-parse", "--verify", "HEAD"])
        .await?;
    Ok(Some(head.trim().to_owned()))
}

/// The first non-empty line of the agent's summary, shortened to a subject.
fn subject(summary: &str) -> Option<String> {
    let line = summary
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())?;
    if line.chars().count() <= MAX_SUBJECT_CHARS {
        return Some(line.to_owned());
    }
    let cut: String = line.chars().take(MAX_SUBJECT_CHARS - 1).collect();
    Some(format!("{}…", cut.trim_end()))
}

/// closer's exclude list, written next to the worktree's administrative
/// directory (closer's, not the agent's): what is never committed is no
/// artifact either.
pub async fn exclude_file(worktree: &Worktree) -> Result<std::path::PathBuf, GitError> {
    let path = worktree.mirror.join("closer-exclude");
    let content = BUILD_OUTPUT.join("\n") + "\n";
    if tokio::fs::read_to_string(&path).await.ok().as_deref() != Some(content.as_str()) {
        // Written aside and renamed: a git command of another run reading
        // it meanwhile (without the mirror's lock) never sees half of it.
        let temp = worktree
            .mirror
            .join(format!("closer-exclude.{}", std::process::id()));
        let written = async {
            tokio::fs::write(&temp, content).await?;
            tokio::fs::rename(&temp, &path).await
        };
        written
            .await
            .map_err(|e| GitError::Spawn(format!("writing {}: {e}", path.display())))?;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_subject_is_the_first_line_of_the_summary() {
        assert_eq!(
            subject("\n## Fixed add()\n\nDetails").as_deref(),
            Some("Fixed add()")
        );
        assert_eq!(subject("  \n"), None);
        let long = subject(&"x".repeat(100)).unwrap();
        assert_eq!(long.chars().count(), MAX_SUBJECT_CHARS);
        assert!(long.ends_with('…'));
    }
}
