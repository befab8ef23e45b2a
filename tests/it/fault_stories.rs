//! Fault stories (issue 13): what closer does when what it depends on is
//! down. GitHub down for ten minutes mid-run (every write answered 502 or
//! timing out): the run completes once it is back, with no duplicate
//! comment or pull request and nothing dead-lettered. The LLM down: the run
//! waits, no iteration is spent, and goes on when it answers again; an LLM
//! that refuses closer's key fails the run at once, saying so. The
//! database refusing a run's decision: the same work is judged again.
//!
//! The outage's ten minutes pass on a manual clock, the one the queue
//! schedules by (backoff, re-checks, leases), with `closer serve`'s queue
//! settings (decision 80).

use std::time::Duration;

use closer::clock::Clock;
use closer::model::RunState;
use closer::store::{Backend, runs};
use sqlx::Row;

use crate::stories::{classify, first_iteration_held, fix_add};
use crate::support::OutputApart as _;
use crate::support::db::manual_clock;
use crate::support::fake_github::Fault;
use crate::support::fake_github::state::FakeUser;
use crate::support::fake_llm::Reply;
use crate::support::story::{CONFIG, MAINTAINER, REPO, Story, Timing};

const MINUTE: i64 = 60_000;

/// Every write GitHub is sent answers 502 or never answers; reads work.
/// The first pull request created meanwhile is made, then answered 502.
fn github_goes_down(s: &Story) {
    s.github.inject(
        Fault::AfterApplying(502)
            .times(1)
            .method("POST")
            .path(&format!("/repos/{REPO}/pulls")),
    );
    s.github
        .inject(Fault::Status(502).times(u32::MAX).method("POST"));
    s.github.inject(
        Fault::Hang(Duration::from_secs(1))
            .times(u32::MAX)
            .method("PATCH"),
    );
    for method in ["PUT", "DELETE"] {
        s.github
            .inject(Fault::Status(502).times(u32::MAX).method(method));
    }
}

/// How many jobs of the story are dead-lettered.
async fn dead_jobs(s: &Story) -> i64 {
    sqlx::query("SELECT COUNT(*) AS n FROM jobs WHERE state = 'dead'")
        .fetch_one(s.store.pool())
        .await
        .unwrap()
        .get("n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn github_down_for_ten_minutes_mid_run_and_the_run_completes_once_it_is_back() {
    let start = closer::clock::SystemClock.now_ms();
    let (clock, _) = manual_clock(start);
    let mut s = Story::start_on_clock("outage", Some(CONFIG), clock.clone(), Timing::serve()).await;
    // Iteration 1 says it started and waits; GitHub goes down meanwhile.
    let (n, gate) = first_iteration_held(&mut s, "Fix add").await;

    github_goes_down(&s);
    let down_at = clock.now_ms();
    let before = s.github.requests().len();
    // A maintainer's command arrives during the outage: its delivery job
    // (👀, the answer) meets the outage too.
    s.comment_as(n, FakeUser::user(MAINTAINER), "/closer status")
        .await;
    gate.open();
    let deferred = s.pass_time(down_at + 10 * MINUTE).await;
    let refused = s.github.requests().len() - before;
    eprintln!(
        "outage: {deferred} deferrals, {refused} requests to GitHub in 10 minutes of queue time"
    );
    assert!(
        deferred >= 5 && refused >= 20,
        "the outage was met: {deferred} deferrals, {refused} requests\n{}",
        s.journal().await
    );
    assert_eq!(dead_jobs(&s).await, 0, "{}", s.journal().await);
    assert_ne!(s.run(n).await.unwrap().state, RunState::Done);

    // GitHub is back: time goes on until everything is done.
    s.github.clear_faults();
    s.pass_time(down_at + 60 * MINUTE).await;
    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}\n{}", s.journal().await);
    assert_eq!(run.iteration, 2, "no iteration spent on the outage");
    let iterations = runs::iterations(s.store.pool(), &run.id).await.unwrap();
    assert_eq!(iterations.len(), 2);
    assert_eq!(dead_jobs(&s).await, 0, "{}", s.journal().await);
    let pending: i64 =
        sqlx::query("SELECT COUNT(*) AS n FROM jobs WHERE state IN ('queued', 'leased')")
            .fetch_one(s.store.pool())
            .await
            .unwrap()
            .get("n");
    assert_eq!(pending, 0, "{}", s.journal().await);

    // What the maintainer sees: one status comment (done), one answer to
    // the command, one pull request (the one made during the outage), the
    // issue closed.
    assert!(s.status_comment(n).body.contains("closer: done"));
    let bot = s.bot_comments(n);
    assert_eq!(bot.len(), 2, "{bot:#?}");
    assert_eq!(s.github.pulls(&s.repo).len(), 1);
    let issue = s.github.issue(&s.repo, n);
    assert_eq!(issue.state, "closed");
    s.assert_one_truth();
    s.stop().await;
}

