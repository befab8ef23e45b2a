//! An upgrade as an operator makes one: an earlier release of closer
//! (`CLOSER_EARLIER_RELEASE`, the binary `.ci/earlier-release.sh` builds
//! from an older commit) works an issue until its agent asks a question,
//! is stopped, and takes the maintainer's answer with its workers off; then
//! this build starts on the same database and data directory. It must
//! migrate the database, take the run the earlier release left and the job
//! it queued, and close the issue with one status comment, one question and
//! one pull request.
//!
//! Every other test starts from a database this build made; this one
//! crosses the seam where what an earlier closer left — its schema, its
//! run's data, its job's payload, its data directory — meets this build.

use std::path::{Path, PathBuf};

use closer::model::RunState;
use serde_json::json;
use sqlx::Row;

use crate::stories::fix_add;
use crate::support::db::TestDb;
use crate::support::fake_llm::{FakeLlm, Reply};
use crate::support::operated::{Closer, calc_repository, signals_dir};

const INSTALLATION: i64 = 94;
const REPO: &str = "octo/upgrade";

/// The earlier release's binary; a loud skip without one, except in CI,
/// where only `.ci/run`'s own `skip` (a clone without the release's
/// commit) skips. A path that is not a file is a mistake, not a skip.
fn earlier_release() -> Option<PathBuf> {
    match std::env::var_os("CLOSER_EARLIER_RELEASE") {
        Some(value) if value == "skip" => {
            eprintln!("SKIPPED: no earlier release of closer in this clone (.ci/run said so)");
            None
        }
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(
                path.is_file(),
                "CLOSER_EARLIER_RELEASE={} is no file",
                path.display()
            );
            Some(path)
        }
        None if std::env::var_os("CI").is_some() => {
            panic!("CLOSER_EARLIER_RELEASE is not set: .ci/run builds the earlier release")
        }
        None => {
            eprintln!(
                "SKIPPED: the upgrade story needs an earlier release of closer: \
                 CLOSER_EARLIER_RELEASE=$(bash .ci/earlier-release.sh) (.ci/run does this)"
            );
            None
        }
    }
}

/// Iteration 1 asks a question; iteration 2 fixes the bug. Each writes
/// down the directory it works in.
fn agent_script(signals: &Path) -> String {
    format!(
        "#!/bin/sh\npwd >> '{}'\ncase \"$CLOSER_ITERATION\" in\n\
         1) echo '{{\"summary\": \"A decision first.\", \"questions\": [\"May add take negative numbers?\"]}}' ;;\n\
         *) {} ;;\nesac\n",
        signals.join("worktrees").display(),
        fix_add(),
    )
}

/// The highest migration applied to the database.
async fn schema_version(db: &TestDb) -> i64 {
    sqlx::query("SELECT MAX(version) AS v FROM closer_migrations")
        .fetch_one(&db.as_it_is().await)
        .await
        .unwrap()
        .get("v")
}

async fn count(db: &TestDb, sql: &'static str) -> i64 {
    sqlx::query(sql)
        .fetch_one(&db.as_it_is().await)
        .await
        .unwrap()
        .get("n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_an_earlier_release_left_waiting_is_finished_after_the_upgrade() {
    let Some(earlier) = earlier_release() else {
        return;
    };
    let (github, repo, origin) = calc_repository(INSTALLATION, REPO).await;
    let llm = FakeLlm::start().await;
    llm.push([Reply::closer(true, 0.95, &[])]);
    let db = TestDb::new("upgrade").await;
    let dir = tempfile::tempdir().unwrap();
    // The agent's script, in a directory the sandbox shows it.
    let tools = dir.path().join("agent");
    std::fs::create_dir(&tools).unwrap();
    let agent = tools.join("agent.sh");
    let signals = signals_dir(dir.path());
    std::fs::write(&agent, agent_script(&signals)).unwrap();
    std::fs::write(
        dir.path().join("closer.toml"),
        format!(
            "workers = 2\ndata_dir = \"{}\"\nprogress_interval_secs = 0\n\
             [agents.default]\nadapter = \"command\"\ncommand = [\"sh\", \"{}\"]\ntimeout_secs = 60\n\
             [sandbox]\nread_only = [\"{}\"]\nread_write = [\"{}\"]\n",
            dir.path().join("data").display(),
            agent.display(),
            tools.display(),
            signals.display(),
        ),
    )
    .unwrap();
    let mut closer = Closer::new(dir.path(), &db, &github, &llm, &origin, INSTALLATION);

    // The earlier release works the issue until the agent asks.
    closer.start_program(&earlier, &[]);
    closer.ready().await;
    let n = github.open_issue(&repo, "maria", "add subtracts", "`add 2 3` prints -1.");
    for label in ["closer", "type:bug"] {
        github.label_issue(&repo, n, label);
    }
    closer
        .deliver(&github, &repo, n, "issues", json!({"action": "opened"}))
        .await;
    let awaiting = || {
        github
            .labels(&repo, n)
            .contains(&"awaiting-response".to_owned())
    };
    closer.wait_for("the question", awaiting).await;
    closer.settled(&db, RunState::AwaitingResponse).await;
    closer.stop().await;
    let earlier_version = schema_version(&db).await;
    assert!(
        earlier_version < closer::store::migrate::latest_version(),
        "the earlier release's schema ({earlier_version}) is this build's: \
         the story would cross no migration"
    );

    // The answer arrives while only its intake runs: the job it queues
    // is the earlier release's.
    closer.start_program(&earlier, &["--role", "intake"]);
    closer.ready().await;
    closer
        .answer(&github, &repo, n, "Yes, negative numbers too.")
        .await;
    let queued = "SELECT COUNT(*) AS n FROM jobs WHERE state = 'queued'";
    assert_eq!(count(&db, queued).await, 1, "{}", closer.logs());
    closer.stop().await;

    // This build, on the same database and directory.
    closer.start();
    closer.ready().await;
    assert_eq!(
        schema_version(&db).await,
        closer::store::migrate::latest_version()
    );
    closer.closed_once(&github, &repo, n, &db).await;
    // The agent worked on where the earlier release had it work (the
    // same worktree path: this cannot tell a kept worktree from one made
    // again there, and either is right).
    let worked = std::fs::read_to_string(signals.join("worktrees")).unwrap();
    let worked: Vec<_> = worked.lines().collect();
    assert_eq!(worked.len(), 2, "{worked:?}");
    assert_eq!(worked[0], worked[1], "one worktree across the upgrade");
    closer.stop().await;
}
