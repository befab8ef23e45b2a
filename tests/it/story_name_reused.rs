//! A repository's name taken again: the repository deleted (or its owner's
//! account renamed or deleted) and another created under the name, by its
//! owner starting over or by a stranger who registered the freed login.
//! Runs are found by name, so without GitHub's repository id the new
//! repository's issue #1 would be handed the old repository's run: its
//! history, its worktree and a mirror holding the old repository's
//! commits.

use closer::model::{Outcome, RepoName, RepositoryId, RunState};
use closer::store::replaced::SET_ASIDE;
use closer::store::runs;

use crate::stories::{ask_what_is_in_tests, awaiting_an_answer, fix_add, story_10_asked};
use crate::support::fake_llm::Reply;
use crate::support::story::CONFIG;

/// What the repository created under the old name holds.
const NEW_FILES: [(&str, &str); 2] = [
    ("tests/fresh.sh", "echo fresh\n"),
    ("run_tests.sh", "exit 0\n"),
];

/// The agent's probe in the new repository: can it reach the old one's
/// commit?
fn probe(old_head: &str) -> String {
    format!(
        "if git cat-file -e '{old_head}^{{commit}}' 2>/dev/null; then \
         echo 'The old commit {old_head} is here.'; \
         else echo 'Nothing of the old repository is here: tests/ holds fresh.sh.'; fi\n"
    )
}

/// Issue #1 of a repository is answered and closed; the repository is
/// deleted and another created under its name. Its own issue #1, labelled
/// by the maintainer, starts a run of its own, from a mirror of the new
/// repository alone: a hostile agent there finds none of the old one's
/// commits. The old run is set aside unchanged, under a name no event
/// carries.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_repository_created_under_a_deleted_ones_name_gets_runs_of_its_own() {
    let (mut s, n) = story_10_asked("name-reused", CONFIG).await;
    let old = s.run(n).await.expect("the first repository's run");
    assert_eq!(old.state, RunState::Done, "{}", s.journal().await);
    let old_id = RepositoryId(s.github.repo_id(&s.repo) as i64);
    assert_eq!(old.repository_id, Some(old_id));
    let old_head = s.origin.branch_head("main").expect("the old main");

    s.recreate_repo(&NEW_FILES, Some(CONFIG));
    let new_id = RepositoryId(s.github.repo_id(&s.repo) as i64);
    assert_ne!(new_id, old_id);
    let m = ask_what_is_in_tests(&mut s, &probe(&old_head)).await;
    assert_eq!(m, n, "the new repository's issue has the old run's number");

    let new = s.run(m).await.expect("the new repository's run");
    assert_ne!(new.id, old.id, "a run of its own");
    assert_eq!(new.repository_id, Some(new_id));
    assert_eq!(new.state, RunState::Done, "{}", s.journal().await);
    let answer = s
        .bot_comments(m)
        .into_iter()
        .find(|c| c.body.contains("old repository") || c.body.contains("old commit"))
        .expect("the agent's answer");
    assert!(
        answer
            .body
            .contains("Nothing of the old repository is here"),
        "{}",
        answer.body
    );
    s.status_comment(m);

    let aside = runs::get(s.store.pool(), &old.id).await.unwrap().unwrap();
    let aside_name = RepoName::parse(&format!("{}~{}", s.repo, old.id)).unwrap();
    assert_eq!(aside.repository, aside_name);
    assert_eq!(
        (aside.state, aside.outcome, aside.repository_id),
        (old.state, old.outcome, old.repository_id),
        "set aside unchanged"
    );
    s.stop().await;
}

/// The same while the old run waits for an answer: the new repository's
/// labelled issue #1 stops the old run (set aside, with nothing written
/// to GitHub, where its issue is gone) and starts its own, which works.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_open_run_of_a_deleted_repository_is_stopped_when_its_name_is_taken() {
    let (mut s, n) = awaiting_an_answer("name-reused-open").await;
    let old = s.run(n).await.expect("the first repository's run");
    s.recreate_repo(&NEW_FILES, Some(CONFIG));
    let m = ask_what_is_in_tests(&mut s, "echo 'tests/ holds fresh.sh.'\n").await;

    let new = s.run(m).await.expect("the new repository's run");
    assert_ne!(new.id, old.id);
    assert_eq!(new.state, RunState::Done, "{}", s.journal().await);
    let aside = runs::get(s.store.pool(), &old.id).await.unwrap().unwrap();
    assert_eq!(aside.state, RunState::Stopped);
    assert_eq!(aside.outcome, Some(Outcome::Stopped(SET_ASIDE.to_owned())));
    assert!(aside.is_set_aside(), "{}", aside.repository);
    assert_eq!(
        aside.generation,
        old.generation + 1,
        "no step in flight saves it"
    );
    assert_eq!(aside.iteration, old.iteration, "not restarted");
    s.stop().await;
}

/// The name taken by somebody who never sends closer an event (no App, or
/// events that miss triage): the old run, sent to work again by
/// reconciliation, asks GitHub before its worktree is fetched or pushed,
/// finds another repository at its name and is set aside. Nothing of it
/// reaches the new repository: no push, no comment.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_finding_its_name_taken_before_it_fetches_is_set_aside() {
    let (mut s, n) = awaiting_an_answer("name-reused-quiet").await;
    let old = s.run(n).await.expect("the first repository's run");
    s.agent_step(2, &fix_add());
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    s.recreate_repo(&NEW_FILES, Some(CONFIG));
    // The stranger's issue #1, labelled as the old one was; no delivery.
    let m = s.github.open_issue(&s.repo, "stranger", "hello", "");
    s.github.label_issue(&s.repo, m, "closer");
    assert_eq!(m, n);
    // The old run's step was lost (a crash): reconciliation queues it.
    sqlx::query("UPDATE runs SET state = 'running' WHERE id = $1")
        .bind(old.id.as_str())
        .execute(s.store.pool())
        .await
        .unwrap();
    let engine = s.engine.clone().unwrap();
    let done = engine.reconcile().await.unwrap();
    assert_eq!(done.requeued, vec![old.id.clone()], "{done:?}");
    s.idle().await;

    let aside = runs::get(s.store.pool(), &old.id).await.unwrap().unwrap();
    assert!(aside.is_set_aside(), "{}", aside.repository);
    assert_eq!(aside.state, RunState::Stopped, "{}", s.journal().await);
    assert_eq!(
        s.origin.branch_head("closer/issue-1"),
        None,
        "nothing pushed"
    );
    assert!(s.bot_comments(m).is_empty(), "{:?}", s.bot_comments(m));
    s.stop().await;
}
