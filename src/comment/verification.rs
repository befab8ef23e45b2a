//! The verification table (goals, new failures against the baseline, scope),
//! shared by the status comment and the pull request body, and the detail
//! level that decides how much evidence fits.
//!
//! It must never put raw untrusted text in a table cell: cells go through
//! [`markdown::inline`], long evidence through [`markdown::code_block`].

use std::fmt::Write as _;

use super::markdown;
use super::view::{BaselineRow, GoalRow, GoalStatus, ScopeRow, VerificationView};

/// How much detail fits: the status comment lowers it step by step until the
/// comment fits GitHub's limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Detail {
    /// Bytes of evidence per item; 0 leaves evidence out.
    pub evidence_max: usize,
    /// Whether optional goals that passed or failed show their evidence.
    pub optional_evidence: bool,
    /// Items shown of any long list (the rest are counted).
    pub list_max: usize,
}

impl Detail {
    /// Everything, evidence cut per item to a readable size.
    pub const FULL: Detail = Detail {
        evidence_max: 6_000,
        optional_evidence: true,
        list_max: 1_000,
    };

    /// The steps the status comment goes through, most detail first.
    pub const STEPS: [Detail; 5] = [
        Detail::FULL,
        Detail {
            evidence_max: 1_500,
            optional_evidence: true,
            list_max: 300,
        },
        Detail {
            evidence_max: 400,
            optional_evidence: false,
            list_max: 100,
        },
        Detail {
            evidence_max: 0,
            optional_evidence: false,
            list_max: 40,
        },
        Detail {
            evidence_max: 0,
            optional_evidence: false,
            list_max: 10,
        },
    ];
}

/// Bytes of a one-line excerpt in a table cell.
const CELL_MAX: usize = 120;
/// Bytes of a goal name or a list item.
pub(crate) const ITEM_MAX: usize = 300;

/// Renders the table and, below it, the evidence of goals that need it.
/// Sets `*trimmed` when any evidence or list was shortened.
pub(crate) fn render(out: &mut String, v: &VerificationView, detail: Detail, trimmed: &mut bool) {
    out.push_str("| Check | Result | Required | Evidence |\n");
    out.push_str("|---|---|---|---|\n");
    let shown = shown_goals(&v.goals, detail.list_max);
    for goal in shown.iter().copied() {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            markdown::cell(&goal.name, ITEM_MAX),
            goal.status.label(),
            if goal.required {
                "required"
            } else {
                "optional"
            },
            cell_excerpt(goal, detail),
        );
    }
    if let Some(baseline) = &v.baseline {
        let _ = writeln!(
            out,
            "| New failures vs baseline | {} | required | {} |",
            if baseline.new_failures.is_empty() {
                "✅ passed"
            } else {
                "❌ failed"
            },
            baseline_text(baseline, detail, trimmed),
        );
        baseline_rows(out, baseline, detail, trimmed);
    }
    if let Some(scope) = &v.scope {
        let (result, text) = match scope {
            ScopeRow::Ok => (
                "✅ passed",
                "all changes inside the allowed paths".to_owned(),
            ),
            ScopeRow::OutOfScope(files) => (
                "❌ failed",
                format!(
                    "outside the allowed paths: {}",
                    joined(files, detail, trimmed)
                ),
            ),
        };
        let _ = writeln!(out, "| Scope | {result} | required | {text} |");
    }
    verdict_row(out, v, detail, trimmed);
    if shown.len() < v.goals.len() {
        *trimmed = true;
        let _ = writeln!(
            out,
            "\n_… and {} more checks not shown (failed and required checks first)._",
            v.goals.len() - shown.len()
        );
    }
    for goal in shown.iter().copied().filter(|g| shows_evidence(g, detail)) {
        let evidence = goal.evidence.trim();
        if markdown::would_cut(evidence, detail.evidence_max) {
            *trimmed = true;
        }
        let _ = write!(
            out,
            "\n<details><summary>Evidence: {}</summary>\n\n{}\n\n</details>\n",
            markdown::inline(&goal.name, ITEM_MAX),
            markdown::code_block(evidence, detail.evidence_max),
        );
    }
    if !v.goals.is_empty() && detail.evidence_max == 0 {
        *trimmed |= v
            .goals
            .iter()
            .any(|g| g.evidence.trim().lines().nth(1).is_some());
    }
}

/// The verdict's reasons, when the head is not verified and no other row
/// says it fails (decision 256).
fn verdict_row(out: &mut String, v: &VerificationView, detail: Detail, trimmed: &mut bool) {
    if !v.blockers.is_empty() && !shows_a_failure(v) {
        let _ = writeln!(
            out,
            "| Verdict | ❌ not verified | required | {} |",
            joined(&v.blockers, detail, trimmed)
        );
    }
}

