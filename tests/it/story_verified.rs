//! "Verified" means verified: stories that try to get an issue closed
//! without the evidence — a partial fix of a bug whose test was already
//! failing, an unrelated failure at base, a fix without a reproducing test,
//! one failure that never goes away, and agents that lie — and the one
//! story each ends in instead. Every story's `idle` also checks that no
//! issue was closed under a status with a failed required check
//! (`Story::assert_one_truth`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use closer::model::{RunState, Stage};
use serde_json::{Value, json};

use crate::support::OutputApart as _;
use crate::support::fake_llm::Reply;
use crate::support::story::{CONFIG, Story};

/// The issue's own example: `add` subtracts, and both of its tests fail on
/// the default branch because of the bug.
const CALC_PY: &str = "def add(a, b):\n    return a - b\n\n\ndef legacy():\n    return 0\n";
const TEST_CALC_PY: &str = "import unittest\n\nfrom calc import add\n\n\nclass CalcTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_add_negative(self):\n        self.assertEqual(add(-1, 1), 0)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";
/// The same, with a test of something else that fails at base too.
const TEST_CALC_WITH_LEGACY_PY: &str = "import unittest\n\nfrom calc import add, legacy\n\n\nclass CalcTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n    def test_add_negative(self):\n        self.assertEqual(add(-1, 1), 0)\n\n    def test_legacy(self):\n        self.assertEqual(legacy(), 1)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";
const PY_CONFIG: &str = "dod:\n  - { type: tests_pass, command: \"python3 -m unittest -v\" }\n";
const GITIGNORE: &str = "__pycache__/\n";

async fn python_story(name: &str, config: &str, tests: &str) -> Story {
    let files = [
        ("calc.py", CALC_PY),
        ("test_calc.py", tests),
        (".gitignore", GITIGNORE),
    ];
    Story::start_with_files(name, Some(config), &files).await
}

/// The completion check's answer: `add` fixed, the tolerated
/// `test_legacy` outside the issue's scope.
fn legacy_judged_out_of_scope() -> Reply {
    Reply::Answer(json!({
        "checklist": [
            {"id": "fix", "description": "add adds", "completed": true, "evidence": "tests"},
            {"id": "tolerated-1", "description": "test_legacy: about legacy(), not add",
             "completed": true, "evidence": "outside the issue's scope"}
        ],
        "allComplete": true, "summary": "add fixed", "confidence": 0.95, "pendingActions": []
    }))
}

/// The run is done; the completion check was asked about the tolerated
/// `test_legacy`, and the pull request lists it as tolerated.
async fn assert_done_with_legacy_judged_and_listed(s: &Story, n: closer::model::IssueNumber) {
    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    let check = s.llm.requests()[0].body.to_string();
    assert!(
        check.contains("tolerated-") && check.contains("test_legacy"),
        "{check}"
    );
    let body = s.github.pulls(&s.repo)[0].body.clone().unwrap_or_default();
    assert!(
        body.contains("| Tolerated failures | ⚠️ tolerated |")
            && body.contains("test_calc.CalcTest.test_legacy"),
        "{body}"
    );
}

/// An agent step that rewrites `add` and reports `summary`.
fn write_add(body: &str, summary: &str) -> String {
    format!(
        "cat > calc.py <<'T'\ndef add(a, b):\n    return {body}\n\n\ndef legacy():\n    return 0\nT\necho '{{\"summary\": \"{summary}\"}}'\n"
    )
}

/// An iteration that changes nothing and says it is done.
const CLAIMS_DONE: &str = "echo '{\"summary\": \"All tests pass. The issue is fixed.\"}'\n";

fn done() -> Reply {
    Reply::closer(true, 0.95, &[])
}

