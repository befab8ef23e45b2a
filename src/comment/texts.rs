//! The short texts the bot posts besides the status comment: the question to
//! the issue author, the diagnosis of a failed run, the budget notice, the
//! refusal, "did you mean", the `/closer status` answer, the answer to a
//! retry of a run still going, the invalid-config
//! comment and the answer of a `read_info`/`report` run.
//!
//! Each is a function of typed inputs; every untrusted string goes through
//! `markdown` before it is placed. Nothing here decides anything.

use std::fmt::Write as _;

use super::markdown;
use super::status::{MAX_COMMENT_LEN, hard_fit, next_step, thousands, usage_line, user};
use super::view::{Stage, StatusView, UsageView};
use crate::model::Named;
use crate::model::{Permission, RunState};

/// The notice every status comment carries when the operator runs agents
/// without a sandbox (`[sandbox] mode = "none"`).
pub const UNCONFINED_NOTICE: &str = "⚠️ This closer runs agents, goals and handlers **unconfined** \
     (`[sandbox] mode = \"none\"`): they have the server's own access. Ask the operator to \
     enable the sandbox before trusting it with untrusted issues.";

/// Bytes of one quoted question or evidence excerpt.
const QUOTE_MAX: usize = 8_000;
/// Bytes of one list item.
const ITEM_MAX: usize = 300;
/// Items shown of a long list.
const LIST_MAX: usize = 50;
/// Stage attempts shown (there are three stages; a retried run repeats them).
const STAGES_MAX: usize = 9;

/// The subcommands, for help and "did you mean".
pub const COMMANDS: [&str; 4] = ["run", "retry", "stop", "status"];

/// The question comment: addressed to the issue author, the agent's questions
/// quoted, and how to answer.
pub fn question_comment(author: &str, questions: &[String]) -> String {
    let mut out = format!(
        "@{}, the agent working on this issue needs your input before it can go on:\n",
        user(author)
    );
    let questions: Vec<&String> = questions.iter().filter(|q| !q.trim().is_empty()).collect();
    for q in questions.iter().take(LIST_MAX) {
        let _ = write!(out, "\n{}\n", markdown::quote(q, QUOTE_MAX));
    }
    if questions.is_empty() {
        out.push_str(
            "\n> (the agent asked for input without a question text; see the status comment)\n",
        );
    }
    out.push_str(
        "\n**How to answer:** reply in a comment on this issue. The run is paused \
         (label `awaiting-response`) and resumes with your reply; a comment by the \
         issue author or a maintainer counts.\n",
    );
    hard_fit(&out)
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq)]
pub enum FailureReason {
    /// The completion handler's iteration limit was reached.
    IterationLimit { max: u32 },
    /// The convergence controller reached stage 3.
    ConvergenceStopped,
    /// The Definition-of-Done commands could not run on the clean base commit.
    BaselineBroken { detail: String },
    /// The next step would exceed the run's budget.
    BudgetExceeded(BudgetExceeded),
    /// The worktree was not the verified commit at the push.
    PushRefused { detail: String },
    /// GitHub refused the push: it changes a workflow file, which the App
    /// may not.
    WorkflowRefused { path: String },
    /// GitHub declined the push under the repository's rules, naming
    /// these.
    RulesRefused { rules: Vec<String> },
    /// The agent failed (non-zero exit, timeout, unreadable output).
    AgentError { message: String },
    /// closer's own steps of the run failed for good, again and again.
    StepsFailed { times: u32, error: String },
}

/// A failure fingerprint and how often it repeated.
#[derive(Debug, Clone, PartialEq)]
pub struct FingerprintRow {
    /// Command, test and normalised error, e.g. `cargo test: parser::tests::empty`.
    pub description: String,
    /// Short hash, shown so a maintainer can find it on the dashboard.
    pub hash: String,
    /// In how many iterations it appeared.
    pub occurrences: u32,
}

/// What one convergence stage tried.
#[derive(Debug, Clone, PartialEq)]
pub struct StageAttempt {
    pub stage: Stage,
    /// The iterations spent in this stage.
    pub iterations: Vec<u32>,
    /// What was tried, in a sentence (e.g. the closer's summary).
    pub tried: String,
}