/// The LLM answers 503 for a while, first to the classification, then to
/// the completion check (between 503s, 200s whose body is an error): the
/// run waits each time (its steps deferred), the
/// agent works once, no iteration is spent, and the run completes. Four
/// refusals in a row outlast the story's three attempts per step: only a
/// wait that spends no attempt gets through.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_llm_down_pauses_the_run_without_spending_iterations_and_it_resumes() {
    let mut s = Story::start(
        "llm-down",
        Some(&format!("{CONFIG}completion:\n  max_iterations: 2\n")),
    )
    .await;
    let worked = s.path("worked");
    // The agent's report carries what it spent (and nothing else).
    let report = r#"echo '{"summary": "Fixed add.", "usage": {"input_tokens": 1000000}}'"#;
    let fix = fix_add().replace(r#"echo '{"summary": "Fixed add to add."}'"#, report);
    s.agent_step(1, &format!("echo once >> '{}'\n{fix}", worked.display()));
    let down = || Reply::status(503, "The server is overloaded");
    s.llm.push([down(), down(), down(), classify("bug")]);
    // A proxy in front of it answers 200 with an error body, as down.
    let error_body = || Reply::ErrorBody("upstream connect error".into());
    s.llm.push([down(), error_body(), error_body(), down()]);
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s.open_issue("add subtracts", "", &["closer"]).await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}\n{}", s.journal().await);
    assert_eq!(
        run.iteration, 1,
        "no iteration spent while the LLM was down"
    );
    let agent_runs = std::fs::read_to_string(&worked).unwrap();
    assert_eq!(agent_runs.lines().count(), 1, "the agent worked once");
    // Its work counts, with the LLM's own few tokens besides. (Counting it
    // twice needs a save between the two judgments: `model_outage` has one.)
    assert!(
        (1_000_000..1_100_000).contains(&run.tokens_used),
        "{}",
        run.tokens_used
    );
    assert_eq!(
        s.llm.requests().len(),
        9,
        "every scripted answer was asked for"
    );
    assert!(s.status_comment(n).body.contains("closer: done"));
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    s.stop().await;
}

/// The LLM refuses closer's key (401): the run fails at once, the
/// diagnosis names the LLM and what the operator must fix; the agent's one
/// iteration is kept and no second one is started.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_llm_that_refuses_the_key_fails_the_run_at_once_saying_so() {
    let mut s = Story::start("llm-refused", Some(CONFIG)).await;
    s.agent_step(1, &fix_add());
    s.llm
        .push([Reply::status(401, "Incorrect API key provided")]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Failed, "{}", s.journal().await);
    assert_eq!(run.iteration, 1);
    let diagnosis = s.diagnosis(n);
    assert!(diagnosis.contains("HTTP 401"), "{diagnosis}");
    assert!(diagnosis.contains("CLOSER_LLM_API_KEY"), "{diagnosis}");
    assert!(s.labels(n).contains(&"closer:failed".to_owned()));
    s.stop().await;
}

/// The completion check's answer is cut at the output limit (a checklist
/// of sixty task-list lines outgrows it): the run fails at once, naming the
/// setting to raise, with the agent's one iteration kept. Before, the cut
/// answer judged the work incomplete and the agent ran again, iteration
/// after iteration, each answer cut the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_llm_answer_cut_at_its_limit_fails_the_run_at_once_naming_the_setting() {
    let mut s = Story::start("llm-truncated", Some(CONFIG)).await;
    s.agent_step(1, &fix_add());
    s.llm.push([Reply::Truncated]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Failed, "{}", s.journal().await);
    assert_eq!(run.iteration, 1, "no second iteration");
    let diagnosis = s.diagnosis(n);
    assert!(diagnosis.contains("max_output_tokens"), "{diagnosis}");
    assert!(
        !s.path("prompt-2.txt").exists(),
        "the agent did not run again"
    );
    s.stop().await;
}

