//! Goals about the run's change (`test_added`, `files_changed`,
//! `no_secrets`) and the worktree's content (`file_exists`). They read the
//! collected artifacts; nothing here runs a command.

use std::path::{Component, Path};

use super::{GoalContext, GoalLevel, GoalResult, list};
use crate::config::repo::GoalSpec;
use crate::engine::paths::PathPatterns;
use crate::engine::secrets;

fn matching(ctx: GoalContext<'_>, pattern: &str, only_new: bool) -> Result<Vec<String>, String> {
    let patterns = PathPatterns::new(&[pattern]).map_err(|e| e.to_string())?;
    Ok(ctx
        .artifacts
        .all_files()
        .filter(|f| !only_new || f.new)
        .filter(|f| patterns.matches(&f.path))
        .map(|f| f.path.clone())
        .collect())
}

fn from_matches(
    mut result: GoalResult,
    found: Result<Vec<String>, String>,
    what: &str,
) -> GoalResult {
    match found {
        Ok(files) if files.is_empty() => result.evidence = format!("no {what} file matches"),
        Ok(files) => {
            result.passed = true;
            result.evidence = format!("{what}: {}", list(&files, 5));
        }
        Err(e) => {
            result.not_runnable = true;
            result.evidence = e;
        }
    }
    result
}

/// A new file matching `pattern` in the run's diff.
pub(super) fn test_added(
    ctx: GoalContext<'_>,
    level: GoalLevel,
    spec: &GoalSpec,
    pattern: &str,
) -> GoalResult {
    from_matches(
        GoalResult::new(level, spec, pattern),
        matching(ctx, pattern, true),
        "new",
    )
}

/// A changed file matching `pattern`.
pub(super) fn files_changed(
    ctx: GoalContext<'_>,
    level: GoalLevel,
    spec: &GoalSpec,
    pattern: &str,
) -> GoalResult {
    from_matches(
        GoalResult::new(level, spec, pattern),
        matching(ctx, pattern, false),
        "changed",
    )
}

/// `path` exists in the checkout (a path leaving it never does).
pub(super) async fn file_exists(
    ctx: GoalContext<'_>,
    level: GoalLevel,
    spec: &GoalSpec,
    path: &str,
) -> GoalResult {
    let mut result = GoalResult::new(level, spec, path);
    let relative = Path::new(path);
    if relative.is_absolute()
        || relative
            .components()
            .any(|c| matches!(c, Component::ParentDir))
    {
        result.not_runnable = true;
        result.evidence = "path leaves the worktree".into();
        return result;
    }
    // Resolved, links and all: a committed link to a file elsewhere on
    // the machine is not a file in the checkout, and must not tell what
    // exists outside it (decision 230).
    let root = tokio::fs::canonicalize(ctx.worktree).await;
    let found = tokio::fs::canonicalize(ctx.worktree.join(relative)).await;
    let (passed, evidence) = match (root, found) {
        (Ok(root), Ok(found)) if found.starts_with(&root) => (true, "exists"),
        (Ok(_), Ok(_)) => (false, "leads out of the checkout through a link"),
        _ => (false, "missing"),
    };
    result.passed = passed;
    result.evidence = format!("{path} {evidence}");
    result
}

/// No credential among the run's added lines.
pub(super) fn no_secrets(ctx: GoalContext<'_>, level: GoalLevel, spec: &GoalSpec) -> GoalResult {
    let mut result = GoalResult::new(level, spec, "diff");
    let findings = secrets::scan(ctx.added_lines);
    result.passed = findings.is_empty();
    result.evidence = if findings.is_empty() {
        format!(
            "{} added lines scanned, nothing found",
            ctx.added_lines.len()
        )
    } else {
        let shown: Vec<String> = findings.iter().map(ToString::to_string).collect();
        format!("possible secrets: {}", list(&shown, 5))
    };
    result
}
