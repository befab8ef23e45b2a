//! The texts of the review loop: closer's reply in a review thread it
//! worked on (what changed, with the commit, or why nothing did), the
//! comment on the issue when closer's pull request was closed unmerged,
//! and the hint on the pull request when its run has ended.
//!
//! The agent's words are untrusted: they are escaped and cut here.

use super::markdown;
use super::status::hard_fit;

/// Bytes of the agent's answer in a thread.
const ANSWER_MAX: usize = 4_000;

/// What closer did about one review thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ThreadAnswer {
    /// Changed in `commit`; `what` is the agent's account (may be empty).
    Changed { commit: String, what: String },
    /// Deliberately not changed, and why.
    NotChanged { why: String },
}

/// closer's one reply in a review thread.
pub fn thread_reply(answer: &ThreadAnswer) -> String {
    let out = match answer {
        ThreadAnswer::Changed { commit, what } => {
            let short = markdown::code_span(markdown::head(commit, 12), 40);
            match what.trim() {
                "" => format!("Changed in {short}; the verification passes."),
                what => format!(
                    "Changed in {short}; the verification passes.\n\n{}",
                    markdown::quote(what, ANSWER_MAX)
                ),
            }
        }
        ThreadAnswer::NotChanged { why } => format!(
            "Not changed. The agent's reason:\n\n{}\n\nReply here if it should change \
             after all; closer picks the thread up again.",
            markdown::quote(why, ANSWER_MAX)
        ),
    };
    hard_fit(&out)
}

/// The issue's comment when closer's pull request `number` was closed
/// without being merged.
pub fn pull_closed_comment(number: u64, reopened: bool) -> String {
    let issue = match reopened {
        true => "This issue is open again and marked `closer:failed`",
        false => "This issue stays open and is marked `closer:failed`",
    };
    format!(
        "Pull request #{number} was closed without being merged. {issue}. \
         `/closer retry` starts again (from the branch as it is, commits pushed \
         to it by people included)."
    )
}

/// The answer on closer's pull request when a person reviews or asks there
/// after its run ended without being done (`state`: `failed` or
/// `stopped`): nothing works on the pull request until the run is started
/// again, on the issue.
pub fn ended_run_hint(issue: u64, state: &str) -> String {
    format!(
        "The run that opened this pull request has {state}, so nothing works on it now. \
         Comment `/closer retry` on issue #{issue} to start it again: it continues from \
         this branch and this pull request."
    )
}

/// The comment on a pull request whose run spent its budget (`spent`: which
/// budget, how much of it) when a review asks for more.
pub fn budget_spent_hint(spent: &str) -> String {
    format!(
        "The run that opened this pull request has spent its {spent}, so it does not \
         work on this review. A maintainer can raise `budget` in `.github/closer.yml` (up to \
         the operator's ceiling) and comment `/closer retry` on the issue: the run reads its \
         configuration again and continues from this branch, with what was asked here."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_spent_hint_says_how_to_go_on() {
        insta::assert_snapshot!(budget_spent_hint("token budget (240 of 200)"));
    }

    #[test]
    fn the_ended_run_hint_names_the_issue_and_the_command() {
        insta::assert_snapshot!(ended_run_hint(7, "failed"));
    }

    #[test]
    fn a_changed_thread_names_the_commit_and_quotes_the_agent_escaped() {
        let text = thread_reply(&ThreadAnswer::Changed {
            commit: "0123456789abcdef0123".into(),
            what: "Handled negatives; @maria <b>see</b>".into(),
        });
        insta::assert_snapshot!(text);
        assert!(!text.contains("@maria"), "no mention through the agent");
    }

    #[test]
    fn a_thread_left_unchanged_says_why() {
        insta::assert_snapshot!(thread_reply(&ThreadAnswer::NotChanged {
            why: "The name is the public API.".into(),
        }));
    }

    #[test]
    fn the_closed_pull_request_comment_says_how_to_start_again() {
        insta::assert_snapshot!(pull_closed_comment(7, true));
        assert!(pull_closed_comment(7, false).contains("stays open"));
    }
}