/// The bodies the status comment was edited to, in order.
fn status_edits(s: &Story, n: closer::model::IssueNumber) -> Vec<String> {
    let status = s.status_comment(n);
    let path = format!("/repos/octo/calc/issues/comments/{}", status.id);
    s.github
        .requests_to("PATCH", &path)
        .iter()
        .filter_map(|r| serde_json::from_str::<Value>(&r.body).ok())
        .filter_map(|b| b["body"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_partial_fix_is_not_closed_and_the_full_fix_closes_with_its_reproduction() {
    let mut s = python_story("verified-partial", PY_CONFIG, TEST_CALC_PY).await;
    s.llm.push([done(), done()]);
    s.agent_step(1, &write_add("a + b if a > 0 else a - b", "Fixed add."));
    s.agent_step(
        2,
        &write_add("a + b", "Fixed add for negative numbers too."),
    );
    let n = s
        .open_issue("add() is wrong", "fix add", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert_eq!(run.iteration, 2, "the partial fix did not close the issue");
    let after_partial = status_edits(&s, n)
        .into_iter()
        .find(|b| b.contains("Iteration:** 1 of"))
        .expect("the status after iteration 1");
    assert!(
        after_partial.contains("Failing since base")
            && after_partial.contains("test_calc.CalcTest.test_add_negative"),
        "{after_partial}"
    );
    assert!(!after_partial.contains("closer: done"), "{after_partial}");

    let status = s.status_comment(n).body;
    assert!(
        status.contains("| Reproduction | ✅ passed | required |"),
        "{status}"
    );
    assert!(
        status.contains(
            "fail → pass: test_calc.CalcTest.test_add, test_calc.CalcTest.test_add_negative"
        ),
        "{status}"
    );
    let pull = &s.github.pulls(&s.repo)[0];
    let body = pull.body.clone().unwrap_or_default();
    assert!(body.contains("| Reproduction | ✅ passed |"), "{body}");
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_unrelated_failure_at_base_blocks_by_default_and_says_how_to_tolerate_it() {
    let mut s = python_story(
        "verified-legacy-strict",
        PY_CONFIG,
        TEST_CALC_WITH_LEGACY_PY,
    )
    .await;
    s.llm.push([done(), done(), done(), done()]);
    s.agent_step(1, &write_add("a + b", "Fixed add."));
    s.agent_step(2, CLAIMS_DONE);
    s.agent_step(3, CLAIMS_DONE);
    let n = s
        .open_issue("add() is wrong", "fix add", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Failed, "{}", s.journal().await);
    assert_eq!(s.github.issue(&s.repo, n).state, "open");
    let diagnosis = s
        .bot_comments(n)
        .into_iter()
        .find(|c| c.body.contains("closer:once=") && c.body.contains("diagnosis"))
        .expect("a diagnosis comment");
    assert!(
        diagnosis.body.contains("test_calc.CalcTest.test_legacy")
            && diagnosis.body.contains("tolerate: preexisting"),
        "{}",
        diagnosis.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn with_preexisting_failures_tolerated_the_run_closes_and_lists_them() {
    let config = format!("{PY_CONFIG}baseline:\n  tolerate: preexisting\n");
    let mut s = python_story(
        "verified-legacy-tolerated",
        &config,
        TEST_CALC_WITH_LEGACY_PY,
    )
    .await;
    s.llm.push([legacy_judged_out_of_scope()]);
    s.agent_step(1, &write_add("a + b", "Fixed add."));
    let n = s
        .open_issue("add() is wrong", "fix add", &["closer", "type:bug"])
        .await;
    s.idle().await;

    assert_done_with_legacy_judged_and_listed(&s, n).await;
    let status = s.status_comment(n).body;
    assert!(status.contains("⚠️ tolerated"), "{status}");
}

/// Tolerated, a failing test the agent skips is still a tolerated failure:
/// the completion check is asked whether it is within the issue's scope,
/// and reviewers see it listed, as they would if it still failed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tolerated_failure_the_agent_skips_is_still_judged_and_listed() {
    let config = format!("{PY_CONFIG}baseline:\n  tolerate: preexisting\n");
    let mut s = python_story("verified-legacy-skipped", &config, TEST_CALC_WITH_LEGACY_PY).await;
    s.llm.push([legacy_judged_out_of_scope()]);
    let skip = "sed -i 's/    def test_legacy/    @unittest.skip(\"later\")\\n    def test_legacy/' test_calc.py\n";
    s.agent_step(1, &format!("{skip}{}", write_add("a + b", "Fixed add.")));
    let n = s
        .open_issue("add() is wrong", "fix add", &["closer", "type:bug"])
        .await;
    s.idle().await;

    assert_done_with_legacy_judged_and_listed(&s, n).await;
}

/// A tolerated failure the completion check judges to be within the
/// issue's scope keeps the checklist open: the run is not closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tolerated_failure_within_the_issues_scope_keeps_the_run_open() {
    legacy_in_scope(
        "verified-legacy-in-scope",
        "completion:\n  max_iterations: 1\n",
        "Fixed add.",
    )
    .await;
}

/// The same with `completion: manual`: the agent's keyword and passing
/// goals do not close the issue while the test it is about, tolerated as
/// failing at base, still fails (decision 250). Before, only the `issue`
/// and `project` handlers read the checklist's tolerated items.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tolerated_failure_within_the_issues_scope_keeps_a_manual_run_open() {
    legacy_in_scope(
        "verified-legacy-manual",
        "completion:\n  type: manual\n  keyword: ALL_DONE\n  max_iterations: 1\n",
        "Fixed add. ALL_DONE",
    )
    .await;
}

/// `test_legacy` fails at base and is tolerated; the issue asks for
/// legacy() too, and the completion check says so; the agent fixes add
/// alone, saying `summary`.
async fn legacy_in_scope(name: &str, completion: &str, summary: &str) {
    let config = format!("{PY_CONFIG}baseline:\n  tolerate: preexisting\n{completion}");
    let mut s = python_story(name, &config, TEST_CALC_WITH_LEGACY_PY).await;
    let in_scope = Reply::Answer(json!({
        "checklist": [
            {"id": "fix", "description": "add adds", "completed": true, "evidence": "tests"},
            {"id": "tolerated-1", "description": "test_legacy", "completed": false,
             "evidence": "the issue asks for legacy() too"}
        ],
        "allComplete": false, "summary": "legacy still broken", "confidence": 0.9,
        "pendingActions": ["Fix legacy()"]
    }));
    s.llm.push([in_scope]);
    s.agent_step(1, &write_add("a + b", summary));
    let n = s
        .open_issue(
            "add() and legacy() are wrong",
            "fix both",
            &["closer", "type:bug"],
        )
        .await;
    s.idle().await;
    assert_ne!(s.run(n).await.unwrap().state, RunState::Done);
    assert_eq!(s.github.issue(&s.repo, n).state, "open");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_bug_fix_without_a_reproducing_test_is_asked_for_one_and_then_closes() {
    let mut s = Story::start("verified-repro", Some(CONFIG)).await;
    s.llm.push([done(), done()]);
    let fix_only = "cat > calc.sh <<'T'\nadd() { echo $(( $1 + $2 )); }\nT\necho '{\"summary\": \"Fixed add.\"}'\n".to_owned();
    let the_test = "cat > tests/add.sh <<'T'\nr=$(. ./calc.sh; add 2 3)\n[ \"$r\" = 5 ]\nT\necho '{\"summary\": \"Added a test that reproduces the bug.\"}'\n".to_owned();
    s.agent_step(1, &fix_only);
    s.agent_step(2, &the_test);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert_eq!(run.iteration, 2, "the fix alone did not close the issue");
    assert!(
        s.prompt(2).contains("reproduce"),
        "the next prompt asks for a reproducing test:\n{}",
        s.prompt(2)
    );
    let after_fix = status_edits(&s, n)
        .into_iter()
        .find(|b| b.contains("Iteration:** 1 of"))
        .expect("the status after iteration 1");
    assert!(
        after_fix.contains("| Reproduction | ❌ failed | required |")
            && after_fix.contains("reproduce"),
        "{after_fix}"
    );
    let status = s.status_comment(n).body;
    assert!(status.contains("fail → pass: tests/add.sh"), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_persistent_failure_among_changing_others_escalates_then_fails_naming_it() {
    let mut s = Story::start("verified-persist", Some(CONFIG)).await;
    let not_done = || Reply::closer(false, 0.5, &["Make the tests pass"]);
    s.llm.push([not_done(), not_done(), not_done(), not_done()]);
    let step = |passing: &str, failing: &str| {
        format!(
            "echo 'exit 1' > tests/persist.sh\necho 'true' > tests/{passing}.sh\necho 'exit 1' > tests/{failing}.sh\necho '# {failing}' >> calc.sh\necho '{{\"summary\": \"Working on it.\"}}'\n"
        )
    };
    s.agent_step(1, &step("z", "a"));
    s.agent_step(2, &step("a", "b"));
    s.agent_step(3, &step("b", "c"));
    let n = s
        .open_issue("a feature", "", &["closer", "type:feature"])
        .await;
    s.idle().await;

    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Failed, "{}", s.journal().await);
    assert_eq!(run.iteration, 3);
    assert_eq!(run.stage, Stage::Stopped);
    assert!(
        status_edits(&s, n).iter().any(|b| b.contains("Stage:** 2")),
        "stage 2 came first"
    );
    let diagnosis = s
        .bot_comments(n)
        .into_iter()
        .find(|c| c.body.contains("closer:once=") && c.body.contains("diagnosis"))
        .expect("a diagnosis comment");
    assert!(
        diagnosis.body.contains("tests/persist.sh"),
        "{}",
        diagnosis.body
    );
}

/// The agent takes `steps` at the bug "add subtracts", whose iterations the
/// judge finds done `dones` times; the story is idle after it.
async fn work_the_bug(s: &mut Story, dones: usize, steps: &[&str]) -> closer::model::IssueNumber {
    for _ in 0..dones {
        s.llm.push([done()]);
    }
    for (i, step) in steps.iter().enumerate() {
        s.agent_step(i as u32 + 1, step);
    }
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;
    n
}

/// How a lying agent's story ends: never closed.
async fn never_closed(mut s: Story, steps: &[&str]) -> (Story, closer::model::IssueNumber) {
    let n = work_the_bug(&mut s, 4, steps).await;
    let run = s.run(n).await.expect("a run");
    assert_ne!(run.state, RunState::Done, "{}", s.journal().await);
    assert_eq!(s.github.issue(&s.repo, n).state, "open");
    assert!(s.github.pulls(&s.repo).is_empty(), "no pull request");
    (s, n)
}

const LIMIT_2: &str = "dod:\n  - { type: tests_pass, command: \"sh run_tests.sh\" }\ncompletion:\n  max_iterations: 2\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lying_agent_that_claims_success_with_a_failing_goal_is_never_closed() {
    let s = Story::start("liar-claims", Some(LIMIT_2)).await;
    let failing_test = "cat > tests/add.sh <<'T'\nr=$(. ./calc.sh; add 2 3)\n[ \"$r\" = 5 ]\nT\necho '{\"summary\": \"Fixed. All tests pass.\"}'\n".to_owned();
    never_closed(s, &[&failing_test, CLAIMS_DONE]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lying_agent_that_deletes_the_failing_test_is_never_closed() {
    let config = format!("{PY_CONFIG}completion:\n  max_iterations: 2\n");
    let s = python_story("liar-deletes", &config, TEST_CALC_PY).await;
    let delete = "cat > test_calc.py <<'T'\nimport unittest\n\n\nclass CalcTest(unittest.TestCase):\n    def test_nothing(self):\n        pass\nT\necho '{\"summary\": \"Fixed. All tests pass.\"}'\n".to_owned();
    never_closed(s, &[&delete, CLAIMS_DONE]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lying_agent_that_skips_the_failing_test_is_never_closed() {
    let config = format!("{PY_CONFIG}completion:\n  max_iterations: 2\n");
    let s = python_story("liar-skips", &config, TEST_CALC_PY).await;
    let skip = "sed -i 's/    def test_add/    @unittest.skip(\"flaky\")\\n    def test_add/' test_calc.py\necho '{\"summary\": \"Fixed. All tests pass.\"}'\n".to_owned();
    never_closed(s, &[&skip, CLAIMS_DONE]).await;
}

/// The agent fixes the bug, with its reproducing test, and deletes a test
/// that passed on the base commit: the runner exits 0, yet the run is never
/// closed, and the status says which test no longer runs. Before, only
/// tests that failed at base were followed; one that passed could stop
/// running unnoticed (decision 161).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lying_agent_that_deletes_a_passing_test_is_never_closed() {
    drops_a_passing_test("liar-drops", LIMIT_2).await;
}

/// The agent deletes `tests/existing.sh` (which passed at base) with its
/// fix, under `config`: never closed, and the status names the test.
async fn drops_a_passing_test(name: &str, config: &str) {
    let s = Story::start(name, Some(config)).await;
    let drop = format!("rm tests/existing.sh\n{}", crate::story_review::fix_add());
    let (s, n) = never_closed(s, &[&drop, CLAIMS_DONE]).await;
    let status = s.status_comment(n).body;
    assert!(
        status.contains("no longer run: tests/existing.sh"),
        "{status}"
    );
}

/// The same drop, with the test command among the task type's goals rather
/// than the DoD's: it had no baseline, so the dropped test went unnoticed
/// and the run was closed. Every command goal now has its base.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_passing_test_dropped_from_a_task_type_goal_is_noticed_too() {
    let config = "task_types:\n  bug:\n    goals:\n      - { type: tests_pass, command: \"sh run_tests.sh\" }\ncompletion:\n  max_iterations: 2\n";
    drops_a_passing_test("liar-drops-task", config).await;
}

/// The control, and the repository's way out: with the test listed under
/// `baseline.removed_tests` (the issue asked for its removal), the same
/// change is verified and closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_test_the_repository_lets_go_does_not_block() {
    let config = format!("{LIMIT_2}baseline:\n  removed_tests: [\"tests/existing*\"]\n");
    let mut s = Story::start("drops-allowed", Some(&config)).await;
    let drop = format!("rm tests/existing.sh\n{}", crate::story_review::fix_add());
    let n = work_the_bug(&mut s, 1, &[&drop]).await;
    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lying_agent_that_edits_outside_the_allowed_paths_is_never_closed() {
    let config = format!("{LIMIT_2}convergence:\n  allowed_paths: [\"calc.sh\", \"tests/**\"]\n");
    let s = Story::start("liar-scope", Some(&config)).await;
    let outside = "cat > tests/add.sh <<'T'\nr=$(. ./calc.sh; add 2 3)\n[ \"$r\" = 5 ]\nT\ncat > calc.sh <<'T'\nadd() { echo $(( $1 + $2 )); }\nT\necho '# reviewed' >> run_tests.sh\necho '{\"summary\": \"Fixed add.\"}'\n".to_owned();
    never_closed(s, &[&outside, CLAIMS_DONE]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lying_agent_whose_test_passes_at_base_too_is_never_closed() {
    let s = Story::start("liar-no-repro", Some(LIMIT_2)).await;
    let trivial = "echo 'true' > tests/add.sh\ncat > calc.sh <<'T'\nadd() { echo $(( $1 + $2 )); }\nT\necho '{\"summary\": \"Fixed add, with a test.\"}'\n".to_owned();
    never_closed(s, &[&trivial, CLAIMS_DONE]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lying_agent_that_only_asks_questions_is_never_closed() {
    let s = Story::start("liar-questions", Some(LIMIT_2)).await;
    let asks =
        "echo '{\"summary\": \"Done, I think.\", \"questions\": [\"Is this what you wanted?\"]}'\n";
    never_closed(s, &[asks, asks]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_verified_fix_ending_with_an_offer_is_closed_not_left_waiting() {
    let mut s = Story::start("verified-offer", Some(CONFIG)).await;
    let fix = "cat > tests/add.sh <<'T'\nr=$(. ./calc.sh; add 2 3)\n[ \"$r\" = 5 ]\nT\ncat > calc.sh <<'T'\nadd() { echo $(( $1 + $2 )); }\nT\necho 'Fixed add and added a regression test. All tests pass.\n\nWould you like me to add more tests?'\n";
    let n = work_the_bug(&mut s, 1, &[fix]).await;
    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert!(!s.labels(n).contains(&"awaiting-response".to_owned()));
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
}

/// The agent's first iteration: it writes the fix, compiles it to bytecode
/// that Python trusts without reading the source (`unchecked-hash`), puts
/// the bug back under a new docstring, and says it fixed `add`. Only the
/// buggy `calc.py` is committed; the bytecode stays in the ignored
/// `__pycache__/`.
const PLANT_BYTECODE: &str = r#"cat > calc.py <<'T'
def add(a, b):
    return a + b


def legacy():
    return 0
T
python3 -c "import py_compile as p; p.compile('calc.py', invalidation_mode=p.PycInvalidationMode.UNCHECKED_HASH)"
cat > calc.py <<'T'
"""Arithmetic."""


def add(a, b):
    return a - b


def legacy():
    return 0
T
echo '{"summary": "Fixed add."}'
"#;

/// Decision 146: the goals run on a clean checkout of the commit, so build
/// output the commit does not carry cannot vouch for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lying_agent_that_leaves_bytecode_of_a_reverted_fix_is_never_closed() {
    let config = format!("{PY_CONFIG}completion:\n  max_iterations: 2\n");
    let s = python_story("liar-bytecode", &config, TEST_CALC_PY).await;
    let (s, n) = never_closed(s, &[PLANT_BYTECODE, CLAIMS_DONE]).await;
    let after_first = status_edits(&s, n)
        .into_iter()
        .find(|b| b.contains("Iteration:** 1 of"))
        .expect("the status after iteration 1");
    assert!(
        after_first.contains("Failing since base")
            && after_first.contains("test_calc.CalcTest.test_add"),
        "{after_first}"
    );

    // The control: where the agent left them, the planted bytecode makes
    // the tests pass for a `calc.py` that still subtracts. Checked there,
    // as closer did before, the run would have closed with the bug pushed.
    let run = s.run(n).await.expect("a run");
    let data = closer::engine::run::RunData::from_json(&run.data).unwrap();
    let worktree = data.worktree.expect("the run's worktree").path;
    let source = std::fs::read_to_string(worktree.join("calc.py")).unwrap();
    assert!(source.contains("return a - b"), "{source}");
    let there = std::process::Command::new("python3")
        .args(["-m", "unittest", "-v"])
        .current_dir(&worktree)
        .output_apart()
        .expect("python3");
    assert!(
        there.status.success(),
        "the bytecode did not fool the tests: {}",
        String::from_utf8_lossy(&there.stderr)
    );
}

/// What the story's package registry serves.
const MATHLIB_PY: &str = "def plus(a, b):\n    return a + b\n";

/// Downloads `<url>/<name>` into the home's cache and links it from the
/// ignored `vendor/` (as pnpm links `node_modules/` into its store).
const FETCH_PY: &str = r#"import os, sys, urllib.request
url, name = sys.argv[1], sys.argv[2]
cache = os.path.expanduser("~/.cache/registry")
os.makedirs(cache, exist_ok=True)
with urllib.request.urlopen(url + "/" + name) as r, open(os.path.join(cache, name), "wb") as f:
    f.write(r.read())
os.makedirs("vendor", exist_ok=True)
os.symlink(os.path.join(cache, name), os.path.join("vendor", name))
"#;

/// A package registry on 127.0.0.1 serving `/mathlib.py`, which answers
/// 503 to the requests whose number (from 1) is in `down`; its URL and the
/// count of requests so far.
async fn registry(down: &'static [usize]) -> (String, Arc<AtomicUsize>) {
    use axum::routing::get;
    let count = Arc::new(AtomicUsize::new(0));
    let seen = count.clone();
    let serve = move || {
        let n = seen.fetch_add(1, Ordering::SeqCst) + 1;
        async move {
            match down.contains(&n) {
                true => Err(axum::http::StatusCode::SERVICE_UNAVAILABLE),
                false => Ok(MATHLIB_PY),
            }
        }
    };
    let app = axum::Router::new().route("/mathlib.py", get(serve));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, count)
}

/// Decision 146: what the goals need and the commit does not carry comes
/// from the repository's `setup`, run with the network in each check's
/// clean checkout: the baseline's, the iteration's and the reproduction's
/// (on the base commit with the head's tests), each sharing its home with
/// the goals that follow. The registry is down for the first
/// reproduction's setup and its second try: that iteration has no
/// reproduction and says why, and the next one has.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_repositorys_setup_installs_what_the_goals_need_in_each_clean_checkout() {
    let (registry, requests) = registry(&[3, 4]).await;
    let config = format!(
        "setup:\n  commands: [\"python3 fetch.py {registry} mathlib.py\"]\n\
         dod:\n  - {{ type: tests_pass, command: \"PYTHONPATH=vendor python3 -m unittest -v\" }}\n"
    );
    let calc = "from mathlib import plus\n\n\ndef add(a, b):\n    return plus(a, -b)\n\n\ndef legacy():\n    return 0\n";
    let files = [
        ("calc.py", calc),
        ("test_calc.py", TEST_CALC_PY),
        ("fetch.py", FETCH_PY),
        (".gitignore", "__pycache__/\nvendor/\n"),
    ];
    let mut s = Story::start_with_files("setup-deps", Some(&config), &files).await;
    s.llm.push([done(), done()]);
    let fix = "sed -i 's/plus(a, -b)/plus(a, b)/' calc.py\n\
               sed -i 's/add(-1, 1), 0)/add(-1, 1), 0)\\n        self.assertEqual(add(2, 2), 4)/' test_calc.py\n\
               echo '{\"summary\": \"Fixed add, with a test.\"}'\n";
    s.agent_step(1, fix);
    s.agent_step(2, CLAIMS_DONE);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert_eq!(run.iteration, 2, "{}", s.journal().await);
    let first = status_edits(&s, n)
        .into_iter()
        .find(|b| b.contains("Iteration:** 1 of"))
        .expect("the status after iteration 1");
    assert!(
        first.contains("the setup failed there") && first.contains("exited with 1"),
        "{first}"
    );
    // The baseline, then per iteration the check and the reproduction
    // (the first reproduction's setup twice).
    assert_eq!(requests.load(Ordering::SeqCst), 6);
    let status = s.status_comment(n).body;
    assert!(
        status.contains("| Reproduction | ✅ passed | required |")
            && status.contains("fail → pass: test_calc.CalcTest.test_add"),
        "{status}"
    );
    let body = s.github.pulls(&s.repo)[0].body.clone().unwrap_or_default();
    for shown in [&status, &body] {
        assert!(
            shown.contains("| setup: python3 fetch.py") && shown.contains("1 command(s), exit 0"),
            "{shown}"
        );
    }
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
}
