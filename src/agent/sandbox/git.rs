//! Running the `git` CLI for closer itself (never for the agent): scrubbed
//! environment, a deadline, and — for http(s) remotes — the installation
//! token passed to that one git process only.
//!
//! The token reaches git through a credential helper fed over a pipe:
//! closer writes `username=x-access-token` / `password=<token>` into a pipe
//! the git process inherits as descriptor 3, and the only helper configured
//! (`!f() { test "$1" = get && cat <&3; }; f`) hands it to git when the
//! remote asks. It is never in an environment variable (readable in
//! `/proc/<pid>/environ` for as long as the process lives), on a command
//! line, or in a config file, and it is redacted from any error text.
//! Output past the cap is an error (`Truncated`), never a silent cut.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use secrecy::{ExposeSecret, SecretString};

use crate::agent::process::{self, BaseEnv, ProcessSpec};

/// The most output closer reads from one git command (a diff of a huge
/// change). More is an error, never a silent cut: a diff, a status or a log
/// read in part would be judged as if it were whole.
pub const GIT_OUTPUT_CAP: usize = 64 * 1024 * 1024;

/// The oldest git closer runs: 2.41 is the first to read attributes from
/// `GIT_ATTR_SOURCE` in every command (2.40 taught only `check-attr
/// --source`), which keeps a repository's filters from running in closer's
/// own git and its attributes from changing what closer commits.
pub const MIN_GIT: (u32, u32) = (2, 41);

/// `git --version` of the git closer runs (the first on its `PATH`, as for
/// every git command), refused below [`MIN_GIT`].
pub fn check_version() -> Result<String, String> {
    let path = BaseEnv::from_process().path;
    let git = process::resolve_program("git", Some(&path));
    if !git.is_absolute() {
        return Err(format!("git is not in any directory of PATH ({path})"));
    }
    let mut command = std::process::Command::new(&git);
    command.arg("--version").env("LC_ALL", "C");
    let out = crate::agent::fork_lock::output(&mut command)
        .map_err(|e| format!("git ({}) cannot be run: {e}", git.display()))?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let version =
        parse_version(&text).ok_or_else(|| format!("cannot read git's version from {text:?}"))?;
    if version < MIN_GIT {
        return Err(format!(
            "{text}: closer needs git {}.{} or later (it reads no attributes from \
             the worktree, GIT_ATTR_SOURCE, so a repository's filters never run \
             outside the sandbox)",
            MIN_GIT.0, MIN_GIT.1
        ));
    }
    Ok(text)
}

/// `(major, minor)` of `git version 2.47.3` (or `2.39.5.windows.1`).
fn parse_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.strip_prefix("git version ")?.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// Git's empty tree (SHA-1; GitHub has no SHA-256 repositories), which
/// every git knows without having it stored: where closer's git reads
/// attributes from (`GIT_ATTR_SOURCE`, git 2.41 and later).
const EMPTY_TREE: &str = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

/// A git command that failed.
/// How many of its last lines of standard error a failed git command
/// keeps: enough for the rules GitHub lists when it declines a push (each
/// rule is followed by the commits that break it, one line each).
const FAILURE_LINES: usize = 40;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git {args} failed: {detail}")]
    Failed { args: String, detail: String },
    #[error("git {args} timed out")]
    TimedOut { args: String },
    #[error("could not run git: {0}")]
    Spawn(String),
    #[error(
        "git {args} printed more than closer reads ({cap} bytes): its output is not used cut short"
    )]
    Truncated { args: String, cap: usize },
    /// The worktree holds more than closer reads: a named failure instead
    /// of memory spent without bound (see `engine::artifacts`).
    #[error("the change is too large to check: {0}")]
    TooLarge(String),
}

/// How closer runs git: the base environment and a deadline per command.
#[derive(Debug, Clone)]
pub struct GitRunner {
    base: BaseEnv,
    timeout: Duration,
    output_cap: usize,
}

impl GitRunner {
    pub fn new(base: BaseEnv, timeout: Duration) -> Self {
        GitRunner {
            base,
            timeout,
            output_cap: GIT_OUTPUT_CAP,
        }
    }

    /// The same runner reading at most `cap` bytes of each command's output.
    pub fn with_output_cap(mut self, cap: usize) -> Self {
        self.output_cap = cap;
        self
    }

    /// `git <args>` in `cwd`; stdout on success.
    pub async fn run(&self, cwd: &Path, args: &[&str]) -> Result<String, GitError> {
        self.run_with(cwd, args, None).await
    }

