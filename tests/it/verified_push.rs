//! What is pushed is exactly the commit verification checked. The goals
//! run on a clean checkout of it (decision 146), so in a sandbox a goal
//! cannot reach the run's worktree at all; unconfined (`[sandbox] mode =
//! "none"`) it can, and a goal the agent rewrote to commit or change a file
//! there after verification gets the push refused and the run failed with
//! that reason. The controls: the same goal in a sandbox, and a goal that
//! changes nothing, both push. A workflow file GitHub will not take from
//! the App, or a push the repository's rules decline, fails the run with
//! GitHub's reason. And git output past closer's cap is a named error,
//! never a silent cut.

use std::time::Duration;

use closer::agent::process::BaseEnv;
use closer::agent::sandbox::git::{GitError, GitRunner};
use closer::github::types::IssueNumber;
use closer::model::RunState;

use crate::support::fake_github::Ruleset;
use crate::support::fake_github::state::FakeUser;
use crate::support::fake_llm::Reply;
use crate::support::git::git;
use crate::support::story::{CONFIG, MAINTAINER, RUN_TESTS, Story};

/// The agent's step: fixes `add`, and rewrites the test runner so that,
/// after the tests ran (during verification), it also runs `after`.
fn fix_and_plant(after: &str) -> String {
    let runner = RUN_TESTS.replace("exit $status\n", &format!("{after}\nexit $status\n"));
    format!(
        "cat > calc.sh <<'T'\nadd() {{ echo $(( $1 + $2 )); }}\nT\n\
         cat > run_tests.sh <<'T'\n{runner}T\n\
         echo '{{\"summary\": \"Fixed add.\"}}'\n"
    )
}

/// A feature run of one iteration whose goal runs `after` (`@SHARED@` in
/// it: the story's shared directory, which goals may write); the run's end.
/// `unconfined`: under `[sandbox] mode = "none"`, where a goal can write
/// the git metadata (in a sandbox it cannot commit at all).
async fn run_with_goal_side_effect(
    name: &str,
    after: &str,
    unconfined: bool,
) -> (Story, RunState, String) {
    let mut s = Story::start(name, Some(CONFIG)).await;
    if unconfined {
        s.kill_workers();
        s.confinement = Some(closer::agent::confine::Confinement::unconfined());
        s.spawn_workers();
    }
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let shared = s.shared_dir().display().to_string();
    s.agent_step(1, &fix_and_plant(&after.replace("@SHARED@", &shared)));
    let n = s
        .open_issue("add should add", "", &["closer", "type:feature"])
        .await;
    s.idle().await;
    let run = s.run(n).await.expect("a run");
    let said: Vec<String> = s.bot_comments(n).into_iter().map(|c| c.body).collect();
    (s, run.state, said.join("\n---\n"))
}

