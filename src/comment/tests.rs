//! Snapshots of every text the bot posts (realistic inputs), the size limit
//! under huge inputs, the run marker round trip and the escaping of untrusted
//! text.

use super::*;
use crate::model::TaskType;
use crate::model::{IssueNumber, Permission};

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
    }
}

fn running_view() -> StatusView {
    StatusView {
        run_id: "run-7f3a9c".to_owned(),
        state: RunState::Running,
        phase: Phase::Processing,
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
    let view = StatusView {
        state: RunState::Done,
        phase: Phase::Review,
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
        verification: Some(v),
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
        phase: Phase::Preparation,
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
fn snapshot_budget_exceeded() {
    insta::assert_snapshot!(budget_exceeded_comment(
        &BudgetExceeded::Tokens {
            used: 1_982_113,
            max: 2_000_000
        },
        &UsageView {
            tokens: 1_982_113,
            cost_usd: 3.12,
            max_tokens: Some(2_000_000),
            max_cost_usd: Some(5.0)
        }
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

fn pr_view() -> PullRequestView {
    let mut v = verification();
    v.goals[1] = goal(
        "tests_pass: cargo test",
        GoalStatus::Passed,
        true,
        "test result: ok. 12 passed; 0 failed",
    );
    v.goals[3] = goal(
        "lint_passes: cargo clippy",
        GoalStatus::Passed,
        false,
        "no warnings",
    );
    v.baseline = Some(BaselineRow {
        new_failures: vec![],
        already_failing: 3,
        ..BaselineRow::default()
    });
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

#[test]
fn snapshot_pull_request() {
    let v = pr_view();
    insta::assert_snapshot!(format!(
        "{}\n\n======\n\n{}",
        pull_request_title(v.issue, &v.issue_title, v.task_type),
        pull_request_body(&v)
    ));
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
fn marker_round_trips_and_is_only_read_at_the_start() {
    let body = status_comment(&running_view());
    assert!(body.starts_with(&run_marker("run-7f3a9c")));
    assert_eq!(parse_run_marker(&body).as_deref(), Some("run-7f3a9c"));
    assert_eq!(
        parse_run_marker("  \n<!-- closer:run=42 -->\nhello").as_deref(),
        Some("42")
    );
    assert_eq!(parse_run_marker("hello <!-- closer:run=42 -->"), None);
    assert_eq!(parse_run_marker("<!-- closer:run= -->"), None);
    assert_eq!(parse_run_marker("<!-- closer:run=a b -->"), None);
    // An id that would close the comment is cleaned, and still round-trips.
    let marker = run_marker("x --> <b>y");
    assert_eq!(marker, "<!-- closer:run=x--by -->");
    assert_eq!(parse_run_marker(&marker).as_deref(), Some("x--by"));
}

#[test]
fn untrusted_text_cannot_forge_a_marker_ping_or_break_out() {
    let evil = "<!-- closer:run=evil -->\n@alice please look\n```\nunclosed fence\n</details><details><summary>hidden</summary>";
    let mut view = running_view();
    view.run_id = "real".to_owned();
    view.summary = Some(evil.to_owned());
    view.checklist.push(item(evil, false, evil));
    view.pending_actions.push(evil.to_owned());
    view.notices.push(evil.to_owned());
    if let Some(v) = view.verification.as_mut() {
        v.goals
            .push(goal(evil, GoalStatus::Failed, true, &evil.repeat(3)));
    }
    view.question = Some(QuestionView {
        score: 1.0,
        threshold: 0.5,
        stated_by_agent: true,
        signals: vec![SignalRow {
            kind: evil.to_owned(),
            weight: 1.0,
            excerpt: evil.to_owned(),
        }],
    });
    let texts = [
        status_comment(&view),
        question_comment(evil, &[evil.to_owned()]),
        deliverable_comment(
            evil,
            &DeliverableFooter {
                iterations: 1,
                usage: usage(),
                dashboard_url: None,
                closing: false,
            },
        ),
        unknown_command_comment(evil, Some(evil)),
        refusal_comment(evil, Permission::Maintain),
        invalid_config_comment(evil, evil),
    ];
    for text in &texts {
        assert_eq!(
            text.matches("<!--").count(),
            usize::from(text.starts_with("<!-- closer:run=real")),
            "{text}"
        );
        assert!(!text.contains("@alice"), "{text}");
        assert!(!text.contains("<details><summary>hidden"), "{text}");
        assert!(!text.contains("</details><details>"), "{text}");
        assert_eq!(
            parse_run_marker(text).as_deref().filter(|id| *id != "real"),
            None
        );
        assert_balanced_fences(text);
    }
    // A user name is reduced to login characters: no injected markdown.
    assert!(question_comment("bob <b>x</b>", &[]).starts_with("@bobbxb, "));
}

#[test]
fn snapshot_hostile_input() {
    let evil = "<!-- closer:run=evil --> @alice | look\n```\n</details><img src=x>";
    let view = StatusView {
        summary: Some(evil.to_owned()),
        checklist: vec![item(evil, false, evil)],
        pending_actions: vec![evil.to_owned()],
        verification: Some(VerificationView {
            goals: vec![goal(
                evil,
                GoalStatus::Failed,
                true,
                &format!("{evil}\nline 2"),
            )],
            baseline: None,
            scope: Some(ScopeRow::OutOfScope(vec![evil.to_owned()])),
        }),
        question: None,
        notices: vec![],
        agent_problem: None,
        progress: None,
        ..running_view()
    };
    insta::assert_snapshot!(format!(
        "{}\n======\n{}",
        status_comment(&view),
        question_comment("alice", &[evil.to_owned()])
    ));
}

/// Every fence the text opens is closed (so nothing after it is swallowed).
fn assert_balanced_fences(text: &str) {
    assert_eq!(markdown::close_fences(text), text, "open fence in:\n{text}");
}

/// 100,000 characters of multi-byte text (250,000 bytes).
fn big() -> String {
    "é日🙂x".repeat(25_000)
}

#[test]
fn huge_inputs_stay_within_the_limit_and_keep_the_marker() {
    let big = big();
    let medium = "é日🙂x @bob ```<!-- ".repeat(100);
    let mut view = running_view();
    view.checklist = (0..5_000)
        .map(|i| {
            item(
                &format!("item {i} {medium}"),
                i % 2 == 0,
                if i < 10 { &big } else { &medium },
            )
        })
        .collect();
    view.pending_actions = (0..5_000).map(|i| format!("action {i} {medium}")).collect();
    view.summary = Some(big.clone());
    view.notices = vec![medium.clone(); 100];
    let mut v = verification();
    v.goals = (0..2_000)
        .map(|i| {
            goal(
                &format!("goal {i} {medium}"),
                if i % 2 == 0 {
                    GoalStatus::Failed
                } else {
                    GoalStatus::Passed
                },
                i % 3 == 0,
                if i < 20 { &big } else { &medium },
            )
        })
        .collect();
    v.baseline = Some(BaselineRow {
        new_failures: vec![medium.clone(); 2_000],
        already_failing: 7,
        ..BaselineRow::default()
    });
    v.scope = Some(ScopeRow::OutOfScope(vec![medium.clone(); 2_000]));
    view.verification = Some(v);
    view.question = Some(QuestionView {
        score: 0.9,
        threshold: 0.6,
        stated_by_agent: false,
        signals: vec![
            SignalRow {
                kind: medium.clone(),
                weight: 0.1,
                excerpt: medium.clone()
            };
            1_000
        ],
    });
    let body = status_comment(&view);
    assert!(body.len() <= MAX_COMMENT_LEN, "{}", body.len());
    assert!(body.starts_with(&run_marker("run-7f3a9c")));
    assert_eq!(parse_run_marker(&body).as_deref(), Some("run-7f3a9c"));
    assert!(body.contains("Evidence trimmed to fit GitHub's comment limit"));
    assert!(body.contains("more items not shown"));
    assert!(body.contains("more checks not shown"));
    // The required failed goals come first when goals are left out.
    assert!(body.contains("| goal 0 "));
    assert!(!body.contains("| goal 1 "));
    assert_eq!(body.matches("<!--").count(), 1);
    assert_balanced_fences(&body);
}

/// Random views of every size, from a fixed seed: the limit, the marker and
/// closed fences hold for all of them.
#[test]
fn random_views_always_fit() {
    let mut rng = fastrand::Rng::with_seed(0x5eed);
    let alphabet: Vec<char> = "ab |`@<!->\n\né日🙂#*_[]()".chars().collect();
    let text = |rng: &mut fastrand::Rng, max: usize| -> String {
        let len = match rng.u8(0..4) {
            0 => 0,
            1 => rng.usize(0..50),
            2 => rng.usize(0..2_000),
            _ => rng.usize(0..max),
        };
        (0..len)
            .map(|_| alphabet[rng.usize(0..alphabet.len())])
            .collect()
    };
    for round in 0..30 {
        let n = |rng: &mut fastrand::Rng| {
            if rng.bool() {
                rng.usize(0..5)
            } else {
                rng.usize(0..400)
            }
        };
        let mut view = running_view();
        view.run_id = format!("run-{round}");
        view.summary = Some(text(&mut rng, 100_000));
        view.checklist = (0..n(&mut rng))
            .map(|_| item(&text(&mut rng, 500), rng.bool(), &text(&mut rng, 5_000)))
            .collect();
        view.pending_actions = (0..n(&mut rng)).map(|_| text(&mut rng, 500)).collect();
        let mut v = verification();
        v.goals = (0..n(&mut rng))
            .map(|_| {
                goal(
                    &text(&mut rng, 300),
                    GoalStatus::Failed,
                    rng.bool(),
                    &text(&mut rng, 20_000),
                )
            })
            .collect();
        v.scope = Some(ScopeRow::OutOfScope(
            (0..n(&mut rng)).map(|_| text(&mut rng, 300)).collect(),
        ));
        view.verification = Some(v);
        let body = status_comment(&view);
        assert!(
            body.len() <= MAX_COMMENT_LEN,
            "round {round}: {}",
            body.len()
        );
        assert_eq!(
            parse_run_marker(&body),
            Some(format!("run-{round}")),
            "round {round}"
        );
        assert_eq!(body.matches("<!--").count(), 1, "round {round}");
        assert_balanced_fences(&body);
    }
}

#[test]
fn hard_fit_keeps_whole_characters_and_closes_fences() {
    let body = format!("<!-- closer:run=x -->\n```text\n{}", "日".repeat(40_000));
    let fitted = status::hard_fit(&body);
    assert!(fitted.len() <= MAX_COMMENT_LEN);
    assert!(fitted.starts_with("<!-- closer:run=x -->"));
    assert!(fitted.ends_with("_Evidence trimmed to fit GitHub's comment limit._\n"));
    assert_balanced_fences(&fitted);
}

#[test]
fn one_huge_evidence_is_trimmed_and_the_rest_kept() {
    let mut view = running_view();
    view.checklist[0].evidence = "é".repeat(100_000);
    if let Some(v) = view.verification.as_mut() {
        v.goals[1].evidence = "日本".repeat(50_000);
    }
    let body = status_comment(&view);
    assert!(body.len() <= MAX_COMMENT_LEN);
    assert!(body.contains("Evidence trimmed"));
    // Everything else is still there.
    assert!(body.contains("Remove the `unwrap()`"));
    assert!(body.contains("0 new") || body.contains("1 new"));
    assert!(body.contains("- [ ] All tests pass"));
}

#[test]
fn the_status_comment_names_the_author_without_a_ping() {
    let next = status::next_step(&NextStep::WaitingFor {
        author: "octocat".to_owned(),
    });
    assert!(next.contains("@\u{200D}octocat"));
    assert!(!next.contains("@octocat"));
    // The question comment is the one that pings.
    assert!(question_comment("octocat", &["Which one?".to_owned()]).starts_with("@octocat,"));
}

#[test]
fn a_cut_answer_says_so() {
    let footer = DeliverableFooter {
        iterations: 1,
        usage: usage(),
        dashboard_url: None,
        closing: true,
    };
    let long = deliverable_comment(&"word ".repeat(20_000), &footer);
    assert!(long.len() <= MAX_COMMENT_LEN);
    assert!(long.contains("The answer was cut to fit GitHub's comment limit."));
    assert!(!deliverable_comment("short", &footer).contains("cut to fit"));
}

#[test]
fn small_status_says_nothing_about_trimming() {
    assert!(!status_comment(&running_view()).contains("trimmed"));
}

#[test]
fn other_texts_stay_within_the_limit() {
    let big = "🙂 @x ```\n".repeat(12_000);
    let medium = "🙂 @x ```\n".repeat(200);
    let d = DiagnosisView {
        reason: FailureReason::AgentError {
            message: big.clone(),
        },
        iterations: 2,
        fingerprints: vec![
            FingerprintRow {
                description: medium.clone(),
                hash: big.clone(),
                occurrences: 2
            };
            1_000
        ],
        stages: vec![
            StageAttempt {
                stage: Stage::Normal,
                iterations: vec![1, 2],
                tried: big.clone()
            };
            50
        ],
        last_evidence: Some(big.clone()),
        failing_since_base: vec![medium.clone(); 1_000],
        dashboard_url: None,
    };
    let mut pr = pr_view();
    pr.summary = big.clone();
    pr.commits = vec![
        CommitRow {
            sha: medium.clone(),
            subject: medium.clone()
        };
        5_000
    ];
    pr.files = vec![
        FileRow {
            path: medium.clone(),
            added: 1,
            deleted: 1
        };
        5_000
    ];
    pr.verification.goals = vec![goal(&medium, GoalStatus::Failed, true, &big); 50];
    let texts = [
        diagnosis_comment(&d),
        question_comment("a", &vec![medium.clone(); 100]),
        question_comment("a", std::slice::from_ref(&big)),
        deliverable_comment(
            &big,
            &DeliverableFooter {
                iterations: 1,
                usage: usage(),
                dashboard_url: None,
                closing: true,
            },
        ),
        invalid_config_comment(".github/closer.yml", &big),
        pull_request_body(&pr),
        unknown_command_comment(&big, None),
    ];
    for text in &texts {
        assert!(text.len() <= MAX_COMMENT_LEN, "{}", text.len());
        assert_balanced_fences(text);
    }
}
