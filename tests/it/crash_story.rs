//! kill -9 during every step of a run (issue 13): the shipped binary, on
//! the test's database, against the fake GitHub and the fake LLM, is
//! killed at a moment inside each step — the trigger, `start`, `iterate`
//! (while the agent works, and while the LLM judges), the question,
//! `resume`, `finish` (the pull request, the close) — and started again.
//! Each kill lands after GitHub carried a write out and before closer saw
//! the answer, the worst moment for a duplicate. The run completes with one
//! status comment, one question, one pull request, the issue closed, and
//! the agent never working twice on an iteration it finished.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use closer::model::{IssueNumber, RepoName, RunState};
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use sqlx::Row;
use tokio::process::{Child, Command};

use crate::stories::fix_add;
use crate::support::app::SECRET;
use crate::support::db::TestDb;
use crate::support::fake_github::state::FakeUser;
use crate::support::fake_github::{FakeGitHub, Fault};
use crate::support::fake_llm::{FakeLlm, Reply};
use crate::support::git::Origin;
use crate::support::process::free_port;
use crate::support::story::{CALC, CONFIG, RUN_TESTS, TEST_EXISTING};
use crate::support::{client, sign, unique};

const INSTALLATION: i64 = 93;
const REPO: &str = "octo/crash";
const ISSUE: &str = "/repos/octo/crash/issues/1";

/// closer as a process that can be killed and started again.
struct Closer {
    child: Option<Child>,
    url: String,
    dir: PathBuf,
    database_url: String,
    github: String,
    key: String,
    llm: String,
    app_id: u64,
    clone_url: String,
    starts: u32,
}

impl Closer {
    fn start(&mut self) {
        self.starts += 1;
        let bind = format!("127.0.0.1:{}", free_port());
        let log = std::fs::File::create(self.dir.join(format!("closer-{}.log", self.starts)));
        let child = Command::new(env!("CARGO_BIN_EXE_closer"))
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "info,sqlx=warn")
            .env("DATABASE_URL", &self.database_url)
            .env("GITHUB_WEBHOOK_SECRET", SECRET)
            .env("GITHUB_APP_ID", self.app_id.to_string())
            .env("GITHUB_PRIVATE_KEY", &self.key)
            .env("GITHUB_API_URL", &self.github)
            .env("CLOSER_BIND", &bind)
            .env("CLOSER_LLM_PROVIDER", "openai")
            .env("CLOSER_LLM_BASE_URL", &self.llm)
            .env("CLOSER_LLM_API_KEY", "sk-test")
            .env("CLOSER_LLM_MODEL", "test-model")
            .arg("--config")
            .arg(self.dir.join("closer.toml"))
            .arg("serve")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log.expect("log file")))
            .kill_on_drop(true)
            .spawn()
            .expect("closer starts");
        self.child = Some(child);
        self.url = format!("http://{bind}");
    }

    /// SIGKILL: no shutdown code runs, leases are left to expire.
    async fn kill_9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.start_kill().expect("kill");
            let _ = child.wait().await;
        }
    }

    async fn ready(&self) {
        let http = client();
        for _ in 0..200 {
            let answer = http.get(format!("{}/readyz", self.url)).send().await;
            if answer.is_ok_and(|r| r.status().is_success()) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("closer did not become ready:\n{}", self.logs());
    }

    fn logs(&self) -> String {
        (1..=self.starts)
            .map(|n| {
                let path = self.dir.join(format!("closer-{n}.log"));
                let text = std::fs::read_to_string(path).unwrap_or_default();
                format!("--- start {n} ---\n{}", tail(&text, 4000))
            })
            .collect()
    }
}

