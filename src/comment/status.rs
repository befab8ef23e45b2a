//! The status comment: one per run, edited in place after every step, found
//! again by its hidden run marker.
//!
//! It must never exceed GitHub's comment limit: it is rendered at lower and
//! lower detail (evidence first, then long lists) until it fits, and says so.
//! It must never let untrusted text forge the marker, so the marker is only
//! read from the very start of a body.

use std::fmt::Write as _;

use super::markdown;
use super::verification::{self, Detail, ITEM_MAX};
use super::view::{NextStep, QuestionView, StatusView, UsageView};
use crate::model::Named;

/// GitHub rejects comment bodies longer than this. We count bytes, which is
/// never less than the character count, so a body within it always fits.
pub const MAX_COMMENT_LEN: usize = 65_536;

const MARKER_PREFIX: &str = "<!-- closer:run=";
const MARKER_SUFFIX: &str = " -->";
/// Longest run id a marker carries.
const RUN_ID_MAX: usize = 64;
/// Said when anything was shortened.
pub const TRIMMED_NOTE: &str = "Evidence trimmed to fit GitHub's comment limit.";

/// The hidden marker the status comment starts with. Characters other than
/// ASCII letters, digits, `-`, `_`, `.` and `:` are dropped from the id so it
/// can never close the HTML comment.
pub fn run_marker(run_id: &str) -> String {
    format!("{MARKER_PREFIX}{}{MARKER_SUFFIX}", clean_run_id(run_id))
}

/// The run id of a status comment: the marker must open the body (leading
/// whitespace allowed). A marker anywhere else (quoted, in evidence) is not
/// ours and is ignored.
pub fn parse_run_marker(body: &str) -> Option<String> {
    let rest = body.trim_start().strip_prefix(MARKER_PREFIX)?;
    let (id, _) = rest.split_once(MARKER_SUFFIX)?;
    let valid = !id.is_empty() && id.len() <= RUN_ID_MAX && clean_run_id(id) == id;
    valid.then(|| id.to_owned())
}

fn clean_run_id(run_id: &str) -> String {
    run_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'))
        .take(RUN_ID_MAX)
        .collect()
}

/// Renders the status comment, within [`MAX_COMMENT_LEN`].
pub fn status_comment(view: &StatusView) -> String {
    for detail in Detail::STEPS {
        let (body, _) = render(view, detail);
        if body.len() <= MAX_COMMENT_LEN {
            return body;
        }
    }
    // Unreachable with the caps above, but the limit is a promise: cut hard,
    // on a character boundary, after the marker.
    let (body, _) = render(view, Detail::STEPS[Detail::STEPS.len() - 1]);
    hard_fit(&body)
}

/// Room a cut body leaves under the limit for the hidden marker a one-off
/// comment gets after it (`post_once_marked`), and some to spare.
pub const MARKER_ROOM: usize = 1_024;

/// Cuts a body to the limit less [`MARKER_ROOM`], keeping whole characters
/// and ending with a note. A body within the limit is left as it is.
pub(crate) fn hard_fit(body: &str) -> String {
    if body.len() <= MAX_COMMENT_LEN - MARKER_ROOM {
        return body.to_owned();
    }
    let max = MAX_COMMENT_LEN - MARKER_ROOM;
    let note = format!("\n\n_{TRIMMED_NOTE}_\n");
    let mut room = max - note.len();
    loop {
        let keep = markdown::floor_boundary(body, room);
        // An open code block would swallow the note: close it (the closing
        // fence needs room too, hence the loop).
        let head = markdown::close_fences(&body[..keep]);
        if head.len() + note.len() <= max {
            return format!("{head}{note}");
        }
        room = room.saturating_sub(head.len() + note.len() - max);
    }
}

