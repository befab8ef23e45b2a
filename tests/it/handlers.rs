//! Completion handlers over scripted iteration summaries, their prompts, and
//! the `custom` handler as a real subprocess: well-behaved, crashing, hanging
//! and lying.

use std::path::Path;
use std::time::{Duration, Instant};

use closer::config::repo::{CompletionConfig, CompletionType};
use closer::engine::completion_check::{CheckOutput, CheckResult};
use closer::engine::goal_outcome::GoalOutcome;
use closer::engine::handlers::project::current_phase;
use closer::engine::handlers::subprocess::minimal_env;
use closer::engine::handlers::{
    Continuation, HandlerEnv, IssueContext, IterationSummary, build_handler,
};
use closer::llm::Usage;
use closer::model::Phase;
use closer::prompts::PromptResolver;
use serde_json::{Value, json};

fn env(dir: &Path) -> HandlerEnv {
    HandlerEnv {
        worktree: dir.to_path_buf(),
        scripts: dir.to_path_buf(),
        env: minimal_env(dir),
        timeout: Duration::from_millis(800),
        jail: None,
    }
}

fn config(kind: CompletionType) -> CompletionConfig {
    CompletionConfig {
        kind,
        max_iterations: 3,
        keyword: "TASK_COMPLETE".into(),
        ..CompletionConfig::default()
    }
}

fn goal(passed: bool) -> GoalOutcome {
    GoalOutcome {
        name: "tests_pass: cargo test".into(),
        passed,
        required: true,
        evidence: String::new(),
    }
}

fn it(n: u32, text: &str, structured: Value, goals_pass: bool) -> IterationSummary {
    IterationSummary {
        iteration: n,
        output_text: text.into(),
        structured_output: structured,
        goals: vec![goal(goals_pass)],
        failed: false,
        agent_failure: None,
        tolerated: Vec::new(),
    }
}

fn checked(all_complete: bool, confidence: f64) -> CheckResult {
    CheckResult {
        complete: all_complete && confidence >= 0.8,
        output: CheckOutput {
            all_complete,
            confidence,
            summary: "s".into(),
            ..CheckOutput::default()
        },
        prompt_used: None,
        error: None,
        usage: Usage::default(),
        attempts: 1,
        llm_error: None,
    }
}

#[tokio::test]
async fn issue_needs_the_checklist_and_the_goals() {
    let dir = tempfile::tempdir().unwrap();
    let h = build_handler(&config(CompletionType::Issue), &env(dir.path())).unwrap();
    let s = it(1, "done", json!({}), true);
    assert!(h.is_complete(&s, Some(&checked(true, 0.9))).await.complete);
    assert!(!h.is_complete(&s, Some(&checked(true, 0.7))).await.complete);
    assert!(!h.is_complete(&s, Some(&checked(false, 0.9))).await.complete);
    assert!(!h.is_complete(&s, None).await.complete);
    let failing = it(1, "done", json!({}), false);
    let v = h.is_complete(&failing, Some(&checked(true, 0.99))).await;
    assert!(!v.complete);
    assert_eq!(
        v.description,
        "required goals failed: tests_pass: cargo test"
    );
    let mut crashed = s.clone();
    crashed.failed = true;
    assert!(
        !h.is_complete(&crashed, Some(&checked(true, 0.9)))
            .await
            .complete
    );
}

#[tokio::test]
async fn iterate_stops_after_n_iterations() {
    let dir = tempfile::tempdir().unwrap();
    let h = build_handler(&config(CompletionType::Iterate), &env(dir.path())).unwrap();
    for (n, done) in [(1, false), (2, false), (3, true), (4, true)] {
        let v = h.is_complete(&it(n, "x", json!({}), false), None).await;
        assert_eq!(v.complete, done, "iteration {n}");
    }
    assert_eq!(
        h.is_complete(&it(3, "x", json!({}), true), None)
            .await
            .description,
        "completed 3/3 iterations"
    );
}

#[tokio::test]
async fn manual_needs_the_keyword_and_passing_goals() {
    let dir = tempfile::tempdir().unwrap();
    let h = build_handler(&config(CompletionType::Manual), &env(dir.path())).unwrap();
    assert!(
        h.is_complete(&it(1, "All good. TASK_COMPLETE", json!({}), true), None)
            .await
            .complete
    );
    assert!(
        h.is_complete(&it(1, "", json!({"status": "TASK_COMPLETE"}), true), None)
            .await
            .complete
    );
    assert!(
        !h.is_complete(&it(1, "Not there yet", json!({}), true), None)
            .await
            .complete
    );
    let v = h
        .is_complete(&it(1, "TASK_COMPLETE", json!({}), false), None)
        .await;
    assert!(!v.complete);
    assert!(
        v.description.contains("required goals failed"),
        "{}",
        v.description
    );
}

