//! The comment texts' tests, by concern, and the views they share: a bug
//! run two iterations in, with a failing test and a lint warning.

use super::*;
use crate::model::{IssueNumber, TaskType};

mod limits;
mod texts;
mod untrusted;

fn goal(name: &str, status: GoalStatus, required: bool, evidence: &str) -> GoalRow {
    GoalRow {
        name: name.to_owned(),
        status,
        required,
        evidence: evidence.to_owned(),
    }
}

fn item(description: &str, completed: bool, evidence: &str) -> ChecklistRow {
    ChecklistRow {
        description: description.to_owned(),
        completed,
        evidence: evidence.to_owned(),
    }
}

fn usage() -> UsageView {
    UsageView {
        tokens: 184_230,
        cost_usd: 0.734,
        max_tokens: Some(2_000_000),
        max_cost_usd: Some(5.0),
    }
}

const FAILING_TEST: &str = "running 12 tests\ntest parser::tests::empty_input ... FAILED\n\nfailures:\n\n---- parser::tests::empty_input stdout ----\nthread 'parser::tests::empty_input' panicked at src/parser.rs:41:9:\ncalled `Option::unwrap()` on a `None` value\n\ntest result: FAILED. 11 passed; 1 failed";

fn verification() -> VerificationView {
    VerificationView {
        goals: vec![
            goal(
                "build_succeeds: cargo build",
                GoalStatus::Passed,
                true,
                "exit 0 in 14.2 s",
            ),
            goal(
                "tests_pass: cargo test",
                GoalStatus::Failed,
                true,
                FAILING_TEST,
            ),
            goal(
                "test_added: tests/**",
                GoalStatus::Passed,
                true,
                "tests/parser_empty.rs added",
            ),
            goal(
                "lint_passes: cargo clippy",
                GoalStatus::Failed,
                false,
                "warning: unused variable: `x`\n --> src/parser.rs:12:9",
            ),
        ],
        baseline: Some(BaselineRow {
            new_failures: vec!["cargo test: parser::tests::empty_input".to_owned()],
            already_failing: 3,
            ..BaselineRow::default()
        }),
        scope: Some(ScopeRow::Ok),
        blockers: vec![],
    }
}

fn running_view() -> StatusView {
    StatusView {
        run_id: "run-7f3a9c".to_owned(),
        state: RunState::Running,
        phase: Some(Phase::Processing),
        task_type: Some(TaskType::Bug),
        iteration: 2,
        max_iterations: 10,
        stage: Stage::Normal,
        summary: Some("The parser now returns an error on empty input, but the new test still panics because `parse_header` unwraps.".to_owned()),
        checklist: vec![
            item("Reproduce the panic on empty input", true, "tests/parser_empty.rs fails on the base commit"),
            item("Return `ParseError::Empty` instead of panicking", true, "src/parser.rs:38 returns Err(ParseError::Empty)"),
            item("All tests pass", false, "parser::tests::empty_input still fails (unwrap in parse_header)"),
        ],
        pending_actions: vec![
            "Remove the `unwrap()` in `parse_header` (src/parser.rs:41)".to_owned(),
            "Run `cargo test` again".to_owned(),
        ],
        verification: Some(verification()),
        question: None,
        usage: usage(),
        dashboard_url: Some("https://closer.example.com/runs/run-7f3a9c".to_owned()),
        next: NextStep::Working { iteration: 3 },
        notices: vec![],
        agent_problem: None,
        progress: None,
    }
}

/// [`verification`] once the tests pass: nothing new fails.
fn tests_passing() -> VerificationView {
    let mut v = verification();
    v.goals[1] = goal(
        "tests_pass: cargo test",
        GoalStatus::Passed,
        true,
        "test result: ok. 12 passed; 0 failed",
    );
    v.baseline = Some(BaselineRow {
        new_failures: vec![],
        already_failing: 3,
        ..BaselineRow::default()
    });
    v
}

fn pr_view() -> PullRequestView {
    let mut v = tests_passing();
    v.goals[3] = goal(
        "lint_passes: cargo clippy",
        GoalStatus::Passed,
        false,
        "no warnings",
    );
    PullRequestView {
        issue: IssueNumber(12),
        issue_title: "Parser panics on empty input".to_owned(),
        task_type: TaskType::Bug,
        summary: "`parse` and `parse_header` return `ParseError::Empty` on empty input instead of panicking; a regression test covers it.".to_owned(),
        commits: vec![
            CommitRow { sha: "9f2c1e4b7a0d3e5f".to_owned(), subject: "Return ParseError::Empty on empty input".to_owned() },
            CommitRow { sha: "1b7d0a9c3e2f4a6b".to_owned(), subject: "Add regression test for empty input".to_owned() },
        ],
        files: vec![
            FileRow { path: "src/parser.rs".to_owned(), added: 18, deleted: 6 },
            FileRow { path: "tests/parser_empty.rs".to_owned(), added: 24, deleted: 0 },
        ],
        verification: v,
        iterations: 3,
        usage: usage(),
        dashboard_url: Some("https://closer.example.com/runs/run-7f3a9c".to_owned()),
    }
}

/// Every fence the text opens is closed (so nothing after it is swallowed).
fn assert_balanced_fences(text: &str) {
    assert_eq!(markdown::close_fences(text), text, "open fence in:\n{text}");
}

/// 100,000 characters of multi-byte text (250,000 bytes).
fn big() -> String {
    "é日🙂x".repeat(25_000)
}