/// Makes the database refuse (`on`) or take again any write that moves a
/// run to `verifying`: the decision on a verified iteration.
async fn refuse_verifying(s: &Story, on: bool) {
    let sql: &[&str] = match (s.store.backend(), on) {
        (Backend::Sqlite, true) => &["CREATE TRIGGER refuse_decision BEFORE UPDATE ON runs \
             WHEN NEW.state = 'verifying' \
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"],
        (Backend::Postgres, true) => &[
            "CREATE FUNCTION refuse_decision() RETURNS trigger AS $$ BEGIN \
             RAISE EXCEPTION 'refused by the test'; END $$ LANGUAGE plpgsql",
            "CREATE TRIGGER refuse_decision BEFORE UPDATE ON runs FOR EACH ROW \
             WHEN (NEW.state = 'verifying') EXECUTE FUNCTION refuse_decision()",
        ],
        (Backend::Sqlite, false) => &["DROP TRIGGER refuse_decision"],
        (Backend::Postgres, false) => &["DROP TRIGGER refuse_decision ON runs"],
    };
    for sql in sql {
        sqlx::raw_sql(sqlx::AssertSqlSafe(*sql))
            .execute(s.store.pool())
            .await
            .unwrap();
    }
}

/// The database refuses the decision on the run's one allowed iteration,
/// which the agent finished and verification passed: the iteration's end
/// goes with it (one transaction), so the step, tried again, judges the
/// same work again and completes the run. When the iteration's end was
/// written on its own first, the retried step found the iteration over
/// and the run at its limit, and failed a verified run.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_decision_the_database_refuses_is_taken_again_on_the_same_iteration() {
    let config = format!("{CONFIG}completion:\n  max_iterations: 1\n");
    let mut s = Story::start("decision-refused", Some(&config)).await;
    refuse_verifying(&s, true).await;
    let worked = s.path("worked");
    s.agent_step(
        1,
        &format!("echo once >> '{}'\n{}", worked.display(), fix_add()),
    );
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    s.llm.push([Reply::closer(true, 0.95, &[])]);
    let n = s
        .open_issue("add subtracts", "", &["closer", "type:bug"])
        .await;
    let error = s.next_failed_job().await;
    assert!(error.contains("refused by the test"), "{error}");
    refuse_verifying(&s, false).await;
    s.idle().await;

    let run = s.run(n).await.unwrap();
    assert_eq!(run.state, RunState::Done, "{run:#?}\n{}", s.journal().await);
    assert_eq!(run.iteration, 1);
    let agent_runs = std::fs::read_to_string(&worked).unwrap();
    assert_eq!(agent_runs.lines().count(), 1, "the agent worked once");
    let rows = runs::iterations(s.store.pool(), &run.id).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].finished_at.is_some());
    assert_eq!(s.github.issue(&s.repo, n).state, "closed");
    s.stop().await;
}

/// A tmpfs of its own, unmounted when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    /// `None` (and why) when it cannot be mounted (not root, no tmpfs).
    fn mount(bytes: usize) -> Result<SmallDisk, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .output_apart()
            .map_err(|e| e.to_string())?;
        match out.status.success() {
            true => Ok(SmallDisk { dir }),
            false => Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
        }
    }

    fn path(&self) -> &std::path::Path {
        self.dir.path()
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status_apart();
    }
}

/// Fills the disk with a file, then frees `leave` bytes of it.
fn fill(disk: &SmallDisk, leave: u64) -> std::path::PathBuf {
    use std::io::Write;
    let path = disk.path().join("filler");
    let mut file = std::fs::File::create(&path).unwrap();
    let chunk = vec![7u8; 16 * 1024];
    while file.write_all(&chunk).and_then(|()| file.flush()).is_ok() {}
    let len = file.metadata().unwrap().len();
    file.set_len(len.saturating_sub(leave)).unwrap();
    path
}

/// `issues.opened` with `kib` KiB of noise zstd cannot shrink.
fn bulky_delivery(kib: usize) -> Vec<u8> {
    let mut value: serde_json::Value =
        serde_json::from_slice(&crate::support::fixture("issues.opened.json")).unwrap();
    let noise: String = (0..kib * 1024 / 16)
        .map(|_| format!("{:016x}", fastrand::u64(..)))
        .collect();
    value["padding"] = serde_json::json!(noise);
    serde_json::to_vec(&value).unwrap()
}

