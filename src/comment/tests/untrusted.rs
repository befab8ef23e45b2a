//! Untrusted text in the bot's texts: the run marker round trip, and no
//! forged marker, ping, fence or HTML block getting through.

use super::*;
use crate::model::Permission;

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
            blockers: vec![evil.to_owned()],
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