/// Everything the diagnosis comment shows.
#[derive(Debug, Clone, PartialEq)]
pub struct DiagnosisView {
    pub reason: FailureReason,
    /// Iterations run in total.
    pub iterations: u32,
    pub fingerprints: Vec<FingerprintRow>,
    pub stages: Vec<StageAttempt>,
    /// The last failing evidence (command output).
    pub last_evidence: Option<String>,
    /// Tests that failed on the base commit too and still fail: the
    /// maintainer may decide they are unrelated and tolerate them.
    pub failing_since_base: Vec<String>,
    /// What the agent asked in the last iteration, when no iteration was
    /// left to use an answer: it was not asked on the issue.
    pub unanswered: Vec<String>,
    pub dashboard_url: Option<String>,
}

/// What the agent asked in its last iteration, quoted, when no iteration
/// was left to use an answer.
fn unanswered_section(out: &mut String, questions: &[String]) {
    let questions: Vec<&String> = questions.iter().filter(|q| !q.trim().is_empty()).collect();
    if questions.is_empty() {
        return;
    }
    out.push_str("\n#### What the agent asked, with no iteration left for an answer\n");
    // Short: the sections after it (how to try again) must fit too.
    for q in questions.iter().take(5) {
        let _ = write!(out, "\n{}\n", markdown::quote(q, 1_000));
    }
    if questions.len() > 5 {
        let _ = writeln!(out, "\n_… and {} more._", questions.len() - 5);
    }
}

/// The diagnosis comment when a run ends as failed.
pub fn diagnosis_comment(d: &DiagnosisView) -> String {
    let mut out = format!(
        "### ❌ closer could not finish this issue\n\n**Why:** {}\n\n\
         The run stopped after {} iteration{}. The issue stays open and is labelled `closer:failed`.\n",
        reason_text(&d.reason),
        d.iterations,
        if d.iterations == 1 { "" } else { "s" },
    );
    unanswered_section(&mut out, &d.unanswered);
    if !d.fingerprints.is_empty() {
        out.push_str("\n#### Failures that kept coming back\n\n| Failure | Fingerprint | Seen in |\n|---|---|---|\n");
        for f in d.fingerprints.iter().take(LIST_MAX) {
            let _ = writeln!(
                out,
                "| {} | {} | {} iteration{} |",
                markdown::cell(&f.description, ITEM_MAX),
                markdown::cell(&f.hash, 16),
                f.occurrences,
                if f.occurrences == 1 { "" } else { "s" }
            );
        }
        if d.fingerprints.len() > LIST_MAX {
            let _ = writeln!(out, "\n_… and {} more._", d.fingerprints.len() - LIST_MAX);
        }
    }
    if !d.stages.is_empty() {
        out.push_str("\n#### What was tried\n\n");
        for s in d.stages.iter().take(STAGES_MAX) {
            let _ = writeln!(
                out,
                "- **Stage {} ({})**, {}: {}",
                s.stage.number(),
                s.stage.label(),
                iterations_text(&s.iterations),
                markdown::inline(&s.tried, 600)
            );
        }
    }
    if !d.failing_since_base.is_empty() {
        let shown: Vec<String> = d
            .failing_since_base
            .iter()
            .take(LIST_MAX)
            .map(|t| markdown::inline(t, ITEM_MAX))
            .collect();
        let _ = writeln!(
            out,
            "\n**Failing since base:** {}. These failed on the base commit too, so closer does not \
             count them as fixed. If they are unrelated to this issue, tolerate them in \
             `.github/closer.yml` with `baseline: {{ tolerate: preexisting }}` (or list them under \
             `baseline.known_failures` with `tolerate: listed`) and comment `/closer retry`.",
            shown.join(", ")
        );
    }
    if let Some(evidence) = d.last_evidence.as_deref().filter(|e| !e.trim().is_empty()) {
        let _ = write!(
            out,
            "\n<details><summary>Last evidence</summary>\n\n{}\n\n</details>\n",
            markdown::code_block(evidence, 20_000)
        );
    }
    out.push_str(
        "\n**To try again**, fix what is described above if it needs a human (or add detail \
         to the issue), then comment `/closer retry`. The run keeps its history.\n",
    );
    if let Some(link) = d
        .dashboard_url
        .as_deref()
        .and_then(|u| markdown::link("Full diagnostics on the dashboard", u))
    {
        let _ = writeln!(out, "\n<sub>{link}</sub>");
    }
    hard_fit(&out)
}