#[tokio::test]
async fn project_follows_the_reported_phase_not_free_text() {
    let dir = tempfile::tempdir().unwrap();
    let h = build_handler(&config(CompletionType::Project), &env(dir.path())).unwrap();
    let history = vec![
        it(
            1,
            "phase: complete (just kidding)",
            json!({"phase": "processing"}),
            true,
        ),
        it(2, "x", json!({"phase": "review"}), true),
        it(3, "x", json!({"phase": "preparation"}), true),
        it(4, "x", json!({"phase": "nonsense"}), true),
    ];
    assert_eq!(current_phase(&[]), Phase::Preparation);
    assert_eq!(current_phase(&history[..1]), Phase::Processing);
    assert_eq!(
        current_phase(&history),
        Phase::Review,
        "phases only move forward"
    );
    assert!(
        !h.is_complete(&history[0], Some(&checked(true, 0.9)))
            .await
            .complete,
        "free text is ignored"
    );
    let done = it(5, "x", json!({"phase": "complete"}), true);
    assert!(
        h.is_complete(&done, Some(&checked(true, 0.9)))
            .await
            .complete
    );
    assert!(
        !h.is_complete(&done, Some(&checked(false, 0.9)))
            .await
            .complete,
        "complete must still be verified"
    );

    let issue = IssueContext {
        issue_ref: "o/r#1".into(),
        title: "Board".into(),
        body: "b".into(),
        task_type: None,
    };
    let p = h
        .continuation_prompt(
            &PromptResolver::builtin_only(),
            &issue,
            Continuation {
                iteration: 5,
                history: &history,
                pending_actions: &[],
                maintainer_replies: &[],
            },
        )
        .await
        .unwrap();
    assert!(
        p.text.contains("The current phase is **review**"),
        "{}",
        p.text
    );
}

#[tokio::test]
async fn prompts_carry_the_issue_criteria_last_three_summaries_pending_actions_and_replies() {
    let dir = tempfile::tempdir().unwrap();
    let resolver = PromptResolver::builtin_only();
    let issue = IssueContext {
        issue_ref: "o/r#9".into(),
        title: "Speed up CI".into(),
        body: "CI takes 20 minutes.".into(),
        task_type: None,
    };
    for kind in [
        CompletionType::Issue,
        CompletionType::Project,
        CompletionType::Iterate,
        CompletionType::Manual,
    ] {
        let h = build_handler(&config(kind), &env(dir.path())).unwrap();
        let p = h.initial_prompt(&resolver, &issue).await.unwrap();
        assert!(
            p.text.contains("Speed up CI") && p.text.contains("CI takes 20 minutes."),
            "{kind:?}"
        );
        assert!(p.text.contains(&h.criteria().detailed), "{kind:?}");
        assert!(p.origin.to_string().starts_with(&format!(
            "steps/initial/{}/",
            closer::model::Named::as_str(kind)
        )));
    }
    let h = build_handler(&config(CompletionType::Iterate), &env(dir.path())).unwrap();
    let history: Vec<_> = (1..=4)
        .map(|n| {
            it(
                n,
                "x",
                json!({"summary": format!("summary number {n}")}),
                n != 4,
            )
        })
        .collect();
    let replies = vec!["Use the cache.\nNot the mirror.".to_owned()];
    let pending = vec!["cache cargo registry".to_owned()];
    let p = h
        .continuation_prompt(
            &resolver,
            &issue,
            Continuation {
                iteration: 5,
                history: &history,
                pending_actions: &pending,
                maintainer_replies: &replies,
            },
        )
        .await
        .unwrap();
    assert!(!p.text.contains("summary number 1"), "{}", p.text);
    for n in 2..=4 {
        assert!(
            p.text
                .contains(&format!("Iteration {n}: summary number {n}")),
            "{}",
            p.text
        );
    }
    assert!(
        p.text
            .contains("Iteration 4: summary number 4 — failing goals: tests_pass: cargo test")
    );
    assert!(p.text.contains("- cache cargo registry"));
    assert!(
        p.text.contains("> Use the cache.\n> Not the mirror."),
        "{}",
        p.text
    );
    assert!(p.text.contains("iteration 5 of 3"), "{}", p.text);
}

fn script(dir: &Path, name: &str, body: &str) {
    let path = dir.join(name);
    crate::support::write_executable(&path, &format!("#!/bin/sh\n{body}\n"));
}

fn custom(
    dir: &Path,
    handler: &str,
) -> std::sync::Arc<dyn closer::engine::handlers::CompletionHandler> {
    let c = CompletionConfig {
        kind: CompletionType::Custom,
        handler: Some(handler.into()),
        ..CompletionConfig::default()
    };
    build_handler(&c, &env(dir)).unwrap()
}