/// The database's disk fills up while deliveries arrive: each one the
/// database cannot take is answered 503 (GitHub shows it failed; it can be
/// redelivered), every one answered 2xx is in the database, and once
/// there is room the redeliveries are stored. SQLite on a real filesystem
/// that is full (a 3 MB tmpfs); a PostgreSQL server's disk cannot be
/// filled from a test, so on PostgreSQL this story is skipped, saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_database_answers_503_and_loses_nothing_it_acknowledged() {
    use crate::support::app::TestApp;
    use crate::support::db::TestDb;
    use reqwest::StatusCode;

    if std::env::var("TEST_DATABASE_URL").is_ok_and(|u| !u.is_empty()) {
        eprintln!("SKIPPED a_full_database…: it fills a SQLite file's disk; not for PostgreSQL");
        return;
    }
    let disk = match SmallDisk::mount(3 << 20) {
        Ok(disk) => disk,
        Err(why) => {
            eprintln!("SKIPPED a_full_database…: cannot mount a tmpfs: {why}");
            return;
        }
    };
    let app = TestApp::start(TestDb::sqlite_in(disk.path())).await;
    let filler = fill(&disk, 1 << 20);
    let mut acknowledged = Vec::new();
    let mut refused = Vec::new();
    let mut i = 0;
    while refused.len() < 3 {
        i += 1;
        assert!(i < 100, "the disk never filled: {acknowledged:?}");
        let id = format!("full-{i}");
        let body = bulky_delivery(64);
        match app.deliver("issues", &id, &body).await {
            s if s.is_success() => acknowledged.push((id, body)),
            StatusCode::SERVICE_UNAVAILABLE => refused.push((id, body)),
            other => panic!("{id} answered {other}"),
        }
    }
    assert!(
        !acknowledged.is_empty(),
        "some were stored before it filled"
    );
    for (id, _) in &acknowledged {
        let stored = closer::store::deliveries::get(app.store.pool(), id).await;
        assert!(stored.unwrap().is_some(), "acknowledged {id} was lost");
    }
    for (id, _) in &refused {
        let stored = closer::store::deliveries::get(app.store.pool(), id).await;
        assert!(stored.unwrap().is_none(), "{id} was refused, yet stored");
    }

    // Room again: GitHub's redeliveries are stored, the earlier ones kept.
    std::fs::remove_file(filler).unwrap();
    for (id, body) in &refused {
        assert_eq!(app.deliver("issues", id, body).await, StatusCode::ACCEPTED);
    }
    let stored = app.count("deliveries").await as usize;
    assert_eq!(stored, acknowledged.len() + refused.len());
    assert_eq!(
        app.count("jobs").await as usize,
        stored,
        "each with its job"
    );
    app.stop().await;
    drop(disk);
}

/// The database stays locked past the 10 s lock wait (another process holds
/// SQLite's write lock, or another session PostgreSQL's lock on the
/// deliveries table): the delivery is answered 503 and not stored; once
/// the lock is gone its redelivery is. A lock held for less than the wait
/// only delays the answer (the intake tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_locked_past_the_busy_timeout_answers_503_and_takes_the_redelivery() {
    use crate::support::app::TestApp;
    use crate::support::db::TestDb;
    use closer::store::Backend;
    use reqwest::StatusCode;

    let app = TestApp::start(TestDb::new("locked").await).await;
    let body = crate::support::fixture("issues.opened.json");
    let mut blocker = app.store.pool().acquire().await.unwrap();
    let lock = match app.store.backend() {
        Backend::Sqlite => "BEGIN IMMEDIATE",
        Backend::Postgres => "BEGIN; LOCK TABLE deliveries IN EXCLUSIVE MODE",
    };
    sqlx::raw_sql(lock).execute(&mut *blocker).await.unwrap();
    let started = std::time::Instant::now();
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        app.deliver("issues", "locked-1", &body),
    )
    .await
    .expect("intake answers within its lock wait, not when the lock goes");
    assert_eq!(answer, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        started.elapsed() >= Duration::from_secs(9),
        "after the busy timeout"
    );
    sqlx::raw_sql("COMMIT")
        .execute(&mut *blocker)
        .await
        .unwrap();
    drop(blocker);
    assert_eq!(
        app.count("deliveries").await,
        0,
        "the refused one was not stored"
    );
    assert_eq!(
        app.deliver("issues", "locked-1", &body).await,
        StatusCode::ACCEPTED
    );
    assert_eq!(app.count("jobs").await, 1);
    app.stop().await;
}