fn tail(text: &str, max: usize) -> &str {
    let cut = text.len().saturating_sub(max);
    let cut = (cut..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    &text[cut..]
}

fn user(login: &str) -> Value {
    let u = FakeUser::user(login);
    json!({"login": u.login, "id": u.id(), "type": "User"})
}

/// Posts a signed delivery to the running closer, as GitHub would.
async fn deliver(closer: &Closer, github: &FakeGitHub, repo: &RepoName, event: &str, extra: Value) {
    let clone_url = &closer.clone_url;
    let issue = github.issue(repo, IssueNumber(1));
    let mut payload = json!({
        "issue": {
            "number": 1, "title": issue.title, "body": issue.body, "user": user(&issue.author.login),
            "labels": issue.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
            "state": issue.state,
        },
        "sender": user("maria"),
        "installation": {"id": INSTALLATION},
        "repository": {"full_name": REPO, "clone_url": clone_url, "default_branch": "main", "private": false},
    });
    for (k, v) in extra.as_object().expect("an object") {
        payload[k] = v.clone();
    }
    let body = serde_json::to_vec(&payload).unwrap();
    let status = client()
        .post(format!("{}/webhooks", closer.url))
        .header("x-github-event", event)
        .header("x-github-delivery", unique("crash"))
        .header("x-hub-signature-256", sign(SECRET, &body))
        .body(body)
        .send()
        .await
        .expect("delivered")
        .status();
    assert!(status.is_success(), "delivery answered {status}");
}

/// Waits until `seen` holds, or panics with closer's logs.
async fn wait_for(closer: &Closer, what: &str, seen: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !seen() {
        assert!(
            Instant::now() < deadline,
            "never saw {what}:\n{}",
            closer.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The write that will be carried out and never answered.
type Write<'a> = (&'a str, &'a str, &'a str);

fn hang_after_applying(github: &FakeGitHub, (method, path, text): Write) {
    github.inject(
        Fault::HangAfterApplying(Duration::from_secs(120))
            .times(1)
            .method(method)
            .path(path)
            .body(text),
    );
}

/// Once `write` arrives, closer is killed and started again.
async fn kill_during(closer: &mut Closer, github: &FakeGitHub, (method, path, text): Write<'_>) {
    let what = format!("{method} {path} carrying {text:?}");
    let arrived = || {
        github
            .requests_to(method, path)
            .iter()
            .any(|r| r.body.contains(text))
    };
    wait_for(closer, &what, arrived).await;
    restart(closer).await;
}

async fn restart(closer: &mut Closer) {
    closer.kill_9().await;
    closer.start();
    closer.ready().await;
}

/// Iteration 1: the first attempt says it started and hangs (closer is
/// killed under it); the next asks a question. Iteration 2 fixes the bug,
/// counting its runs.
fn agent_script(dir: &Path) -> String {
    let (first, go, worked) = (dir.join("first"), dir.join("go"), dir.join("worked-2"));
    format!(
        "#!/bin/sh\ncase \"$CLOSER_ITERATION\" in\n\
         1) if [ ! -f '{first}' ]; then touch '{first}'; \
            while [ ! -f '{go}' ]; do sleep 0.05; done; exit 1; fi\n\
            echo '{{\"summary\": \"A decision first.\", \"questions\": [\"May add take negative numbers?\"]}}' ;;\n\
         *) echo run >> '{worked}'\n{} ;;\nesac\n",
        fix_add(),
        first = first.display(),
        go = go.display(),
        worked = worked.display(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_every_step_of_a_run_and_it_completes_once() {
    let github = FakeGitHub::start().await;
    github.add_installation(INSTALLATION, "octo");
    let repo = github.add_repo(INSTALLATION, REPO);
    let origin = Origin::with_files(&[
        ("run_tests.sh", RUN_TESTS),
        ("calc.sh", CALC),
        ("tests/existing.sh", TEST_EXISTING),
    ]);
    github.set_clone_url(&repo, &origin.url);
    github.set_file(&repo, "main", ".github/closer.yml", CONFIG);
    github.set_permission(&repo, "maria", "write");
    let llm = FakeLlm::start().await;
    // The first judgment of iteration 2 is cut short by the kill.
    llm.push([
        Reply::Slow(
            Duration::from_secs(120),
            Box::new(Reply::closer(true, 0.95, &[])),
        ),
        Reply::closer(true, 0.95, &[]),
    ]);
    let db = TestDb::new("crash").await;
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent.sh");
    // The files the agent signals with: a directory of their own, since
    // under Landlock nothing new can be made directly in a visible directory
    // that holds a hidden one (docs/security.md, "Known limits").
    let signals = dir.path().join("signals");
    std::fs::create_dir(&signals).unwrap();
    std::fs::write(&agent, agent_script(&signals)).unwrap();
    std::fs::write(
        dir.path().join("closer.toml"),
        format!(
            "workers = 2\ndata_dir = \"{}\"\nprogress_interval_secs = 0\n[queue]\nlease_secs = 5\n\
             [agents.default]\nadapter = \"command\"\ncommand = [\"sh\", \"{}\"]\ntimeout_secs = 60\n\
             [sandbox]\nread_write = [\"{}\"]\n",
            dir.path().join("data").display(),
            agent.display(),
            // The agent's script and its signals live here; closer still
            // hides its data directory and config inside it.
            dir.path().display()
        ),
    )
    .unwrap();
    let mut closer = Closer {
        child: None,
        url: String::new(),
        dir: dir.path().to_owned(),
        database_url: db.url.clone(),
        github: github.url(),
        key: github.private_key_pem().expose_secret().to_owned(),
        llm: llm.openai_url(),
        app_id: github.app_id(),
        clone_url: origin.url.clone(),
        starts: 0,
    };
    closer.start();
    closer.ready().await;

    let n = github.open_issue(&repo, "maria", "add subtracts", "`add 2 3` prints -1.");
    for label in ["closer", "type:bug"] {
        github.label_issue(&repo, n, label);
    }
    let comments = format!("{ISSUE}/comments");
    let labels = format!("{ISSUE}/labels");
    let awaiting = format!("{labels}/awaiting-response");
    let status = ("POST", comments.as_str(), "closer:run=");
    let phase = ("POST", labels.as_str(), "phase:preparation");
    let question = ("POST", comments.as_str(), "needs your input");
    let unlabel = ("DELETE", awaiting.as_str(), "");
    let pull = ("POST", "/repos/octo/crash/pulls", "closer/issue-1");
    let close = ("PATCH", ISSUE, "\"closed\"");
    for write in [status, phase, question, unlabel, pull, close] {
        hang_after_applying(&github, write);
    }

    // The trigger: the status comment is made, its answer lost.
    deliver(
        &closer,
        &github,
        &repo,
        "issues",
        json!({"action": "opened"}),
    )
    .await;
    kill_during(&mut closer, &github, status).await;
    // `start`: the phase label.
    kill_during(&mut closer, &github, phase).await;
    // `iterate`: the agent at work.
    let first = signals.join("first");
    wait_for(&closer, "the agent at work", || first.exists()).await;
    restart(&mut closer).await;
    std::fs::write(signals.join("go"), "").unwrap();
    // The question.
    kill_during(&mut closer, &github, question).await;
    wait_for(&closer, "awaiting the answer", || {
        github
            .labels(&repo, n)
            .contains(&"awaiting-response".to_owned())
    })
    .await;
    // `resume`: the maintainer answers; the label comes off.
    let reply = "Yes, negative numbers too.";
    let id = github.comment_as(&repo, n, FakeUser::user("maria"), reply);
    let comment =
        json!({"id": id, "body": reply, "user": user("maria"), "performed_via_github_app": null});
    let created = json!({"action": "created", "comment": comment});
    deliver(&closer, &github, &repo, "issue_comment", created).await;
    kill_during(&mut closer, &github, unlabel).await;
    // `iterate` 2: the judgment.
    wait_for(&closer, "the judgment", || !llm.requests().is_empty()).await;
    restart(&mut closer).await;
    // `finish`: the pull request, then the close.
    kill_during(&mut closer, &github, pull).await;
    kill_during(&mut closer, &github, close).await;

    let store = db.store().await;
    let done = || github.issue(&repo, n).state == "closed";
    wait_for(&closer, "the issue closed", done).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let row = sqlx::query("SELECT state FROM runs")
            .fetch_one(store.pool())
            .await
            .unwrap();
        let busy: i64 =
            sqlx::query("SELECT COUNT(*) AS n FROM jobs WHERE state IN ('queued', 'leased')")
                .fetch_one(store.pool())
                .await
                .unwrap()
                .get("n");
        if row.get::<String, _>("state") == RunState::Done.to_string() && busy == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the run never settled:\n{}",
            closer.logs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let dead: i64 = sqlx::query("SELECT COUNT(*) AS n FROM jobs WHERE state = 'dead'")
        .fetch_one(store.pool())
        .await
        .unwrap()
        .get("n");
    assert_eq!(dead, 0, "{}", closer.logs());

    let bot: Vec<_> = github
        .comments(&repo, n)
        .into_iter()
        .filter(|c| c.author.is_bot)
        .collect();
    let status: Vec<_> = bot
        .iter()
        .filter(|c| c.body.starts_with("<!-- closer:run="))
        .collect();
    assert_eq!(status.len(), 1, "one status comment: {bot:#?}");
    assert!(
        status[0].body.contains("closer: done"),
        "{}",
        status[0].body
    );
    let questions = bot
        .iter()
        .filter(|c| c.body.contains("needs your input"))
        .count();
    assert_eq!(questions, 1, "one question: {bot:#?}");
    assert_eq!(bot.len(), 2, "nothing else: {bot:#?}");
    assert_eq!(github.pulls(&repo).len(), 1, "one pull request");
    let issue = github.issue(&repo, n);
    assert_eq!(issue.state_reason.as_deref(), Some("completed"));
    let phases: Vec<_> = issue
        .labels
        .iter()
        .filter(|l| l.starts_with("phase:"))
        .collect();
    assert_eq!(phases, ["phase:complete"]);
    let worked = std::fs::read_to_string(signals.join("worked-2")).unwrap();
    assert_eq!(worked.lines().count(), 1, "iteration 2's agent worked once");
    assert!(closer.starts >= 9, "killed in every step");
    closer.kill_9().await;
}