fn reason_text(reason: &FailureReason) -> String {
    match reason {
        FailureReason::IterationLimit { max } => {
            format!("the iteration limit ({max}) was reached before the work was verified.")
        }
        FailureReason::ConvergenceStopped => "the same failures repeated even in minimal-fix mode \
             (convergence stage 3), so more iterations would not help."
            .to_owned(),
        FailureReason::BaselineBroken { detail } => format!(
            "the checks could not run on the unchanged default branch (the baseline is broken): {}",
            markdown::inline(detail, 1_000)
        ),
        FailureReason::BudgetExceeded(b) => budget_sentence(b),
        FailureReason::PushRefused { detail } => format!(
            "the push was refused: {}. closer pushes only the commit verification checked, \
             from a clean worktree; a retry verifies again.",
            markdown::inline(detail, 1_000)
        ),
        FailureReason::WorkflowRefused { path } => format!(
            "GitHub refused the push: the change creates or updates the workflow {}, and \
             closer's GitHub App has no `workflows` permission. It never asks for it: a \
             workflow runs in this repository's CI, with its secrets, so a change to one \
             is for a person to push. The run's unpushed commits were dropped: a retry \
             starts again from the branch as GitHub has it. If the issue does not need the \
             workflow changed, say so in the issue's description: a retry reads it again.",
            markdown::code_span(path, 300)
        ),
        FailureReason::RulesRefused { rules } => rules_sentence(rules),
        FailureReason::AgentError { message } => {
            format!("the agent failed: {}", markdown::inline(message, 1_000))
        }
        FailureReason::StepsFailed { times, error } => format!(
            "closer could not carry the run forward: its steps failed {times} times in a row, \
             each after all its tries, so it stopped trying on its own. The last error: {}",
            markdown::inline(error, 1_000)
        ),
    }
}

fn rules_sentence(rules: &[String]) -> String {
    let named = match rules {
        [] => "closer could not read which rule GitHub named (closer's log has git's \
               output)."
            .to_owned(),
        rules => rules
            .iter()
            .take(LIST_MAX)
            .map(|r| markdown::inline(r, ITEM_MAX))
            .collect::<Vec<_>>()
            .join(" "),
    };
    format!(
        "GitHub declined the push: it breaks this repository's rules (a ruleset or \
         branch protection that covers closer's `closer/` branches): {named} closer cannot \
         meet such a rule by itself. A repository admin can add closer's GitHub App to the \
         rule's bypass list, or leave `closer/` branches out of it."
    )
}

fn iterations_text(its: &[u32]) -> String {
    match its {
        [] => "no iterations".to_owned(),
        [one] => format!("iteration {one}"),
        [first, .., last] => format!("iterations {first}–{last}"),
    }
}

/// Which budget a run would exceed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BudgetExceeded {
    Tokens { used: u64, max: u64 },
    Cost { used_usd: f64, max_usd: f64 },
}

fn budget_sentence(b: &BudgetExceeded) -> String {
    match b {
        BudgetExceeded::Tokens { used, max } => format!(
            "the run's token budget would be exceeded ({} of {} tokens used). {RAISE_BUDGET}",
            thousands(*used),
            thousands(*max)
        ),
        BudgetExceeded::Cost { used_usd, max_usd } => format!(
            "the run's cost budget would be exceeded (${used_usd:.2} of ${max_usd:.2} spent). \
             {RAISE_BUDGET}"
        ),
    }
}

/// What a maintainer can do about a run stopped on its budget.
const RAISE_BUDGET: &str = "No more agent or LLM calls are made for this run; a maintainer \
     can raise `budget` in `.github/closer.yml` (up to the operator's ceiling) before retrying.";

/// The one-line refusal to a user without the permission a command needs.
pub fn refusal_comment(login: &str, minimum: Permission) -> String {
    format!(
        "@{}, sorry: closer only takes commands from users with at least `{}` permission on this repository.",
        user(login),
        minimum.as_str()
    )
}

/// The answer to the trigger label put on by a user who may not start a run.
pub fn label_refusal_comment(login: &str, label: &str, minimum: Permission) -> String {
    format!(
        "@{}, sorry: closer only starts when the {} label is added by a user with at least `{}` \
         permission on this repository, so the label was removed.",
        user(login),
        markdown::code_span(label, 60),
        minimum.as_str()
    )
}