    /// The environment of closer's git: no prompt, and only the
    /// repository's config counts.
    fn env(&self) -> BTreeMap<String, String> {
        let mut env = self.base.vars();
        env.insert("GIT_TERMINAL_PROMPT".into(), "0".into());
        env.insert("GIT_ASKPASS".into(), "true".into());
        // Only the repository's config counts, and no hook ever runs:
        // hooks are code, and the repository is writable by the agent.
        env.insert("GIT_CONFIG_NOSYSTEM".into(), "1".into());
        env.insert("GIT_CONFIG_GLOBAL".into(), "/dev/null".into());
        // No attributes from the worktree either: a filter or diff driver an
        // attribute names is a program, and a repository the agent nests in
        // the worktree brings a config of its own that the `-c` flags below
        // do not reach (git runs `status` inside it whenever it looks at the
        // outer one). Attributes are read from the empty tree instead, in
        // every git this one starts too; checkout and add both skip them, so
        // what is committed is what the agent wrote.
        env.insert("GIT_ATTR_SOURCE".into(), EMPTY_TREE.into());
        // No replace refs or grafts either: under `mode = "none"` the agent
        // can write the mirror, and `git replace <head> <other>` would make
        // the checks' checkout read a tree other than the one pushed.
        env.insert("GIT_NO_REPLACE_OBJECTS".into(), "1".into());
        env
    }

    /// `git <args>` in `cwd` with the token for an http(s) remote, if any.
    pub async fn run_with(
        &self,
        cwd: &Path,
        args: &[&str],
        token: Option<&SecretString>,
    ) -> Result<String, GitError> {
        let env = self.env();
        let fd3 = match token {
            Some(token) => {
                Some(credential_pipe(token).map_err(|e| GitError::Spawn(e.to_string()))?)
            }
            None => None,
        };
        // No hook and no fsmonitor program: both are code the repository's
        // config can name, and the agent can write that config. The
        // credential helpers are ours alone: the empty value clears any other.
        let mut argv = vec![
            "git".to_owned(),
            "-c".to_owned(),
            "core.hooksPath=/dev/null".to_owned(),
            "-c".to_owned(),
            "core.fsmonitor=false".to_owned(),
            "-c".to_owned(),
            "credential.helper=".to_owned(),
        ];
        if fd3.is_some() {
            argv.extend([
                "-c".to_owned(),
                format!("credential.helper={CREDENTIAL_HELPER}"),
            ]);
        }
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let spec = ProcessSpec {
            argv,
            cwd: cwd.to_path_buf(),
            env,
            stdin: None,
            timeout: self.timeout,
            max_output_bytes: self.output_cap,
            keep_end: false,
            jail: None,
            fd3,
        };
        let shown = args.join(" ");
        let output = process::run(&spec)
            .await
            .map_err(|e| GitError::Spawn(redact(&e.to_string(), token)))?;
        if output.timed_out {
            return Err(GitError::TimedOut { args: shown });
        }
        if !output.success() {
            let detail = redact(output.stderr.text.trim(), token);
            let detail: String = detail
                .lines()
                .rev()
                .take(FAILURE_LINES)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join(" | ");
            return Err(GitError::Failed {
                args: shown,
                detail: format!("exit {:?}: {detail}", output.exit_code),
            });
        }
        if output.stdout.truncated() {
            return Err(GitError::Truncated {
                args: shown,
                cap: self.output_cap,
            });
        }
        Ok(output.stdout.text)
    }
}

/// The credential helper: answers `get` with what descriptor 3 holds.
const CREDENTIAL_HELPER: &str = "!f() { test \"$1\" = get && cat <&3; }; f";

/// A pipe holding the credentials GitHub accepts for an installation token
/// over https (user `x-access-token`), written and closed: its read end,
/// for the git process to inherit as descriptor 3.
fn credential_pipe(token: &SecretString) -> std::io::Result<Arc<OwnedFd>> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills both descriptors; O_CLOEXEC keeps them out of
    // every other program (the child gets a duplicate as fd 3).
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both were just created and are owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let credentials = format!(
        "username=x-access-token\npassword={}\n",
        token.expose_secret()
    );
    // A few hundred bytes: far below the pipe's buffer, so this never blocks.
    std::fs::File::from(write).write_all(credentials.as_bytes())?;
    Ok(Arc::new(read))
}

/// Removes the token (raw or base64-wrapped) from a text.
fn redact(text: &str, token: Option<&SecretString>) -> String {
    let Some(token) = token else {
        return text.to_owned();
    };
    let raw = token.expose_secret();
    if raw.is_empty() {
        return text.to_owned();
    }
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{raw}"));
    text.replace(&basic, "***").replace(raw, "***")
}

/// Whether a remote URL takes the token (http/https); `file://` and local
/// paths are used as they are.
pub fn wants_token(url: &str) -> bool {
    url.starts_with("https://") || url.starts_with("http://")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gits_version_is_read_and_an_old_one_is_refused() {
        assert_eq!(parse_version("git version 2.47.3"), Some((2, 47)));
        assert_eq!(parse_version("git version 2.39.5.windows.1"), Some((2, 39)));
        assert_eq!(parse_version("2.47.3"), None);
        assert!((2, 40) < MIN_GIT && (2, 41) >= MIN_GIT && (3, 0) > MIN_GIT);
        let here = check_version().expect("this machine's git is recent enough");
        assert!(here.starts_with("git version"), "{here}");
    }

    #[test]
    fn redacts_raw_and_encoded_token() {
        let token = SecretString::from("ghs_abc123");
        let basic = base64::engine::general_purpose::STANDARD.encode("x-access-token:ghs_abc123");
        let text = format!("fatal: ghs_abc123 and {basic}");
        assert_eq!(redact(&text, Some(&token)), "fatal: *** and ***");
    }
}
