//! Real git repositories in temp dirs: a bare "origin" (reached by
//! `file://`) seeded with a small project, and a few git helpers.

use std::path::{Path, PathBuf};
use std::process::Command;

use closer::agent::process::BaseEnv;
use closer::agent::sandbox::{RepoSource, Sandbox, SandboxOptions, Worktree};
use tempfile::TempDir;

/// Runs git synchronously in `dir`; panics with its stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let mut command = Command::new("git");
    command
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "test")
        .env("GIT_AUTHOR_EMAIL", "test@example.com")
        .env("GIT_COMMITTER_NAME", "test")
        .env("GIT_COMMITTER_EMAIL", "test@example.com");
    // Apart from closer's copies of files it runs next (`fork_lock`).
    let out = closer::agent::fork_lock::output(&mut command).expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A bare origin repository with one commit on `main`.
pub struct Origin {
    pub dir: TempDir,
    pub bare: PathBuf,
    pub url: String,
}

impl Origin {
    /// An origin whose `main` holds `files`.
    pub fn with_files(files: &[(&str, &str)]) -> Origin {
        let dir = tempfile::tempdir().expect("temp dir");
        let bare = dir.path().join("origin.git");
        git(
            dir.path(),
            &[
                "init",
                "--quiet",
                "--bare",
                "--initial-branch=main",
                "origin.git",
            ],
        );
        let work = dir.path().join("seed");
        git(
            dir.path(),
            &["init", "--quiet", "--initial-branch=main", "seed"],
        );
        for (path, content) in files {
            let file = work.join(path);
            if let Some(parent) = file.parent() {
                std::fs::create_dir_all(parent).expect("mkdir");
            }
            std::fs::write(file, content).expect("write");
        }
        git(&work, &["add", "-A"]);
        git(&work, &["commit", "--quiet", "-m", "initial"]);
        git(
            &work,
            &[
                "push",
                "--quiet",
                bare.to_str().expect("utf-8 path"),
                "main",
            ],
        );
        let url = format!("file://{}", bare.display());
        Origin { dir, bare, url }
    }

    /// Replaces the repository at this origin's URL with another one,
    /// whose `main` holds `files` and shares no history with the old one
    /// (a repository deleted and another created under its name). The
    /// seed checkout keeps the old history: [`Origin::push_change`] is for
    /// the old one.
    pub fn start_over(&self, files: &[(&str, &str)]) {
        let other = Origin::with_files(files);
        std::fs::remove_dir_all(&self.bare).expect("remove the old repository");
        std::fs::rename(&other.bare, &self.bare).expect("move the new one in");
    }

    /// Adds a commit to `main` (someone else pushing meanwhile).
    pub fn push_change(&self, path: &str, content: &str) {
        let work = self.dir.path().join("seed");
        std::fs::write(work.join(path), content).expect("write");
        git(&work, &["commit", "--quiet", "-am", "upstream change"]);
        git(
            &work,
            &[
                "push",
                "--quiet",
                self.bare.to_str().expect("utf-8 path"),
                "main",
            ],
        );
    }

    /// Squash-merges `branch` into `main` as one commit, `subject`, as
    /// GitHub's "Squash and merge" does; the branch is left as it is.
    /// Answers the new commit's sha.
    pub fn squash_into_main(&self, branch: &str, subject: &str) -> String {
        let work = self.dir.path().join("seed");
        let bare = self.bare.to_str().expect("utf-8 path");
        git(&work, &["fetch", "--quiet", bare, branch]);
        git(&work, &["merge", "--quiet", "--squash", "FETCH_HEAD"]);
        git(&work, &["commit", "--quiet", "-m", subject]);
        git(&work, &["push", "--quiet", bare, "main"]);
        git(&work, &["rev-parse", "HEAD"]).trim().to_owned()
    }

