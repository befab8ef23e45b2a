//! Snapshots of every text the bot posts, from realistic inputs.

use super::*;
use crate::model::Permission;

#[test]
fn snapshot_status_running() {
    insta::assert_snapshot!(status_comment(&running_view()));
}

#[test]
fn snapshot_status_awaiting_response() {
    let view = StatusView {
        state: RunState::AwaitingResponse,
        iteration: 1,
        checklist: vec![item("Decide which config format to support", false, "")],
        pending_actions: vec![],
        verification: None,
        summary: Some("The issue does not say whether TOML or YAML is wanted.".to_owned()),
        question: Some(QuestionView {
            score: 0.85,
            threshold: 0.6,
            stated_by_agent: false,
            signals: vec![
                SignalRow {
                    kind: "ends with a question mark".to_owned(),
                    weight: 0.4,
                    excerpt: "Should I support TOML or YAML?".to_owned(),
                },
                SignalRow {
                    kind: "asks for a choice".to_owned(),
                    weight: 0.45,
                    excerpt: "TOML or YAML".to_owned(),
                },
            ],
        }),
        next: NextStep::WaitingFor {
            author: "octocat".to_owned(),
        },
        dashboard_url: None,
        ..running_view()
    };
    insta::assert_snapshot!(status_comment(&view));
}

/// The verification table with the baseline spelled out: a failure that
/// was there at base and blocks, one the repository tolerates (its goal
/// shown as tolerated, never as passed), the tests fixed since base, and
/// the bug's reproduction.
#[test]
fn snapshot_status_with_the_baseline_spelled_out() {
    let mut v = verification();
    v.goals[1] = goal(
        "tests_pass: python3 -m unittest -v",
        GoalStatus::Tolerated,
        true,
        "exit 1; failing: test_calc.CalcTest.test_legacy",
    );
    v.goals.push(goal(
        "Reproduction",
        GoalStatus::Passed,
        true,
        "fail → pass: test_calc.CalcTest.test_add, test_calc.CalcTest.test_add_negative",
    ));
    v.baseline = Some(BaselineRow {
        new_failures: vec![],
        already_failing: 2,
        failing_since_base: vec!["test_calc.CalcTest.test_add_negative".to_owned()],
        tolerated: vec!["test_calc.CalcTest.test_legacy".to_owned()],
        fixed_since_base: vec!["test_calc.CalcTest.test_add".to_owned()],
    });
    let view = StatusView {
        verification: Some(v),
        ..running_view()
    };
    insta::assert_snapshot!(status_comment(&view));
}

#[test]
fn snapshot_status_review() {
    let view = StatusView {
        state: RunState::Done,
        phase: Some(Phase::Review),
        iteration: 3,
        stage: Stage::MinimalFix,
        checklist: running_view()
            .checklist
            .into_iter()
            .map(|i| ChecklistRow {
                completed: true,
                ..i
            })
            .collect(),
        pending_actions: vec![],
        verification: Some(tests_passing()),
        next: NextStep::PullRequestOpen {
            number: IssueNumber(13),
            close_on_merge: true,
        },
        notices: vec![
            "The project board has no Status option named \"review\"; the board was not updated."
                .to_owned(),
        ],
        ..running_view()
    };
    insta::assert_snapshot!(status_comment(&view));
}

/// A maintainer closed the verified run's pull request unmerged: no phase
/// (its label is gone), and the next line says why the run failed.
#[test]
fn snapshot_status_pull_request_closed_unmerged() {
    let view = StatusView {
        state: RunState::Failed,
        phase: None,
        iteration: 3,
        pending_actions: vec![],
        verification: Some(tests_passing()),
        next: NextStep::PullClosed {
            number: IssueNumber(13),
        },
        ..running_view()
    };
    let body = status_comment(&view);
    assert!(!body.contains("**Phase:**"), "{body}");
    insta::assert_snapshot!(body);
}

#[test]
fn snapshot_status_agent_denied_permission() {
    let view = StatusView {
        agent_problem: Some(
            "the agent was denied permission to edit calc.py, run `python3 -m unittest`".into(),
        ),
        ..running_view()
    };
    insta::assert_snapshot!(status_comment(&view));
}

