//! A run's steps keep to the workspace (data directory) that holds its
//! worktree: with several replicas sharing one queue, each with a data
//! directory of its own, a step another replica claims goes back to the
//! queue while the run's replica is alive, and is taken over once it is
//! gone (decision 254). Before, whichever replica claimed the step made
//! the worktree afresh from GitHub, losing the agent's unpushed commits.

use closer::model::{RunId, RunState};
use closer::store::workspaces;
use sqlx::Row;

use crate::stories::awaiting_an_answer;
use crate::support::fake_github::state::FakeUser;
use crate::support::story::{MAINTAINER, Story};

/// Moves run `id` to workspace `there`, as if another replica had made its
/// worktree.
async fn place_run(s: &Story, id: &RunId, there: &str) {
    let pool = s.store.pool();
    let row = sqlx::query("SELECT data FROM runs WHERE id = $1")
        .bind(id.as_str())
        .fetch_one(pool)
        .await
        .unwrap();
    let mut data: serde_json::Value = serde_json::from_str(&row.get::<String, _>("data")).unwrap();
    data["workspace"] = serde_json::json!(there);
    sqlx::query("UPDATE runs SET data = $1 WHERE id = $2")
        .bind(data.to_string())
        .bind(id.as_str())
        .execute(pool)
        .await
        .unwrap();
}

/// The run waits for an answer; its worktree is in another replica's live
/// workspace. The answer's `resume` step, claimed here, goes back to the
/// queue and the agent does not work; once that replica leaves, the step
/// is taken over here and the run completes, recorded as this workspace's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_runs_steps_wait_for_its_live_workspace_and_are_taken_over_once_it_is_gone() {
    let (mut s, n) = awaiting_an_answer("workspace-elsewhere").await;
    let run = s.run(n).await.unwrap();
    let here = std::fs::read_to_string(s.data_dir().join("workspace-id")).unwrap();
    let pool = s.store.pool().clone();
    place_run(&s, &run.id, "elsewhere").await;
    workspaces::beat(&pool, "elsewhere", "replica-b", s.store.now_ms())
        .await
        .unwrap();

    s.comment_as(n, FakeUser::user(MAINTAINER), "Yes, negatives too.")
        .await;
    s.next_postponed("run").await;
    assert!(!s.path("prompt-2.txt").exists(), "the agent worked here");
    assert_eq!(s.run(n).await.unwrap().state, RunState::AwaitingResponse);

    workspaces::leave(&pool, "elsewhere", "replica-b")
        .await
        .unwrap();
    s.idle().await;
    s.expect_run(n, RunState::Done, 2).await;
    assert!(s.prompt(2).contains("negatives too"), "{}", s.prompt(2));
    let run = s.run(n).await.unwrap();
    let data: serde_json::Value = serde_json::from_str(&run.data).unwrap();
    assert_eq!(data["workspace"].as_str(), Some(here.trim()));
    s.stop().await;
}