/// Whether a row of the table already says the head fails a check.
fn shows_a_failure(v: &VerificationView) -> bool {
    let goal_failed = v
        .goals
        .iter()
        .any(|g| g.status == GoalStatus::Failed && g.required);
    let baseline_failed = v
        .baseline
        .as_ref()
        .is_some_and(|b| !b.new_failures.is_empty() || !b.failing_since_base.is_empty());
    let scope_failed = matches!(v.scope, Some(ScopeRow::OutOfScope(_)));
    goal_failed || baseline_failed || scope_failed
}

/// At most `max` goals, in their order, chosen failed-required first, then
/// failed-optional, then passed-required, then the rest.
fn shown_goals(goals: &[GoalRow], max: usize) -> Vec<&GoalRow> {
    if goals.len() <= max {
        return goals.iter().collect();
    }
    let rank = |g: &GoalRow| match (g.status == GoalStatus::Failed, g.required) {
        (true, true) => 0,
        (true, false) => 1,
        (false, true) => 2,
        (false, false) => 3,
    };
    let mut order: Vec<usize> = (0..goals.len()).collect();
    order.sort_by_key(|&i| (rank(&goals[i]), i));
    order.truncate(max);
    order.sort_unstable();
    order.into_iter().map(|i| &goals[i]).collect()
}

/// Whether a goal's full evidence is worth a details block: failed goals, and
/// (while detail allows) optional goals; never an empty or one-line evidence
/// that the table cell already shows whole.
fn shows_evidence(goal: &GoalRow, detail: Detail) -> bool {
    let evidence = goal.evidence.trim();
    let already_in_cell = !evidence.contains('\n') && evidence.len() <= CELL_MAX;
    let wanted = goal.status == GoalStatus::Failed && (goal.required || detail.optional_evidence);
    detail.evidence_max > 0 && wanted && !evidence.is_empty() && !already_in_cell
}

/// The failures present at the base commit: still failing (they block),
/// tolerated (shown, never hidden), and fixed.
fn baseline_rows(out: &mut String, b: &BaselineRow, detail: Detail, trimmed: &mut bool) {
    if !b.failing_since_base.is_empty() {
        let _ = writeln!(
            out,
            "| Failing since base | ❌ failed | required | {} (they failed on the base commit too) |",
            joined(&b.failing_since_base, detail, trimmed)
        );
    }
    if !b.tolerated.is_empty() {
        let _ = writeln!(
            out,
            "| Tolerated failures | ⚠️ tolerated | optional | {} (failing since base; tolerated by `baseline.tolerate`) |",
            joined(&b.tolerated, detail, trimmed)
        );
    }
    if !b.fixed_since_base.is_empty() {
        let _ = writeln!(
            out,
            "| Fixed since base | ✅ passed | optional | {} |",
            joined(&b.fixed_since_base, detail, trimmed)
        );
    }
}

/// e.g. "0 new (3 already failing at baseline)".
fn baseline_text(b: &BaselineRow, detail: Detail, trimmed: &mut bool) -> String {
    let already = match b.already_failing {
        0 => "none failing at baseline".to_owned(),
        n => format!("{n} already failing at baseline"),
    };
    if b.new_failures.is_empty() {
        return format!("0 new ({already})");
    }
    format!(
        "{} new ({already}): {}",
        b.new_failures.len(),
        joined(&b.new_failures, detail, trimmed)
    )
}

/// Untrusted names joined for one cell, at most `list_max`, the rest counted.
fn joined(items: &[String], detail: Detail, trimmed: &mut bool) -> String {
    let shown = detail.list_max.min(items.len());
    let mut text = items[..shown]
        .iter()
        .map(|i| markdown::cell(i, ITEM_MAX))
        .collect::<Vec<_>>()
        .join(", ");
    if shown < items.len() {
        *trimmed = true;
        let _ = write!(text, " and {} more", items.len() - shown);
    }
    text
}

/// The evidence in a table cell: the last line that names an error, a failure
/// or a warning, else the last non-empty line (command output ends with its
/// summary), and a pointer to the full evidence below when it is shown.
fn cell_excerpt(goal: &GoalRow, detail: Detail) -> String {
    let lines = || {
        goal.evidence
            .lines()
            .rev()
            .map(str::trim)
            .filter(|l| !l.is_empty())
    };
    let telling = |l: &&str| {
        let lower = l.to_lowercase();
        ["error", "fail", "warning", "panicked"]
            .iter()
            .any(|w| lower.contains(w))
    };
    let line = lines()
        .take(200)
        .find(telling)
        .or_else(|| lines().next())
        .unwrap_or("");
    let excerpt = markdown::cell(line, CELL_MAX);
    if shows_evidence(goal, detail) {
        format!("{excerpt} (full output below)")
    } else {
        excerpt
    }
}