fn render(view: &StatusView, detail: Detail) -> (String, bool) {
    let mut trimmed = detail != Detail::FULL;
    let mut out = run_marker(&view.run_id);
    out.push('\n');
    header(&mut out, view);
    if let Some(now) = &view.progress {
        let _ = write!(out, "\n**Now:** {}\n", markdown::inline(now, 300));
    }
    if let Some(problem) = &view.agent_problem {
        let _ = write!(out, "\n**Agent:** {}\n", markdown::inline(problem, 600));
    }
    if let Some(summary) = view.summary.as_deref().filter(|s| !s.trim().is_empty()) {
        let max = detail.evidence_max.clamp(300, 2_000);
        trimmed |= markdown::would_cut(summary.trim(), max);
        let _ = write!(out, "\n{}\n", markdown::quote(summary, max));
    }
    if !view.checklist.is_empty() {
        checklist(&mut out, view, detail, &mut trimmed);
    }
    if !view.pending_actions.is_empty() {
        out.push_str("\n#### Pending actions\n\n");
        numbered(&mut out, &view.pending_actions, detail, &mut trimmed);
    }
    if let Some(v) = view.verification.as_ref().filter(|v| !is_empty(v)) {
        out.push_str("\n#### Verification\n\n");
        verification::render(&mut out, v, detail, &mut trimmed);
    }
    if let Some(q) = &view.question {
        question(&mut out, q, detail, &mut trimmed);
    }
    if !view.notices.is_empty() {
        out.push_str("\n#### Notices\n\n");
        bullets(&mut out, &view.notices, detail, &mut trimmed);
    }
    footer(&mut out, view, trimmed);
    (out, trimmed)
}

fn is_empty(v: &super::view::VerificationView) -> bool {
    v.goals.is_empty() && v.baseline.is_none() && v.scope.is_none()
}

fn header(out: &mut String, view: &StatusView) {
    let _ = writeln!(
        out,
        "### {} closer: {}\n",
        super::view::state_icon(view.state),
        view.state.label()
    );
    let mut facts = Vec::new();
    if let Some(phase) = view.phase {
        facts.push(format!("**Phase:** {}", phase.as_str()));
    }
    if let Some(t) = view.task_type {
        facts.push(format!("**Task:** `{t}`"));
    }
    let iteration = match view.iteration {
        0 => format!("not started (max {})", view.max_iterations),
        k => format!("{k} of {}", view.max_iterations),
    };
    facts.push(format!("**Iteration:** {iteration}"));
    facts.push(format!(
        "**Stage:** {} ({})",
        view.stage.number(),
        view.stage.label()
    ));
    let _ = writeln!(out, "{}", facts.join(" · "));
    let _ = writeln!(out, "\n**Next:** {}", next_step(&view.next));
}

/// The one line that says what happens next.
pub fn next_step(next: &NextStep) -> String {
    match next {
        NextStep::Queued => "waiting for a worker to start the run".to_owned(),
        NextStep::Preparing => "preparing the worktree and taking the baseline".to_owned(),
        NextStep::Working { iteration } => format!("working on iteration {iteration}"),
        NextStep::Verifying { iteration } => {
            format!("checking the results of iteration {iteration}")
        }
        // The question comment pings the author once; this line (edited
        // many times) names them without a ping.
        NextStep::WaitingFor { author } => format!(
            "waiting for @\u{200D}{} to answer the question (reply in a comment)",
            user(author)
        ),
        NextStep::WaitingForModel { iteration } => format!(
            "waiting for the agent's model provider, which is unreachable; the run resumes by \
             itself and iteration {iteration} runs again when it answers (the wait costs no \
             iteration)"
        ),
        NextStep::PullRequestOpen {
            number,
            close_on_merge: true,
        } => {
            format!("pull request #{number} is open for review; the issue closes when it is merged")
        }
        NextStep::PullRequestOpen {
            number,
            close_on_merge: false,
        } => {
            format!("pull request #{number} is open for review")
        }
        NextStep::Closed => "nothing: the work is verified and the issue is closed".to_owned(),
        NextStep::MergedUnverified { head } => format!(
            "nothing: a maintainer merged the pull request at `{}`, a commit closer did not \
             verify (pushed after its last verification, or whose verification failed); the \
             table below is of the last commit closer checked, and the issue is closed",
            super::markdown::short_sha(head)
        ),
        NextStep::Failed => {
            "nothing until a maintainer comments `/closer retry` (see the diagnosis)".to_owned()
        }
        NextStep::PullClosed { number } => format!(
            "nothing: pull request #{number} was closed without being merged; a maintainer \
             comments `/closer retry` to start again"
        ),
        NextStep::Stopped => "nothing until a maintainer comments `/closer run`".to_owned(),
    }
}