#[test]
fn snapshot_status_waiting_for_the_model_provider() {
    let view = StatusView {
        iteration: 0,
        summary: None,
        checklist: vec![],
        pending_actions: vec![],
        verification: None,
        next: NextStep::WaitingForModel { iteration: 1 },
        agent_problem: Some(
            "the agent's model provider is unavailable since 2026-11-23 15:00 UTC: API Error: 503 Service Unavailable. This is a server-side issue, usually temporary — try again in a moment.".into(),
        ),
        ..running_view()
    };
    insta::assert_snapshot!(status_comment(&view));
}

#[test]
fn snapshot_status_queued() {
    let view = StatusView {
        state: RunState::Queued,
        phase: Some(Phase::Preparation),
        task_type: None,
        iteration: 0,
        summary: None,
        checklist: vec![],
        pending_actions: vec![],
        verification: None,
        usage: UsageView::default(),
        next: NextStep::Queued,
        ..running_view()
    };
    insta::assert_snapshot!(status_comment(&view));
}

#[test]
fn snapshot_question() {
    insta::assert_snapshot!(question_comment(
        "octocat",
        &["Should I support TOML or YAML for the new config file?\n\nYAML matches `.github/closer.yml`; TOML matches `Cargo.toml`.".to_owned(),
          "May I rename `Config::load` to `Config::from_path`? @maintainer-team mentioned it.".to_owned()]
    ));
}

#[test]
fn snapshot_diagnosis_convergence() {
    let d = DiagnosisView {
        reason: FailureReason::ConvergenceStopped,
        iterations: 6,
        fingerprints: vec![
            FingerprintRow {
                description:
                    "cargo test: parser::tests::empty_input (unwrap on None at src/parser.rs)"
                        .to_owned(),
                hash: "a41f09c2".to_owned(),
                occurrences: 5,
            },
            FingerprintRow {
                description: "cargo clippy: unused variable `x`".to_owned(),
                hash: "03be77d1".to_owned(),
                occurrences: 1,
            },
        ],
        stages: vec![
            StageAttempt {
                stage: Stage::Normal,
                iterations: vec![1, 2, 3],
                tried: "rewrote parse_header to return Result; added the empty-input test"
                    .to_owned(),
            },
            StageAttempt {
                stage: Stage::MinimalFix,
                iterations: vec![4, 5, 6],
                tried:
                    "limited to src/parser.rs within 400 changed lines; the same test kept failing"
                        .to_owned(),
            },
        ],
        last_evidence: Some(FAILING_TEST.to_owned()),
        failing_since_base: vec!["test_calc.CalcTest.test_legacy".to_owned()],
        unanswered: Vec::new(),
        dashboard_url: Some("https://closer.example.com/runs/run-7f3a9c".to_owned()),
    };
    insta::assert_snapshot!(diagnosis_comment(&d));
}

#[test]
fn snapshot_diagnosis_other_reasons() {
    let reasons = [
        FailureReason::IterationLimit { max: 10 },
        FailureReason::BaselineBroken {
            detail: "`cargo build` exits 101 on main (error[E0425] in src/lib.rs)".to_owned(),
        },
        FailureReason::BudgetExceeded(BudgetExceeded::Cost {
            used_usd: 4.91,
            max_usd: 5.0,
        }),
        FailureReason::AgentError {
            message: "timed out after 1800 s".to_owned(),
        },
        FailureReason::PushRefused {
            detail: "HEAD moved after verification (verified 8e01947a, HEAD is 1a10282f)"
                .to_owned(),
        },
        FailureReason::WorkflowRefused {
            path: ".github/workflows/ci.yml".to_owned(),
        },
        FailureReason::RulesRefused {
            rules: vec!["Commits must have verified signatures.".to_owned()],
        },
    ];
    let all: Vec<String> = reasons
        .into_iter()
        .map(|reason| {
            diagnosis_comment(&DiagnosisView {
                reason,
                iterations: 1,
                fingerprints: vec![],
                stages: vec![],
                last_evidence: None,
                failing_since_base: vec![],
                unanswered: Vec::new(),
                dashboard_url: None,
            })
        })
        .collect();
    insta::assert_snapshot!(all.join("\n\n======\n\n"));
}

