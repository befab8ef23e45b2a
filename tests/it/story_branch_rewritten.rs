//! A person takes commits off closer's branch: resets it to an earlier
//! commit, or deletes it for a fresh start. The branch on GitHub wins
//! (decision 53) both ways: what they pushed is kept, and what they took
//! off stays off.

use closer::model::RunState;

use crate::story_review::{done, fix_add, small_change, verified_story};
use crate::support::fake_github::state::FakeUser;
use crate::support::story::{CONFIG, MAINTAINER};

/// The subjects of a branch's commits, newest first.
fn subjects(log: &[String]) -> Vec<String> {
    log.iter()
        .map(|l| l.split_once(' ').map_or("", |(_, s)| s).to_owned())
        .collect()
}

/// The maintainer resets closer's branch to the verified fix, dropping a
/// review round's commit; the next round continues from the fix, is told
/// why, and pushes without the dropped commit. Before, the dropped commit
/// was taken for one of closer's own not yet pushed (the branch's head was
/// an ancestor of the worktree's): the next push brought it back, and the
/// verification after the reset checked a commit GitHub no longer had.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_commit_a_maintainer_took_off_the_branch_stays_off() {
    let (mut s, n, pull) = verified_story("branch-reset", CONFIG).await;
    let fix = s.origin.branch_head("closer/issue-1").unwrap();
    s.agent_step(2, &small_change(2));
    s.llm.push([done()]);
    s.request_change(pull, "calc.sh", 1, "Add a note.").await;
    let log = subjects(&s.origin.log("closer/issue-1"));
    assert_eq!(log[0], "review 2", "{log:#?}");

    s.reset_pull_as(pull, MAINTAINER, &fix).await;
    s.idle().await;
    s.agent_step(3, &small_change(3));
    s.llm.push([done()]);
    s.request_change(pull, "calc.sh", 1, "Another note, please.")
        .await;

    s.expect_run(n, RunState::Done, 3).await;
    let log = s.origin.log("closer/issue-1");
    assert!(log[1].starts_with(&fix), "on top of the fix: {log:#?}");
    let log = subjects(&log);
    assert_eq!(log[0], "review 3", "{log:#?}");
    assert!(!log.contains(&"review 2".to_owned()), "{log:#?}");
    let prompt = std::fs::read_to_string(s.path("prompt-3.txt")).unwrap();
    assert!(prompt.contains("reset or rewrote the branch"), "{prompt}");
    s.stop().await;
}

/// The maintainer deletes closer's branch (GitHub closes its pull request;
/// the run fails) and asks for a retry: the run starts again from the
/// commit it started from, is told why, and its new pull request holds
/// only the new work. Before, the retry kept the worktree's old commits
/// and pushed them again as the new branch.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn deleting_the_branch_and_retrying_starts_afresh() {
    let (mut s, n, pull) = verified_story("branch-deleted", CONFIG).await;
    s.origin.delete_branch("closer/issue-1");
    s.close_pull_as(pull, MAINTAINER).await;
    s.idle().await;
    assert_eq!(s.run(n).await.unwrap().state, RunState::Failed);

    let again = fix_add().replace("fix: add", "fix: add, afresh");
    s.agent_step(2, &again);
    s.llm.push([done()]);
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    let log = subjects(&s.origin.log("closer/issue-1"));
    assert_eq!(log, ["fix: add, afresh", "initial"], "only the new work");
    let prompt = std::fs::read_to_string(s.path("prompt-2.txt")).unwrap();
    assert!(prompt.contains("deleted the branch"), "{prompt}");
    assert_eq!(s.github.pulls(&s.repo).len(), 2, "a new pull request");
    s.stop().await;
}

