//! Command goals (`lint_passes`, `build_succeeds`, `tests_pass`,
//! `custom_script`): `sh -c <command>` in the checkout with the scrubbed
//! environment, a deadline and an output cap, exit 0 passes. A failure is
//! fingerprinted so it can be compared with the baseline.

use std::time::Duration;

use super::sandbox::GoalJail;
use super::{GoalContext, GoalLevel, GoalResult, list};
use crate::agent::confine::Kind;
use crate::agent::process::{self, ProcessError, ProcessSpec};
use crate::config::repo::GoalSpec;
use crate::engine::fingerprint::{parse_failures, passed_tests, started_tests};

pub(super) async fn run(
    ctx: GoalContext<'_>,
    level: GoalLevel,
    spec: &GoalSpec,
    command: &str,
    timeout: Duration,
) -> GoalResult {
    let mut result = GoalResult::new(level, spec, command);
    let sandbox = match GoalJail::new(ctx, Kind::Goal).await {
        Ok(sandbox) => sandbox,
        Err(e) => {
            result.not_runnable = true;
            result.evidence = format!("could not prepare its sandbox: {e}");
            return result;
        }
    };
    let mut process_spec = ProcessSpec::shell(command, ctx.worktree, sandbox.env.clone(), timeout);
    process_spec.max_output_bytes = ctx.settings.max_output_bytes;
    process_spec.jail = Some(sandbox.jail.clone());
    let output = match process::run(&process_spec).await {
        Ok(output) => output,
        Err(e @ ProcessError::Escaped { .. }) => {
            result.not_runnable = true;
            result.evidence = e.to_string();
            return result;
        }
        Err(e) => {
            result.not_runnable = true;
            result.evidence = format!("could not start: {e}");
            return result;
        }
    };
    let combined = output.combined();
    result.passed_tests = passed_tests(&combined);
    result.started_tests = started_tests(&combined);
    result.output_cut = output.stdout.truncated() || output.stderr.truncated();
    if output.success() {
        result.passed = true;
        result.evidence = "exit 0".into();
        return result;
    }
    if output.timed_out {
        result.not_runnable = true;
        result.evidence = format!("timed out after {} s", timeout.as_secs());
        return result;
    }
    // 127: not found, 126: not executable — the goal cannot be checked at all.
    if matches!(output.exit_code, Some(126 | 127)) {
        result.not_runnable = true;
        result.evidence = format!(
            "command not runnable (exit {}): {}",
            output.exit_code.unwrap_or_default(),
            output.tail(1)
        );
        return result;
    }
    let root = ctx.worktree.display().to_string();
    result.failures = parse_failures(command, &output.combined(), Some(&root));
    let named: Vec<String> = result
        .failures
        .iter()
        .map(|f| f.test.clone().unwrap_or_else(|| f.summary()))
        .collect();
    let code = output
        .exit_code
        .map_or_else(|| "signal".to_owned(), |c| c.to_string());
    result.evidence = format!("exit {code}; failing: {}", list(&named, 5));
    result
}
