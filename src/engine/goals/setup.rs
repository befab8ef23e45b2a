//! The repository's `setup`: the commands that install what the goals need
//! (`npm ci`, `cargo fetch`) in the clean checkout the goals then run on.
//! They run in order, each under the setup's sandbox (the network by
//! default, unlike the goals) with the check's shared home. A command that
//! exits non-zero is run once more after a pause (a registry's passing
//! hiccup is not the change's fault); the first that fails again ends the
//! setup. The result is a required check of its own, so a setup that fails
//! blocks completion and says why where reviewers read.

use std::time::Duration;

use super::sandbox::GoalJail;
use super::{GoalContext, GoalLevel, GoalResult};
use crate::agent::confine::Kind;
use crate::agent::process::{self, ProcessSpec};
use crate::config::repo::SetupConfig;

/// The goal type a setup's result is shown under.
pub const SETUP: &str = "setup";

/// The pause before a failed command's second run.
const RETRY_AFTER: Duration = Duration::from_secs(2);

/// Runs `setup` in `ctx.worktree`; `None` when the repository has none.
/// The result is `not_runnable` when a command could not be run at all
/// (missing, timed out), failed when one exited non-zero.
pub async fn setup(ctx: GoalContext<'_>, setup: &SetupConfig) -> Option<GoalResult> {
    if setup.commands.is_empty() {
        return None;
    }
    let started = std::time::Instant::now();
    let timeout = Duration::from_secs(setup.timeout_secs);
    let target = setup.commands.join(" && ");
    let mut result = GoalResult::check(GoalLevel::Dod, SETUP, &target, false, String::new());
    let mut outcome = Ok(());
    for command in &setup.commands {
        outcome = run_one(ctx, command, timeout).await;
        if outcome.as_ref().is_err_and(|f| !f.not_runnable) {
            tokio::time::sleep(RETRY_AFTER).await;
            outcome = run_one(ctx, command, timeout).await;
        }
        if outcome.is_err() {
            break;
        }
    }
    result.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    match outcome {
        Ok(()) => {
            result.passed = true;
            result.evidence = format!("{} command(s), exit 0", setup.commands.len());
        }
        Err(Failed {
            evidence,
            not_runnable,
        }) => {
            result.evidence = evidence;
            result.not_runnable = not_runnable;
        }
    }
    Some(result)
}

/// Why one setup command failed.
struct Failed {
    evidence: String,
    not_runnable: bool,
}

impl Failed {
    fn new(command: &str, why: String, not_runnable: bool) -> Failed {
        Failed {
            evidence: format!("`{command}` {why}"),
            not_runnable,
        }
    }
}

async fn run_one(ctx: GoalContext<'_>, command: &str, timeout: Duration) -> Result<(), Failed> {
    let jail = GoalJail::new(ctx, Kind::Setup)
        .await
        .map_err(|e| Failed::new(command, format!("could not prepare its sandbox: {e}"), true))?;
    let mut spec = ProcessSpec::shell(command, ctx.worktree, jail.env.clone(), timeout);
    spec.max_output_bytes = ctx.settings.max_output_bytes;
    spec.jail = Some(jail.jail.clone());
    let output = process::run(&spec)
        .await
        .map_err(|e| Failed::new(command, format!("could not start: {e}"), true))?;
    if output.success() {
        return Ok(());
    }
    if output.timed_out {
        let why = format!("timed out after {} s", timeout.as_secs());
        return Err(Failed::new(command, why, true));
    }
    let code = output
        .exit_code
        .map_or_else(|| "a signal".to_owned(), |c| c.to_string());
    let why = format!("exited with {code}: {}", output.tail(1));
    Err(Failed::new(
        command,
        why,
        matches!(output.exit_code, Some(126 | 127)),
    ))
}