#[test]
fn snapshot_label_refusal() {
    insta::assert_snapshot!(label_refusal_comment(
        "trinity",
        "closer",
        Permission::Write
    ));
}

#[test]
fn snapshot_label_removal_refusal() {
    insta::assert_snapshot!(label_removal_refusal_comment(
        "trinity",
        "closer",
        Permission::Write
    ));
}

#[test]
fn snapshot_refusal() {
    insta::assert_snapshot!(refusal_comment("drive-by-user", Permission::Write));
}

#[test]
fn snapshot_unknown_command() {
    insta::assert_snapshot!(format!(
        "{}\n\n{}",
        unknown_command_comment("rety", Some("retry")),
        unknown_command_comment("`deploy` <!-- x -->", None)
    ));
}

#[test]
fn snapshot_status_answer() {
    insta::assert_snapshot!(format!(
        "{}\n\n======\n\n{}",
        status_answer(
            Some(&running_view()),
            Some("https://github.com/acme/widgets/issues/12#issuecomment-1001")
        ),
        status_answer(None, None)
    ));
}

#[test]
fn snapshot_invalid_config() {
    let errors = ".github/closer.yml:4:3: unknown field `max_iteration`, expected one of `type`, `max_iterations`, `confidence_threshold`, `keyword`, `handler`\n.github/closer.yml:9:11: invalid value for `close_on`: `later` (expected `verified` or `merged`)";
    insta::assert_snapshot!(invalid_config_comment(".github/closer.yml", errors));
}

#[test]
fn snapshot_deliverable() {
    let answer = "The `docs/` directory holds:\n\n- `architecture.md`: the map of the modules\n- `runbook.md`: how to operate closer\n\n```text\ndocs/\n├── architecture.md\n└── runbook.md\n```";
    insta::assert_snapshot!(deliverable_comment(
        answer,
        &DeliverableFooter {
            iterations: 1,
            usage: usage(),
            dashboard_url: None,
            closing: true
        }
    ));
}

/// Under `close_on: merged` an answer leaves the issue for a person to
/// close, and says so.
#[test]
fn snapshot_deliverable_left_open() {
    insta::assert_snapshot!(deliverable_comment(
        "The limit is 100 requests a minute.",
        &DeliverableFooter {
            iterations: 2,
            usage: usage(),
            dashboard_url: None,
            closing: false
        }
    ));
}

#[test]
fn snapshot_pull_request() {
    let v = pr_view();
    insta::assert_snapshot!(format!(
        "{}\n\n======\n\n{}",
        pull_request_title(v.issue, &v.issue_title, v.task_type),
        pull_request_body(&v)
    ));
}

/// A person pushed to the branch; the verification at the new head found a
/// test that passed at base no longer run. Every row passes: the verdict
/// row says the head is not verified, and why (decision 256). A failing
/// row says it by itself, and then the verdict adds no row.
#[test]
fn a_head_not_verified_for_a_reason_without_a_row_says_so_in_the_table() {
    let mut v = pr_view();
    v.verification.blockers = vec!["no longer run: parser::tests::empty_input".to_owned()];
    let body = pull_request_body(&v);
    assert!(
        body.contains(
            "| Verdict | ❌ not verified | required | no longer run: parser::tests::empty_input |"
        ),
        "{body}"
    );
    let mut failing = running_view();
    if let Some(table) = failing.verification.as_mut() {
        table.blockers = vec!["new failure".to_owned()];
    }
    assert!(!status_comment(&failing).contains("| Verdict |"));
    assert!(!pull_request_body(&pr_view()).contains("| Verdict |"));
}

#[test]
fn pull_request_title_is_one_line_and_within_limit() {
    let long = "word ".repeat(200) + "\nsecond line 日本語";
    let title = pull_request_title(IssueNumber(7), &long, TaskType::Feature);
    assert!(title.chars().count() <= 256, "{}", title.chars().count());
    assert!(!title.contains('\n'));
    assert!(title.starts_with("feat: word word"));
    assert!(title.ends_with(" (#7)"));
}

#[test]
fn snapshot_nothing_to_retry() {
    let all = [
        RunState::AwaitingResponse,
        RunState::Running,
        RunState::Verifying,
    ]
    .map(nothing_to_retry_answer);
    insta::assert_snapshot!(all.join("\n\n======\n\n"));
}
