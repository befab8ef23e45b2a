//! The pull request closer opens for a verified run: its title and body (what
//! changed, how it was verified, `Closes #n`).
//!
//! Commit subjects, file names and the summary come from the agent and are
//! untrusted: they are escaped like any comment text. The body never exceeds
//! GitHub's limit. Its one closing keyword is closer's `Closes #n`: any other
//! in the title (the issue's) or the body is broken
//! ([`crate::github::closing`]), so a merge closes no other issue.

use std::fmt::Write as _;

use super::markdown;
use super::status::{MAX_COMMENT_LEN, hard_fit, usage_line};
use super::verification::{self, Detail};
use super::view::{UsageView, VerificationView};
use crate::github::closing::neutralize_closing_keywords;
use crate::model::IssueNumber;
use crate::model::TaskType;

/// Commits or files listed before the rest are counted.
const LIST_MAX: usize = 100;

/// One commit on the branch.
#[derive(Debug, Clone, PartialEq)]
pub struct CommitRow {
    pub sha: String,
    pub subject: String,
}

/// One changed file and its line counts.
#[derive(Debug, Clone, PartialEq)]
pub struct FileRow {
    pub path: String,
    pub added: u64,
    pub deleted: u64,
}

/// Everything the pull request body shows.
#[derive(Debug, Clone, PartialEq)]
pub struct PullRequestView {
    pub issue: IssueNumber,
    pub issue_title: String,
    pub task_type: TaskType,
    /// The closer's summary of the work.
    pub summary: String,
    pub commits: Vec<CommitRow>,
    pub files: Vec<FileRow>,
    pub verification: VerificationView,
    pub iterations: u32,
    pub usage: UsageView,
    pub dashboard_url: Option<String>,
}

/// e.g. `fix: parser panics on empty input (#12)`; at most 256 characters
/// (GitHub's limit), one line.
pub fn pull_request_title(issue: IssueNumber, issue_title: &str, task_type: TaskType) -> String {
    let prefix = match task_type {
        TaskType::Bug => "fix",
        TaskType::Feature => "feat",
        TaskType::Refactor => "refactor",
        TaskType::Docs => "docs",
        TaskType::Test => "test",
        TaskType::ReadInfo | TaskType::Report => "chore",
    };
    let flat: String = issue_title.split_whitespace().collect::<Vec<_>>().join(" ");
    // A squash merge makes the title a commit subject on the default
    // branch: no closing keyword, not even our prefix before a title that
    // starts with `#5`.
    let head = neutralize_closing_keywords(&format!("{prefix}: {flat}"));
    let suffix = format!(" (#{issue})");
    let room = 256 - suffix.len();
    format!("{}{suffix}", truncate_chars(&head, room))
}

fn truncate_chars(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max_chars.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// The pull request body, within GitHub's limit: long lists and evidence are
/// shortened step by step until it fits.
pub fn pull_request_body(v: &PullRequestView) -> String {
    let steps = [
        Detail {
            evidence_max: 2_000,
            list_max: LIST_MAX,
            ..Detail::FULL
        },
        Detail::STEPS[2],
        Detail::STEPS[4],
    ];
    let mut body = String::new();
    for detail in steps {
        body = render(v, detail);
        if body.len() <= MAX_COMMENT_LEN {
            return body;
        }
    }
    hard_fit(&body)
}

/// The body: `Closes #n` for the run's issue, and below it nothing that
/// closes another (untrusted text may carry a closing keyword).
fn render(v: &PullRequestView, detail: Detail) -> String {
    format!(
        "Closes #{}\n\n{}",
        v.issue,
        neutralize_closing_keywords(&render_rest(v, detail))
    )
}

fn render_rest(v: &PullRequestView, detail: Detail) -> String {
    let mut out = format!(
        "This pull request was written by an agent driven by closer for issue #{} \
         and verified before it was opened.\n",
        v.issue
    );
    if !v.summary.trim().is_empty() {
        let _ = write!(
            out,
            "\n### Summary\n\n{}\n",
            markdown::quote(&v.summary, 4_000)
        );
    }
    let _ = write!(out, "\n### Commits ({})\n\n", v.commits.len());
    for c in v.commits.iter().take(detail.list_max) {
        let sha = markdown::short_sha(&c.sha);
        let _ = writeln!(out, "- `{sha}` {}", markdown::inline(&c.subject, 200));
    }
    hidden(&mut out, v.commits.len(), detail.list_max);
    let added: u64 = v.files.iter().map(|f| f.added).sum();
    let deleted: u64 = v.files.iter().map(|f| f.deleted).sum();
    let _ = write!(
        out,
        "\n### Changed files ({}, +{added} −{deleted})\n\n",
        v.files.len()
    );
    for f in v.files.iter().take(detail.list_max) {
        let _ = writeln!(
            out,
            "- {} (+{} −{})",
            markdown::code_span(&f.path, 200),
            f.added,
            f.deleted
        );
    }
    hidden(&mut out, v.files.len(), detail.list_max);
    out.push_str("\n### Verification\n\n");
    let mut trimmed = false;
    verification::render(&mut out, &v.verification, detail, &mut trimmed);
    let _ = write!(
        out,
        "\n---\n<sub>{} iteration{} · used {}",
        v.iterations,
        if v.iterations == 1 { "" } else { "s" },
        usage_line(&v.usage)
    );
    if let Some(link) = v
        .dashboard_url
        .as_deref()
        .and_then(|u| markdown::link("run on the dashboard", u))
    {
        let _ = write!(out, " · {link}");
    }
    out.push_str("</sub>\n");
    out
}

fn hidden(out: &mut String, total: usize, shown: usize) {
    if total > shown {
        let _ = writeln!(out, "- _… and {} more_", total - shown);
    }
}
