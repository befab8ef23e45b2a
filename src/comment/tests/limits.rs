//! GitHub's comment size limit under huge and random inputs: every text
//! fits, keeps its marker and whole characters, and says what it cut.

use super::*;

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
        unanswered: Vec::new(),
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

/// A one-off comment gets its hidden marker after it is rendered
/// (`post_once_marked`): a question cut to fit still fits with it. Before,
/// five long questions made a body of exactly the limit, and the marker
/// pushed it over (GitHub refuses it, and the question was never posted).
#[test]
fn a_cut_text_leaves_room_for_its_marker() {
    let question = "x\n".repeat(4_000);
    let body = question_comment("a", &vec![question; 5]);
    let marker = "\n<!-- closer:once=r-0123456789abcdef0123456789abcdef:question-12 -->";
    assert!(
        body.contains(status::TRIMMED_NOTE),
        "the control: it was cut"
    );
    assert!(
        body.len() + marker.len() <= MAX_COMMENT_LEN,
        "{}",
        body.len()
    );
}
