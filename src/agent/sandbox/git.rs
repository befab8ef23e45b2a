//! Running the `git` CLI for closer itself (never for the agent): scrubbed
//! environment, a deadline, and — for http(s) remotes — the installation
//! token passed to that one git process only.
//!
//! The token travels as `http.extraHeader` through `GIT_CONFIG_COUNT` /
//! `GIT_CONFIG_KEY_0` / `GIT_CONFIG_VALUE_0` in the environment of the one git
//! process that talks to the remote: not on the command line (`ps`), never in
//! a config file, and redacted from any error text.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use base64::Engine;
use secrecy::{ExposeSecret, SecretString};

use crate::agent::process::{self, BaseEnv, ProcessSpec};

/// Git output larger than this is cut (a diff of a huge change); readers
/// that must see all of it refuse output this long (`engine::artifacts`).
pub const GIT_OUTPUT_CAP: usize = 64 * 1024 * 1024;

/// A git command that failed.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("git {args} failed: {detail}")]
    Failed { args: String, detail: String },
    #[error("git {args} timed out")]
    TimedOut { args: String },
    #[error("could not run git: {0}")]
    Spawn(String),
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
}

impl GitRunner {
    pub fn new(base: BaseEnv, timeout: Duration) -> Self {
        GitRunner { base, timeout }
    }

    /// `git <args>` in `cwd`; stdout on success.
    pub async fn run(&self, cwd: &Path, args: &[&str]) -> Result<String, GitError> {
        self.run_with(cwd, args, None).await
    }

    /// `git <args>` in `cwd` with the token for an http(s) remote, if any.
    pub async fn run_with(
        &self,
        cwd: &Path,
        args: &[&str],
        token: Option<&SecretString>,
    ) -> Result<String, GitError> {
        let mut env = self.base.vars();
        env.insert("GIT_TERMINAL_PROMPT".into(), "0".into());
        env.insert("GIT_ASKPASS".into(), "true".into());
        // Only the repository's config counts, and no hook ever runs:
        // hooks are code, and the repository is writable by the agent.
        env.insert("GIT_CONFIG_NOSYSTEM".into(), "1".into());
        env.insert("GIT_CONFIG_GLOBAL".into(), "/dev/null".into());
        if let Some(token) = token {
            add_auth_header(&mut env, token);
        }
        // No hook and no fsmonitor program: both are code the repository's
        // config can name, and the agent can write that config.
        let mut argv = vec![
            "git".to_owned(),
            "-c".to_owned(),
            "core.hooksPath=/dev/null".to_owned(),
            "-c".to_owned(),
            "core.fsmonitor=false".to_owned(),
        ];
        argv.extend(args.iter().map(|a| (*a).to_owned()));
        let spec = ProcessSpec {
            argv,
            cwd: cwd.to_path_buf(),
            env,
            stdin: None,
            timeout: self.timeout,
            max_output_bytes: GIT_OUTPUT_CAP,
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
                .take(5)
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
        Ok(output.stdout.text)
    }
}

/// The `Authorization` header GitHub accepts for an installation token over
/// https: Basic with user `x-access-token`.
fn add_auth_header(env: &mut BTreeMap<String, String>, token: &SecretString) {
    let basic = base64::engine::general_purpose::STANDARD
        .encode(format!("x-access-token:{}", token.expose_secret()));
    env.insert("GIT_CONFIG_COUNT".into(), "1".into());
    env.insert("GIT_CONFIG_KEY_0".into(), "http.extraHeader".into());
    env.insert(
        "GIT_CONFIG_VALUE_0".into(),
        format!("Authorization: Basic {basic}"),
    );
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
    fn redacts_raw_and_encoded_token() {
        let token = SecretString::from("ghs_abc123");
        let basic = base64::engine::general_purpose::STANDARD.encode("x-access-token:ghs_abc123");
        let text = format!("fatal: ghs_abc123 and {basic}");
        assert_eq!(redact(&text, Some(&token)), "fatal: *** and ***");
    }
}
