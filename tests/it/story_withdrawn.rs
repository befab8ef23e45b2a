//! closer loses its access to a repository: the App uninstalled, the
//! repository taken out of the App's installation, or deleted. GitHub tells
//! by a webhook and answers closer nothing more for it, so the open runs
//! there are stopped at once, with the reason, and nothing more is tried:
//! no agent works on for a repository that cannot receive its work, and no
//! step retries GitHub calls that cannot succeed until its job dies.

use std::time::{Duration, Instant};

use closer::model::{IterationEnd, JobKind, Outcome, RunState, Withdrawal, run_job_key};
use closer::store::jobs::{self, NewJob};
use closer::store::runs;
use serde_json::{Value, json};

use crate::stories::awaiting_an_answer;
use crate::support::fake_github::state::FakeUser;
use crate::support::fixture;
use crate::support::process::{gone_within, process_with_argument, unique_sleep};
use crate::support::story::{CONFIG, INSTALLATION, MAINTAINER, Story, user_json};
use crate::support::{unique, wait_for_file};

/// A fixture delivered for the story's installation, with `edit` applied.
async fn deliver_fixture(s: &Story, event: &str, name: &str, edit: impl FnOnce(&mut Value)) {
    let mut payload: Value = serde_json::from_slice(&fixture(name)).unwrap();
    payload["installation"]["id"] = INSTALLATION.into();
    edit(&mut payload);
    let body = serde_json::to_vec(&payload).unwrap();
    s.deliver_raw(event, &unique("withdrawn"), &body).await;
}

/// The App is uninstalled while the agent works: the run is stopped with
/// the reason, the agent and what it started are ended within seconds,
/// nothing is judged, and nothing more is sent to GitHub (where the
/// installation's tokens are revoked). Without the stop, the agent worked
/// on until its timeout, and the run's steps then failed on GitHub.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_app_uninstalled_while_the_agent_works_stops_the_run_and_its_agent() {
    let mut s = Story::start("uninstalled", Some(CONFIG)).await;
    let started = s.path("started");
    let marker = unique_sleep();
    s.agent_step(
        1,
        &format!("sleep {marker} &\ntouch '{}'\nwait\n", started.display()),
    );
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    wait_for_file(&started).await;
    let child = process_with_argument(&marker).expect("the agent's sleeper");
    let writes = s.github.writes().len();

    s.github.uninstall(INSTALLATION);
    let uninstalled_at = Instant::now();
    deliver_fixture(&s, "installation", "installation.deleted.json", |_| {}).await;
    s.idle().await;
    assert!(
        uninstalled_at.elapsed() < Duration::from_secs(30),
        "{:?}",
        uninstalled_at.elapsed()
    );
    assert!(
        gone_within(child, Duration::from_secs(3)).await,
        "the agent's child {child} outlived the uninstall"
    );

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Stopped, "{}", s.journal().await);
    assert_eq!(run.outcome, Some(Withdrawal::Uninstalled.outcome()));
    let iterations = runs::iterations(s.store.pool(), &run.id).await.unwrap();
    assert_eq!(iterations.len(), 1);
    assert_eq!(iterations[0].decision, Some(IterationEnd::Stopped));
    assert!(s.llm.requests().is_empty(), "nothing judged");
    assert_eq!(
        s.github.writes().len(),
        writes,
        "nothing sent to GitHub after the uninstall: {:#?}",
        &s.github.writes()[writes..]
    );
    s.stop().await;
}

/// A run waiting for its answer when its repository is taken out of the
/// App's installation or deleted, or the installation suspended: stopped with the reason, and nothing
/// sent to GitHub for it, by that delivery or by the run's steps still
/// queued.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiting_run_stops_when_closer_loses_its_repository() {
    for (name, why) in [
        ("withdrawn-removed", Withdrawal::Removed),
        ("withdrawn-deleted", Withdrawal::Deleted),
        ("withdrawn-suspended", Withdrawal::Suspended),
    ] {
        let (mut s, n) = awaiting_an_answer(name).await;
        let run = s.run(n).await.unwrap();
        assert_eq!(run.state, RunState::AwaitingResponse);
        let writes = s.github.writes().len();
        let repository = s.github.repo_payload(&s.repo);
        let full_name = s.repo.to_string();
        match why {
            Withdrawal::Removed => {
                s.github.remove_from_installation(INSTALLATION, &s.repo);
                let removed = json!([{"id": repository["id"], "full_name": full_name}]);
                let event = "installation_repositories";
                deliver_fixture(&s, event, "installation_repositories.removed.json", |p| {
                    p["repositories_removed"] = removed;
                })
                .await;
            }
            Withdrawal::Suspended => {
                s.github.suspend(INSTALLATION);
                let event = "installation";
                deliver_fixture(&s, event, "installation.suspend.json", |_| {}).await;
            }
            _ => {
                s.github.delete_repo(&s.repo);
                let payload = json!({
                    "action": "deleted",
                    "repository": repository,
                    "installation": {"id": INSTALLATION},
                    "sender": user_json(&FakeUser::user(MAINTAINER)),
                });
                let body = serde_json::to_vec(&payload).unwrap();
                s.deliver_raw("repository", &unique(name), &body).await;
            }
        }
        s.idle().await;

        let stopped = s.run(n).await.unwrap();
        assert_eq!(stopped.state, RunState::Stopped, "{name}");
        assert_eq!(stopped.outcome, Some(Outcome::Stopped(why.reason().into())));
        assert_eq!(stopped.generation, run.generation, "as a person's stop");

        // Steps of the run still queued (an answer's resume, a stop's
        // showing) do nothing: a stopped run's steps would write its status.
        for step in ["resume", "show_stop"] {
            let job = NewJob {
                kind: JobKind::Run,
                key: run_job_key(&run.id),
                payload: json!({"run_id": run.id, "step": step}).to_string(),
                max_attempts: 3,
                run_at: s.store.now_ms(),
            };
            let now = s.store.now_ms();
            jobs::enqueue(s.store.pool(), &job, now).await.unwrap();
        }
        s.idle().await;
        assert_eq!(s.github.writes().len(), writes, "{name}: nothing sent");
        assert_eq!(s.run(n).await.unwrap(), stopped, "{name}");
        s.stop().await;
    }
}