/// A head closer saw that the mirror no longer has (a data directory made
/// afresh after a restart, a commit collected since) is taken as unseen:
/// the branch is followed as before. The control: git itself refuses to
/// compare with it, which failed every later iteration.
#[tokio::test]
async fn a_seen_head_the_mirror_lacks_is_taken_as_unseen() {
    use closer::agent::sandbox::branch::BranchSync;

    use crate::support::git::{Pushed, git, pushed_worktree};

    let Pushed {
        origin,
        sandbox,
        source,
        wt,
        data_dir: _data_dir,
    } = pushed_worktree("run-unseen").await;
    let theirs = origin.push_to_branch("closer/issue-4", "maria", "theirs.txt", "y\n");
    sandbox.fetch_branch(&wt, &source).await.unwrap();

    let gone = "0123456789abcdef0123456789abcdef01234567";
    let sync = sandbox
        .continue_from(&wt, &theirs, Some(gone))
        .await
        .expect("no git error");
    assert_eq!(sync, BranchSync::FastForwarded);
    assert_eq!(git(&wt.path, &["rev-parse", "HEAD"]).trim(), theirs);

    let refused = std::process::Command::new("git")
        .args(["merge-base", "--is-ancestor", gone, "HEAD"])
        .current_dir(&wt.path)
        .status()
        .unwrap();
    assert_eq!(refused.code(), Some(128), "git's own answer is an error");
}

/// A done run's worktree was removed after `run_files_days` while its pull
/// request stayed open, and the default branch moved on meanwhile. A review
/// then makes the worktree again: at the run's base commit, which the
/// branch grew from, so the round continues from the branch as it is.
/// Before, the worktree was made at the default branch's new head and the
/// branch rebased onto it: the default branch's new commits were pushed
/// to the pull request as if they were its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worktree_made_again_continues_the_branch_not_the_default_branch() {
    let (mut s, n, pull) = verified_story("worktree-again", CONFIG).await;
    let run = s.run(n).await.unwrap();
    let worktree = s.data_dir().join("sandbox/worktrees").join(run.id.as_str());
    assert!(worktree.join(".git").exists(), "{}", worktree.display());
    std::fs::remove_dir_all(&worktree).unwrap();
    s.origin
        .push_change("tests/existing.sh", "echo existing test passes, still\n");

    s.agent_step(2, &small_change(2));
    s.llm.push([done()]);
    s.request_change(pull, "calc.sh", 1, "A note.").await;

    s.expect_run(n, RunState::Done, 2).await;
    let log = subjects(&s.origin.log("closer/issue-1"));
    assert_eq!(
        log,
        ["review 2", "fix: add", "initial"],
        "no commit of main's"
    );
    s.stop().await;
}

/// The maintainer merges closer's pull request (GitHub deletes its branch)
/// and later asks for more with `/closer retry`: the run starts from the
/// default branch, which holds the merged work, and its new pull request
/// holds only the new work. Before, the restart found its old worktree
/// and started from the old base, was told somebody deleted the branch
/// "for a fresh start", and redid the merged work.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_after_the_merge_starts_from_the_default_branch() {
    let mut s = crate::support::story::Story::start("merged-retry", Some(CONFIG)).await;
    s.llm.push([done()]);
    s.agent_step(1, &fix_add());
    let n = s
        .open_issue("add should add", "", &["closer", "type:feature"])
        .await;
    s.idle().await;
    let pull = s.the_pull();
    let merged = s.origin.branch_head("closer/issue-1").unwrap();
    s.merge_as(pull, MAINTAINER).await;
    // The merge, on the default branch; then the head branch goes.
    s.origin.force_branch("main", &merged);
    s.origin.delete_branch("closer/issue-1");
    s.idle().await;

    s.agent_step(2, &small_change(2));
    s.llm.push([done()]);
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert_eq!(
        run.base_commit.as_deref(),
        Some(merged.as_str()),
        "from the default branch"
    );
    let prompt = std::fs::read_to_string(s.path("prompt-2.txt")).unwrap();
    assert!(!prompt.contains("deleted the branch"), "{prompt}");
    let log = subjects(&s.origin.log("closer/issue-1"));
    assert_eq!(
        log.len(),
        3,
        "the merged history and one new commit: {log:#?}"
    );
    assert_eq!(log[0], "review 2");
    assert_eq!(s.github.pulls(&s.repo).len(), 2, "a new pull request");
    s.stop().await;
}