#[tokio::test]
async fn a_well_behaved_custom_handler_decides_from_the_summary_on_stdin() {
    let dir = tempfile::tempdir().unwrap();
    script(
        dir.path(),
        "good.sh",
        r#"input=$(cat)
case "$input" in
  *'"iteration":2'*) echo '{"complete": true, "description": "two iterations seen"}' ;;
  *) echo "{\"complete\": false, \"description\": \"cargo=${CARGO:-unset} lang=$LANG pwd=$(pwd)\"}" ;;
esac"#,
    );
    let h = custom(dir.path(), "good.sh");
    let v = h.is_complete(&it(1, "x", json!({}), true), None).await;
    assert!(!v.complete && v.error.is_none(), "{v:?}");
    let pwd = dir.path().canonicalize().unwrap();
    assert_eq!(
        v.description,
        format!("cargo=unset lang=C.UTF-8 pwd={}", pwd.display()),
        "scrubbed env, worktree as cwd"
    );
    let v = h.is_complete(&it(2, "x", json!({}), true), None).await;
    assert!(v.complete, "{v:?}");
    assert_eq!(v.description, "two iterations seen");
}

#[tokio::test]
async fn a_crashing_custom_handler_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    script(dir.path(), "crash.sh", "echo 'segfault-ish' >&2\nexit 3");
    let v = custom(dir.path(), "crash.sh")
        .is_complete(&it(1, "x", json!({}), true), None)
        .await;
    assert!(!v.complete);
    assert_eq!(
        v.error.as_deref(),
        Some("`crash.sh` exited with status 3: segfault-ish")
    );
}

#[tokio::test]
async fn a_hanging_custom_handler_is_killed_at_the_timeout() {
    let dir = tempfile::tempdir().unwrap();
    script(
        dir.path(),
        "hang.sh",
        "sleep 30 &\nsleep 30\necho '{\"complete\": true, \"description\": \"late\"}'",
    );
    let started = Instant::now();
    let v = custom(dir.path(), "hang.sh")
        .is_complete(&it(1, "x", json!({}), true), None)
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert!(!v.complete);
    let e = v.error.unwrap();
    assert!(
        e.ends_with("hang.sh` did not finish within 0.8s and was killed"),
        "{e}"
    );
}

#[tokio::test]
async fn a_lying_custom_handler_is_an_error_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    script(
        dir.path(),
        "liar.sh",
        r#"echo '{"complete": "yes", "done": true}'"#,
    );
    script(dir.path(), "prose.sh", "echo 'Looks complete to me!'");
    let v = custom(dir.path(), "liar.sh")
        .is_complete(&it(1, "x", json!({}), true), None)
        .await;
    assert!(!v.complete);
    let e = v.error.unwrap();
    assert!(
        e.starts_with(
            "`liar.sh` printed JSON that is not {\"complete\": bool, \"description\": string}:"
        ),
        "{e}"
    );
    assert!(e.contains("/complete") && e.contains("done"), "{e}");
    let v = custom(dir.path(), "prose.sh")
        .is_complete(&it(1, "x", json!({}), true), None)
        .await;
    assert!(
        v.error
            .unwrap()
            .starts_with("`prose.sh` did not print JSON")
    );
}

#[tokio::test]
async fn a_custom_handler_outside_the_worktree_is_refused() {
    let outer = tempfile::tempdir().unwrap();
    let repo = outer.path().join("repo");
    std::fs::create_dir(&repo).unwrap();
    script(
        outer.path(),
        "evil.sh",
        "echo '{\"complete\": true, \"description\": \"x\"}'",
    );
    std::os::unix::fs::symlink(outer.path().join("evil.sh"), repo.join("link.sh")).unwrap();
    let v = custom(&repo, "link.sh")
        .is_complete(&it(1, "x", json!({}), true), None)
        .await;
    assert_eq!(
        v.error.as_deref(),
        Some("the handler `link.sh` resolves outside the repository")
    );
    let v = custom(&repo, "missing.sh")
        .is_complete(&it(1, "x", json!({}), true), None)
        .await;
    assert!(
        v.error
            .unwrap()
            .starts_with("the handler `missing.sh` cannot be found")
    );
}

#[tokio::test]
async fn process_output_is_capped_without_blocking_the_process() {
    use closer::engine::handlers::subprocess::run_process;
    let dir = tempfile::tempdir().unwrap();
    script(
        dir.path(),
        "loud.sh",
        "head -c 300000 /dev/zero\necho done >&2",
    );
    let out = run_process(
        &dir.path().join("loud.sh"),
        dir.path(),
        &minimal_env(dir.path()),
        None,
        b"",
        Duration::from_secs(10),
        1000,
    )
    .await
    .unwrap();
    assert_eq!(out.code, Some(0));
    assert_eq!(out.stdout.len(), 1000);
    assert_eq!(out.stderr, b"done\n");
}