    /// Pushes a commit by `author` to `branch` (which must exist), as a
    /// person helping on closer's pull request would; answers its sha.
    pub fn push_to_branch(&self, branch: &str, author: &str, path: &str, content: &str) -> String {
        let work = self
            .dir
            .path()
            .join(format!("helper-{}", fastrand::u32(..)));
        let bare = self.bare.to_str().expect("utf-8 path");
        let work_str = work.to_str().expect("utf-8 path");
        git(
            self.dir.path(),
            &["clone", "--quiet", "--branch", branch, bare, work_str],
        );
        if let Some(parent) = work.join(path).parent() {
            std::fs::create_dir_all(parent).expect("mkdir");
        }
        std::fs::write(work.join(path), content).expect("write");
        git(&work, &["add", "-A"]);
        let who = format!("user.name={author}");
        let mail = format!("user.email={author}@example.com");
        git(
            &work,
            &[
                "-c",
                &who,
                "-c",
                &mail,
                "commit",
                "--quiet",
                "-m",
                &format!("{author}: {path}"),
            ],
        );
        git(&work, &["push", "--quiet", "origin", branch]);
        git(&work, &["rev-parse", "HEAD"]).trim().to_owned()
    }

    /// Points `branch` at `sha`, as a person's forced push resetting it
    /// would (`git push --force origin <sha>:<branch>`).
    pub fn force_branch(&self, branch: &str, sha: &str) {
        git(
            &self.bare,
            &["update-ref", &format!("refs/heads/{branch}"), sha],
        );
    }

    /// Renames `from` to `to`, as renaming the default branch on GitHub
    /// does (the old name is gone).
    pub fn rename_branch(&self, from: &str, to: &str) {
        git(&self.bare, &["branch", "-m", from, to]);
    }

    /// Deletes `branch`, as a person deleting it on GitHub would.
    pub fn delete_branch(&self, branch: &str) {
        git(
            &self.bare,
            &["update-ref", "-d", &format!("refs/heads/{branch}")],
        );
    }

    /// The commits of `branch`, newest first, as `sha subject` lines.
    pub fn log(&self, branch: &str) -> Vec<String> {
        git(&self.bare, &["log", "--format=%H %s", branch])
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// The sha a branch of the origin points at, if it exists.
    pub fn branch_head(&self, branch: &str) -> Option<String> {
        let mut command = Command::new("git");
        command
            .args([
                "rev-parse",
                "--verify",
                "--quiet",
                &format!("refs/heads/{branch}"),
            ])
            .current_dir(&self.bare);
        let out = closer::agent::fork_lock::output(&mut command).expect("git runs");
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }
}

/// Every file under `dir` whose bytes contain `needle`.
pub fn files_containing(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(bytes) = std::fs::read(&path)
                && bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
            {
                found.push(path);
            }
        }
    }
    found
}

impl Origin {
    /// Where a run's repository comes from: this origin, no token, `main`.
    pub fn source(&self) -> RepoSource {
        RepoSource {
            url: self.url.clone(),
            token: None,
            default_branch: Some("main".into()),
            repository_id: None,
        }
    }
}

/// A sandbox on `data_dir`, laid out as the engine's workspace lays it out.
pub fn sandbox(data_dir: &Path) -> Sandbox {
    Sandbox::new(SandboxOptions {
        root: data_dir.join("sandbox"),
        base_env: BaseEnv::from_process(),
        git_timeout: std::time::Duration::from_secs(120),
        committer_name: "closer".into(),
        committer_email: "closer@localhost".into(),
    })
}

/// A sandbox on a data directory of its own, with issue 4's worktree
/// (`run`) after one commit, `first`, pushed to the origin's
/// `closer/issue-4`.
pub struct Pushed {
    pub origin: Origin,
    pub sandbox: Sandbox,
    pub source: RepoSource,
    pub wt: Worktree,
    /// Bind it (`data_dir: _data_dir`) to keep the directory.
    pub data_dir: TempDir,
}

/// See [`Pushed`].
pub async fn pushed_worktree(run: &str) -> Pushed {
    let origin = Origin::with_files(&[("calc.sh", "add() { echo 0; }\n")]);
    let data_dir = tempfile::tempdir().unwrap();
    let sandbox = sandbox(data_dir.path());
    let source = origin.source();
    let wt = sandbox.prepare(&source, 4, run, None).await.unwrap();
    std::fs::write(wt.path.join("first.txt"), "x\n").unwrap();
    sandbox.commit_changes(&wt, "first", "first").await.unwrap();
    sandbox
        .push(&wt, &source, None)
        .await
        .expect("the first push");
    Pushed {
        origin,
        sandbox,
        source,
        wt,
        data_dir,
    }
}