/// The maintainer squash-merges closer's pull request, and GitHub leaves
/// its branch (it deletes head branches only when the repository says
/// so); later `/closer retry` asks for more. The new life starts from the
/// squashed commit, and its branch holds that commit and the new work, not
/// the old commit the squash replaced. Before, the restart followed the
/// branch left on GitHub and brought the merged commit back into the new
/// pull request.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_retry_after_a_squash_merge_leaves_the_merged_branch_behind() {
    let mut s = crate::support::story::Story::start("squash-retry", Some(CONFIG)).await;
    s.llm.push([done()]);
    s.agent_step(1, &fix_add());
    let n = s
        .open_issue("add should add", "", &["closer", "type:feature"])
        .await;
    s.idle().await;
    let pull = s.the_pull();
    s.merge_as(pull, MAINTAINER).await;
    let squashed = s.origin.squash_into_main("closer/issue-1", "Fix add (#2)");
    s.idle().await;

    s.agent_step(2, &small_change(2));
    s.llm.push([done()]);
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer retry")
        .await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
    assert_eq!(run.base_commit.as_deref(), Some(squashed.as_str()));
    let prompt = std::fs::read_to_string(s.path("prompt-2.txt")).unwrap();
    assert!(!prompt.contains("Somebody"), "{prompt}");
    let log = subjects(&s.origin.log("closer/issue-1"));
    assert_eq!(log, ["review 2", "Fix add (#2)", "initial"], "{log:#?}");
    assert_eq!(s.github.pulls(&s.repo).len(), 2, "a new pull request");
    s.stop().await;
}

/// The maintainer renames the default branch (`main` to `trunk`) while
/// the run works: the run fetches the branch GitHub names now, and its pull
/// request is opened into `trunk`. Before, the run kept the name it began
/// with, and its pull request went to a base GitHub no longer has.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_default_branch_renamed_mid_run_is_the_pull_requests_base() {
    let mut s = crate::support::story::Story::start("renamed-default", Some(CONFIG)).await;
    let (n, gate) = crate::stories::first_iteration_held(&mut s, "Make the test pass").await;
    s.origin.rename_branch("main", "trunk");
    s.github.set_default_branch(&s.repo, "trunk");
    gate.open();
    s.idle().await;

    s.expect_run(n, RunState::Done, 2).await;
    let pulls = s.github.pulls(&s.repo);
    assert_eq!(pulls.len(), 1, "{pulls:#?}");
    assert_eq!(pulls[0].base, "trunk");
    s.stop().await;
}

/// The repository was just created and has no commit yet (GitHub still
/// names a default branch): the run fails at once, saying what to do.
/// Before, its start step met git's own words, was tried again for the
/// best part of an hour and died, and reconciliation failed the run after
/// three such deaths.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_repository_with_no_commits_fails_the_run_at_once_saying_so() {
    let mut s = crate::support::story::Story::start("empty-repo", Some(CONFIG)).await;
    s.origin.delete_branch("main");
    let n = s
        .open_issue("add should add", "", &["closer", "type:feature"])
        .await;
    s.idle().await;

    s.expect_run(n, RunState::Failed, 0).await;
    let diagnosis = s
        .bot_comments(n)
        .into_iter()
        .find(|c| c.body.contains("no commits yet"))
        .expect("a diagnosis saying why");
    assert!(
        diagnosis.body.contains("/closer retry"),
        "{}",
        diagnosis.body
    );
    assert!(s.llm.requests().len() <= 1, "nothing judged");
    s.stop().await;
}