/// A goal's way from its checkout to the run's worktree: git metadata
/// names every worktree of the mirror; `then` runs there if it can be
/// entered.
fn in_the_runs_worktree(then: &str) -> String {
    format!(
        "wt=$(git worktree list --porcelain | sed -n 's/^worktree //p' | grep '/worktrees/' \
         | grep -v -- '-checks$' | head -1); [ -n \"$wt\" ] && cd \"$wt\" && {{ {then}; }}"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_commit_a_goal_makes_in_the_runs_worktree_is_never_pushed() {
    let sneaky = in_the_runs_worktree(
        "echo sneaky > sneaky.txt; git add sneaky.txt; git commit -q -m sneaky",
    );
    let (s, state, status) = run_with_goal_side_effect("push-moved", &sneaky, true).await;
    assert_eq!(state, RunState::Failed, "{}", s.journal().await);
    assert!(
        status.contains("the push was refused: HEAD moved after verification"),
        "{status}"
    );
    assert_eq!(
        s.origin.branch_head("closer/issue-1"),
        None,
        "nothing pushed"
    );
    assert!(s.github.pulls(&s.repo).is_empty());
    s.stop().await;
}

/// What a goal appends to `calc.sh` in the run's worktree.
const TOUCH: &str = "echo '# touched after verification' >> calc.sh";

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_tracked_file_a_goal_changes_in_the_runs_worktree_is_never_pushed() {
    let touch = in_the_runs_worktree(TOUCH);
    let (s, state, status) = run_with_goal_side_effect("push-dirty", &touch, true).await;
    assert_eq!(state, RunState::Failed, "{}", s.journal().await);
    assert!(
        status.contains("the worktree changed after verification (calc.sh)"),
        "{status}"
    );
    assert_eq!(
        s.origin.branch_head("closer/issue-1"),
        None,
        "nothing pushed"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_sandboxed_goal_cannot_reach_the_runs_worktree_and_the_verified_commit_is_pushed() {
    // The same goal as above, in the sandbox: it finds the run's worktree
    // named in the git metadata, and cannot enter it (hidden).
    let seen = "echo \"$wt\" > @SHARED@/seen";
    let entered = "touch @SHARED@/entered";
    let touch = format!(
        "{}; {seen}; {TOUCH}",
        in_the_runs_worktree(&format!("{entered}; {TOUCH}"))
    );
    let (s, state, _) = run_with_goal_side_effect("push-confined", &touch, false).await;
    assert_eq!(state, RunState::Done, "{}", s.journal().await);
    let seen = std::fs::read_to_string(s.shared_dir().join("seen")).expect("the goal ran");
    let worktrees = s.data_dir().join("sandbox/worktrees").display().to_string();
    assert!(
        seen.trim().starts_with(&worktrees) && !seen.trim().ends_with("-checks"),
        "the goal did not find the run's worktree: {seen}"
    );
    assert!(
        !s.shared_dir().join("entered").exists(),
        "the goal entered {seen}"
    );
    let pushed = s.origin.branch_head("closer/issue-1").expect("pushed");
    let calc = git(&s.origin.bare, &["show", &format!("{pushed}:calc.sh")]);
    assert!(!calc.contains("touched"), "{calc}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_control_a_goal_that_changes_nothing_tracked_lets_the_verified_commit_through() {
    // An untracked file a goal leaves stays in its checkout.
    let harmless = "echo scratch > goal-output.txt";
    let (s, state, _) = run_with_goal_side_effect("push-clean", harmless, false).await;
    assert_eq!(state, RunState::Done, "{}", s.journal().await);
    let pushed = s.origin.branch_head("closer/issue-1").expect("pushed");
    let files = git(&s.origin.bare, &["ls-tree", "--name-only", &pushed]);
    assert!(!files.contains("goal-output.txt"), "{files}");
    s.stop().await;
}

/// The agent's fix of `add`, as a line of its step.
const FIX_ADD: &str = "cat > calc.sh <<'T'\nadd() { echo $(( $1 + $2 )); }\nT\n";

/// A verified feature run over the fake's HTTP remote, whose agent runs
/// `agent` and whose push GitHub refuses: it fails, nothing is pushed, and
/// the push is tried once. Returns the story, the issue and what the bot
/// said on it.
async fn refused_push(
    name: &str,
    rules: Option<Ruleset>,
    agent: &str,
) -> (Story, IssueNumber, String) {
    let mut s = Story::start(name, Some(CONFIG)).await;
    s.origin.url = s.github.serve_git(&s.repo, &s.origin.bare);
    if let Some(ruleset) = rules {
        s.github.require(&s.repo, ruleset);
    }
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    s.agent_step(1, agent);
    let n = s
        .open_issue("add should add", "", &["closer", "type:feature"])
        .await;
    s.idle().await;
    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Failed, "{}", s.journal().await);
    let said: Vec<String> = s.bot_comments(n).into_iter().map(|c| c.body).collect();
    assert_eq!(
        s.origin.branch_head("closer/issue-1"),
        None,
        "nothing pushed"
    );
    let pushes = s
        .github
        .requests_to("POST", "/git/octo/calc.git/git-receive-pack");
    assert_eq!(pushes.len(), 1, "pushed once, not retried");
    (s, n, said.join("\n---\n"))
}

/// GitHub never takes a workflow file from the App (no `workflows`
/// permission): the verified run that changes one fails at its push with
/// GitHub's reason, once, instead of retrying a push that cannot land. The
/// control, the same run without the workflow file over the same HTTP
/// remote, is `token_scope::a_run_over_http_pushes_with_the_one_push_token…`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_change_to_a_workflow_fails_the_run_with_githubs_refusal_and_is_not_retried() {
    let agent = format!(
        "{FIX_ADD}mkdir -p .github/workflows\n\
         printf 'on: push\\njobs: {{}}\\n' > .github/workflows/ci.yml\n\
         echo '{{\"summary\": \"Fixed add, and added CI.\"}}'\n"
    );
    let (mut s, n, said) = refused_push("push-workflow", None, &agent).await;
    assert!(
        said.contains(
            "GitHub refused the push: the change creates or updates the workflow \
             `.github/workflows/ci.yml`"
        ),
        "{said}"
    );
    assert!(s.github.pulls(&s.repo).is_empty());

    // The maintainer says the issue needs no workflow and retries: the
    // refused commits are gone, and the fix alone is pushed.
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    s.agent_step(
        2,
        &format!(
            "test ! -e .github/workflows/ci.yml || exit 3\n{FIX_ADD}\
             echo '{{\"summary\": \"Fixed add.\"}}'\n"
        ),
    );
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;
    let run = s.run(n).await.expect("a run");
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    let pushed = s.origin.branch_head("closer/issue-1").expect("pushed");
    let files = git(&s.origin.bare, &["ls-tree", "-r", "--name-only", &pushed]);
    assert!(!files.contains(".github/workflows"), "{files}");
    s.stop().await;
}

/// A ruleset on every branch requires signed commits, which closer's are
/// not: the verified run fails at its push with the rule GitHub named and
/// what an admin can do, once. The control is the same run before the
/// ruleset (`token_scope::a_run_over_http_pushes_with_the_one_push_token…`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_push_the_repositorys_rules_decline_fails_the_run_naming_the_rule() {
    let agent = format!("{FIX_ADD}echo '{{\"summary\": \"Fixed add.\"}}'\n");
    let (s, _, said) = refused_push("push-rules", Some(Ruleset::SignedCommits), &agent).await;
    for line in [
        "GitHub declined the push: it breaks this repository's rules",
        "Commits must have verified signatures.",
        "bypass list",
    ] {
        assert!(said.contains(line), "{line}\n{said}");
    }
    s.stop().await;
}

#[tokio::test]
async fn git_output_past_the_cap_is_a_named_error_not_a_cut() {
    let dir = tempfile::tempdir().unwrap();
    git(dir.path(), &["init", "--quiet", "--initial-branch=main"]);
    std::fs::write(dir.path().join("big.txt"), "x".repeat(10_000)).unwrap();
    git(dir.path(), &["add", "big.txt"]);
    let args = ["show", ":big.txt"];
    let base = BaseEnv::from_process();
    let capped = GitRunner::new(base.clone(), Duration::from_secs(30)).with_output_cap(4096);
    match capped.run(dir.path(), &args).await {
        Err(GitError::Truncated { args, cap }) => {
            assert_eq!((args.as_str(), cap), ("show :big.txt", 4096));
        }
        other => panic!("expected Truncated, got {other:?}"),
    }
    // The control: with room for it, the same command gives all of it.
    let roomy = GitRunner::new(base, Duration::from_secs(30)).with_output_cap(20_000);
    assert_eq!(roomy.run(dir.path(), &args).await.unwrap().len(), 10_000);
}