/// The answer to the trigger label taken off, while its run works, by a
/// user who may not stop the run.
pub fn label_removal_refusal_comment(login: &str, label: &str, minimum: Permission) -> String {
    format!(
        "@{}, sorry: only a user with at least `{}` permission on this repository can stop closer \
         by removing the {} label, so the label was put back and the run goes on.",
        user(login),
        minimum.as_str(),
        markdown::code_span(label, 60),
    )
}

/// The answer to `/closer <unknown>`.
pub fn unknown_command_comment(word: &str, suggestion: Option<&str>) -> String {
    let word = markdown::code_span(&format!("/closer {word}"), 60);
    let known = COMMANDS.map(|c| format!("`/closer {c}`")).join(", ");
    match suggestion.filter(|s| COMMANDS.contains(s)) {
        Some(s) => {
            format!("Unknown command {word}. Did you mean `/closer {s}`? Commands: {known}.")
        }
        None => format!("Unknown command {word}. Commands: {known}."),
    }
}

/// The answer to `/closer run` or `/closer retry` while the issue's run is
/// still going: nothing is restarted, and what a maintainer can do instead
/// (the status comment says where the run stands).
pub fn nothing_to_retry_answer(state: RunState) -> String {
    let now = format!(
        "closer is **{}** on this issue, so there is nothing to retry.",
        state.label()
    );
    let instead = match state {
        RunState::AwaitingResponse => {
            "A comment that answers the agent's question resumes the run (a maintainer's \
             answer counts too); `/closer stop` ends it."
        }
        RunState::Verifying => {
            "Its work is verified: a review of its pull request, or a request to the App \
             there, starts another round; `/closer stop` ends the run."
        }
        _ => {
            "A maintainer's comment reaches the agent's next prompt; `/closer stop` ends the \
             run, and `/closer retry` after that starts it again."
        }
    };
    format!("{now} {instead}")
}

/// The answer to `/closer status`: a short summary and a link to the status
/// comment, or how to start a run when there is none.
pub fn status_answer(view: Option<&StatusView>, status_comment_url: Option<&str>) -> String {
    let Some(v) = view else {
        return "There is no closer run on this issue. A maintainer can start one by \
                commenting `/closer run` or by adding the trigger label."
            .to_owned();
    };
    let phase = v
        .phase
        .map(|p| format!("phase {}, ", p.as_str()))
        .unwrap_or_default();
    let mut out = format!(
        "closer is **{}** ({phase}iteration {} of {}, stage {}). Next: {}.",
        v.state.label(),
        v.iteration,
        v.max_iterations,
        v.stage.number(),
        next_step(&v.next)
    );
    if let Some(link) = status_comment_url.and_then(|u| markdown::link("status comment", u)) {
        let _ = write!(out, " Details in the {link}.");
    }
    let _ = write!(out, "\n\n<sub>Usage so far: {}</sub>", usage_line(&v.usage));
    out
}

/// The comment on a bad `.github/closer.yml`. `errors` is the `Display` of
/// `crate::config::ConfigErrors`: one `file:line:column: problem` per line.
pub fn invalid_config_comment(file: &str, errors: &str) -> String {
    let count = errors
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count()
        .max(1);
    format!(
        "### ⚠️ closer: `{}` is not valid\n\n{} in the repository configuration:\n\n{}\n\n\
         **No run was started.** Fix the file on the default branch, then comment \
         `/closer run` (or add the trigger label again). To check the file locally:\n\n\
         ```sh\ncloser check-config {}\n```\n",
        clean_path(file),
        if count == 1 {
            "One problem".to_owned()
        } else {
            format!("{count} problems")
        },
        markdown::code_block(errors, 20_000),
        clean_path(file)
    )
}

/// A config path as we name it in text: path characters only.
fn clean_path(file: &str) -> String {
    let clean: String = file
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '/' | '_' | '-'))
        .take(200)
        .collect();
    if clean.is_empty() {
        ".github/closer.yml".to_owned()
    } else {
        clean
    }
}

/// What the answer footer says.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliverableFooter {
    pub iterations: u32,
    pub usage: UsageView,
    pub dashboard_url: Option<String>,
    /// The issue is closed after this answer.
    pub closing: bool,
}