/// A GitHub login we address on purpose: only login characters survive.
pub(crate) fn user(login: &str) -> String {
    login
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '[' | ']'))
        .take(64)
        .collect()
}

fn checklist(out: &mut String, view: &StatusView, detail: Detail, trimmed: &mut bool) {
    let done = view.checklist.iter().filter(|i| i.completed).count();
    let _ = writeln!(
        out,
        "\n#### Checklist ({done} of {} done)\n",
        view.checklist.len()
    );
    let shown = detail.list_max.min(view.checklist.len());
    for item in &view.checklist[..shown] {
        let mark = if item.completed { "x" } else { " " };
        let _ = writeln!(
            out,
            "- [{mark}] {}",
            markdown::inline(&item.description, ITEM_MAX)
        );
        let evidence = item.evidence.trim();
        let max = detail.evidence_max.min(2_000);
        if evidence.is_empty() {
            continue;
        }
        if max == 0 {
            *trimmed = true;
            continue;
        }
        *trimmed |= markdown::would_cut(evidence, max);
        let _ = writeln!(
            out,
            "  <sub>Evidence: {}</sub>",
            markdown::inline(evidence, max)
        );
    }
    more(out, view.checklist.len() - shown, "items", trimmed);
}

fn numbered(out: &mut String, items: &[String], detail: Detail, trimmed: &mut bool) {
    let shown = detail.list_max.min(items.len());
    for (i, item) in items[..shown].iter().enumerate() {
        let _ = writeln!(out, "{}. {}", i + 1, markdown::inline(item, ITEM_MAX));
    }
    more(out, items.len() - shown, "actions", trimmed);
}

fn bullets(out: &mut String, items: &[String], detail: Detail, trimmed: &mut bool) {
    let shown = detail.list_max.min(items.len());
    for item in &items[..shown] {
        let _ = writeln!(out, "- {}", markdown::inline(item, ITEM_MAX));
    }
    more(out, items.len() - shown, "more", trimmed);
}

fn more(out: &mut String, hidden: usize, what: &str, trimmed: &mut bool) {
    if hidden > 0 {
        *trimmed = true;
        let _ = writeln!(out, "\n_… and {hidden} more {what} not shown._");
    }
}

fn question(out: &mut String, q: &QuestionView, detail: Detail, trimmed: &mut bool) {
    out.push_str("\n#### Why this looks like a question\n\n");
    if q.stated_by_agent {
        out.push_str("The agent said it needs input. ");
    }
    let _ = writeln!(
        out,
        "Question score {:.2} (threshold {:.2}).\n",
        q.score, q.threshold
    );
    let shown = detail.list_max.min(q.signals.len());
    for s in &q.signals[..shown] {
        let _ = writeln!(
            out,
            "- {} (weight {:.2}): “{}”",
            markdown::inline(&s.kind, 100),
            s.weight,
            markdown::inline(&s.excerpt, ITEM_MAX)
        );
    }
    more(out, q.signals.len() - shown, "signals", trimmed);
}

fn footer(out: &mut String, view: &StatusView, trimmed: bool) {
    let _ = write!(out, "\n---\n<sub>Usage so far: {}", usage_line(&view.usage));
    if let Some(link) = view
        .dashboard_url
        .as_deref()
        .and_then(|u| markdown::link("View this run on the dashboard", u))
    {
        let _ = write!(out, " · {link}");
    }
    out.push_str("</sub>\n");
    if trimmed {
        let _ = writeln!(out, "\n<sub>_{TRIMMED_NOTE}_</sub>");
    }
}

/// e.g. "12,345 of 2,000,000 tokens · $0.42 of $5.00".
pub fn usage_line(u: &UsageView) -> String {
    let tokens = match u.max_tokens {
        Some(max) => format!("{} of {} tokens", thousands(u.tokens), thousands(max)),
        None => format!("{} tokens", thousands(u.tokens)),
    };
    let cost = match u.max_cost_usd {
        Some(max) => format!("${:.2} of ${max:.2}", u.cost_usd),
        None => format!("${:.2}", u.cost_usd),
    };
    format!("{tokens} · {cost}")
}

/// `1234567` → `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