/// The answer of a `read_info`/`report` run, with a footer. The answer is the
/// agent's markdown: rendered, but without mentions, HTML or open fences, and
/// cut (once escaped) to leave room for the footer and the closing notice.
pub fn deliverable_comment(answer: &str, footer: &DeliverableFooter) -> String {
    let room = MAX_COMMENT_LEN - 4_000;
    let (answer, was_cut) = markdown::untrusted_markdown_cut(answer.trim(), room);
    let cut_note = if was_cut {
        "\n\n_The answer was cut to fit GitHub's comment limit._"
    } else {
        ""
    };
    let mut out = format!(
        "{answer}{cut_note}\n\n---\n<sub>Answered by closer after {} iteration{} · used {}",
        footer.iterations,
        if footer.iterations == 1 { "" } else { "s" },
        usage_line(&footer.usage)
    );
    if let Some(link) = footer
        .dashboard_url
        .as_deref()
        .and_then(|u| markdown::link("run on the dashboard", u))
    {
        let _ = write!(out, " · {link}");
    }
    out.push_str("</sub>\n");
    match footer.closing {
        true => out.push_str("\n<sub>This answer completes the issue, so it is being closed. Comment `/closer run` to ask again.</sub>\n"),
        false => out.push_str("\n<sub>This repository closes issues only on a person's word (`close_on: merged`): close this one if the answer settles it, or comment `/closer run` to ask again.</sub>\n"),
    }
    hard_fit(&out)
}

#[cfg(test)]
mod tests {
    //! The size of texts whose untrusted part grows when it is escaped
    //! (three bytes for each `<x` and `@x`); the rest of this module's
    //! tests are in `comment::tests`.

    use super::*;
    use crate::comment::status::{MARKER_ROOM, TRIMMED_NOTE};

    fn footer(closing: bool) -> DeliverableFooter {
        DeliverableFooter {
            iterations: 2,
            usage: UsageView::default(),
            dashboard_url: Some("https://closer.example.com/runs/r-1".to_owned()),
            closing,
        }
    }

    /// 60,000 bytes with 2,000 `<T>` are 66,000 once escaped. Cut before
    /// escaping, the answer passed as short enough, grew past the limit, and
    /// the last-resort cut took the footer and the closing notice with it.
    #[test]
    fn an_answer_full_of_generics_keeps_its_footer_and_closing_notice() {
        let answer = "Vec<T> ".repeat(2_000) + &"word ".repeat(9_200);
        assert_eq!(answer.len(), 60_000);
        for (closing, notice) in [
            (
                true,
                "so it is being closed. Comment `/closer run` to ask again.</sub>\n",
            ),
            (false, "or comment `/closer run` to ask again.</sub>\n"),
        ] {
            let out = deliverable_comment(&answer, &footer(closing));
            assert!(out.len() <= MAX_COMMENT_LEN - MARKER_ROOM, "{}", out.len());
            assert!(!out.contains(TRIMMED_NOTE));
            assert!(out.contains("_The answer was cut to fit GitHub's comment limit._"));
            assert!(out.contains("[run on the dashboard](https://closer.example.com/runs/r-1)"));
            assert!(out.ends_with(notice), "{}", &out[out.len() - 200..]);
        }
    }

    /// The last evidence is cut to 20,000 bytes once escaped: cut before,
    /// 20,000 bytes of `<T>` grew to 40,000 and pushed "To try again" and
    /// the dashboard link out of the comment.
    #[test]
    fn a_diagnosis_with_evidence_full_of_generics_keeps_how_to_retry() {
        let d = DiagnosisView {
            reason: FailureReason::ConvergenceStopped,
            iterations: 9,
            fingerprints: (0..50)
                .map(|i| FingerprintRow {
                    description: format!("cargo test: case_{i} {}", "x".repeat(280)),
                    hash: format!("{i:016x}"),
                    occurrences: 3,
                })
                .collect(),
            stages: Vec::new(),
            last_evidence: Some("<T>".repeat(20_000)),
            failing_since_base: (0..50)
                .map(|i| format!("case_{i} {}", "y".repeat(280)))
                .collect(),
            unanswered: Vec::new(),
            dashboard_url: Some("https://closer.example.com/runs/r-1".to_owned()),
        };
        let out = diagnosis_comment(&d);
        assert!(out.len() <= MAX_COMMENT_LEN - MARKER_ROOM, "{}", out.len());
        assert!(!out.contains(TRIMMED_NOTE));
        assert!(out.contains("**To try again**"));
        assert!(out.ends_with(
            "<sub>[Full diagnostics on the dashboard](https://closer.example.com/runs/r-1)</sub>\n"
        ));
    }
}
