//! closer as an operator runs it: a binary (the one this build ships, or
//! an earlier release) started with only the README's variables, on the
//! test's database, against the fake GitHub and the fake LLM, that can be
//! killed, stopped and started again — by the crash story and the upgrade
//! story.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use closer::model::{IssueNumber, RepoName, RunState};
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use sqlx::Row;
use tokio::process::{Child, Command};

use super::SpawnApart;
use super::app::SECRET;
use super::client;
use super::db::TestDb;
use super::fake_github::FakeGitHub;
use super::fake_github::state::FakeUser;
use super::fake_llm::FakeLlm;
use super::git::Origin;
use super::process::free_port;
use super::story::{CALC, CONFIG, RUN_TESTS, TEST_EXISTING};

/// The App on `repo`, a shell project with a bug in `add` and a test
/// goal, and maria, who may write.
pub async fn calc_repository(installation: i64, repo: &str) -> (FakeGitHub, RepoName, Origin) {
    let github = FakeGitHub::start().await;
    github.add_installation(installation, "octo");
    let repo = github.add_repo(installation, repo);
    let origin = Origin::with_files(&[
        ("run_tests.sh", RUN_TESTS),
        ("calc.sh", CALC),
        ("tests/existing.sh", TEST_EXISTING),
    ]);
    github.set_clone_url(&repo, &origin.url);
    github.set_file(&repo, "main", ".github/closer.yml", CONFIG);
    github.set_permission(&repo, "maria", "write");
    (github, repo, origin)
}

/// One closer process at a time, on one directory and one database.
pub struct Closer {
    child: Option<Child>,
    pub url: String,
    /// Holds `closer.toml` and one log per start.
    pub dir: PathBuf,
    database_url: String,
    github: String,
    key: String,
    llm: String,
    app_id: u64,
    /// The repository's clone URL, as deliveries carry it.
    pub clone_url: String,
    pub installation: i64,
    pub starts: u32,
}

impl Closer {
    /// Not started yet: `dir` must hold `closer.toml`.
    pub fn new(
        dir: &Path,
        db: &TestDb,
        github: &FakeGitHub,
        llm: &FakeLlm,
        origin: &Origin,
        installation: i64,
    ) -> Closer {
        Closer {
            child: None,
            url: String::new(),
            dir: dir.to_owned(),
            database_url: db.url.clone(),
            github: github.url(),
            key: github.private_key_pem().expose_secret().to_owned(),
            llm: llm.openai_url(),
            app_id: github.app_id(),
            clone_url: origin.url.clone(),
            installation,
            starts: 0,
        }
    }

    /// `closer serve` as this build ships it.
    pub fn start(&mut self) {
        self.start_program(Path::new(env!("CARGO_BIN_EXE_closer")), &[]);
    }

    /// `program serve args…`, with the README's variables only.
    pub fn start_program(&mut self, program: &Path, args: &[&str]) {
        self.starts += 1;
        let bind = format!("127.0.0.1:{}", free_port());
        let log = std::fs::File::create(self.dir.join(format!("closer-{}.log", self.starts)));
        let child = Command::new(program)
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
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(log.expect("log file")))
            .kill_on_drop(true)
            .spawn_apart()
            .expect("closer starts");
        self.child = Some(child);
        self.url = format!("http://{bind}");
    }

    /// SIGKILL: no shutdown code runs, leases are left to expire.
    pub async fn kill_9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.start_kill().expect("kill");
            let _ = child.wait().await;
        }
    }

    /// SIGTERM, as an operator stops it, and its exit within 30 s.
    pub async fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id().expect("running") as i32;
        // SAFETY: plain kill(2) on our own child's pid.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        let exit = tokio::time::timeout(Duration::from_secs(30), child.wait()).await;
        let exit = exit.unwrap_or_else(|_| panic!("no exit 30 s after SIGTERM:\n{}", self.logs()));
        assert!(
            exit.expect("exit status").success(),
            "closer's exit after SIGTERM:\n{}",
            self.logs()
        );
    }

    pub async fn ready(&self) {
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

    /// The end of each start's log.
    pub fn logs(&self) -> String {
        (1..=self.starts)
            .map(|n| {
                let path = self.dir.join(format!("closer-{n}.log"));
                let text = std::fs::read_to_string(path).unwrap_or_default();
                format!("--- start {n} ---\n{}", tail(&text, 4000))
            })
            .collect()
    }

    /// Posts a signed delivery about issue `n` of `repo`, as GitHub would,
    /// with the issue as the fake GitHub has it and `extra`'s fields.
    pub async fn deliver(
        &self,
        github: &FakeGitHub,
        repo: &RepoName,
        n: IssueNumber,
        event: &str,
        extra: Value,
    ) {
        let issue = github.issue(repo, n);
        let mut payload = json!({
            "issue": {
                "number": n.0, "title": issue.title, "body": issue.body,
                "user": user(&issue.author.login),
                "labels": issue.labels.iter().map(|l| json!({"name": l})).collect::<Vec<_>>(),
                "state": issue.state,
            },
            "sender": user("maria"),
            "installation": {"id": self.installation},
            "repository": {
                "full_name": repo.to_string(), "clone_url": self.clone_url,
                "default_branch": "main", "private": false,
            },
        });
        for (k, v) in extra.as_object().expect("an object") {
            payload[k] = v.clone();
        }
        let body = serde_json::to_vec(&payload).unwrap();
        super::deliver_signed(&self.url, SECRET, event, body).await;
    }

    /// maria answers on issue `n`, and GitHub delivers her comment.
    pub async fn answer(&self, github: &FakeGitHub, repo: &RepoName, n: IssueNumber, reply: &str) {
        let id = github.comment_as(repo, n, FakeUser::user("maria"), reply);
        let comment = json!({
            "id": id, "body": reply, "user": user("maria"), "performed_via_github_app": null,
        });
        let created = json!({"action": "created", "comment": comment});
        self.deliver(github, repo, n, "issue_comment", created)
            .await;
    }

    /// Waits up to 90 s until `seen` holds, or panics with closer's logs.
    pub async fn wait_for(&self, what: &str, seen: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while !seen() {
            assert!(
                Instant::now() < deadline,
                "never saw {what}:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Closer {
    /// Waits until the run is in `state` and no job is queued or leased.
    pub async fn settled(&self, db: &TestDb, state: RunState) {
        let pool = db.as_it_is().await;
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let run: String = sqlx::query("SELECT state FROM runs")
                .fetch_one(&pool)
                .await
                .unwrap()
                .get("state");
            let busy: i64 =
                sqlx::query("SELECT COUNT(*) AS n FROM jobs WHERE state IN ('queued', 'leased')")
                    .fetch_one(&pool)
                    .await
                    .unwrap()
                    .get("n");
            if run == state.to_string() && busy == 0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the run stayed {run} with {busy} jobs busy, not {state}:\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for issue `n` to be closed and its run to settle, then expects
    /// what a run with one question leaves: one status comment saying done,
    /// one question and nothing else from the bot, one pull request, the
    /// issue closed as completed with only `phase:complete`, no dead job.
    pub async fn closed_once(
        &self,
        github: &FakeGitHub,
        repo: &RepoName,
        n: IssueNumber,
        db: &TestDb,
    ) {
        let closed = || github.issue(repo, n).state == "closed";
        self.wait_for("the issue closed", closed).await;
        self.settled(db, RunState::Done).await;
        let dead: i64 = sqlx::query("SELECT COUNT(*) AS n FROM jobs WHERE state = 'dead'")
            .fetch_one(&db.as_it_is().await)
            .await
            .unwrap()
            .get("n");
        assert_eq!(dead, 0, "{}", self.logs());
        let bot: Vec<_> = github
            .comments(repo, n)
            .into_iter()
            .filter(|c| c.author.is_bot)
            .collect();
        let status: Vec<_> = bot
            .iter()
            .filter(|c| c.body.starts_with("<!-- closer:run="))
            .collect();
        assert_eq!(status.len(), 1, "one status comment: {bot:#?}");
        let done = status[0].body.contains("closer: done");
        assert!(done, "{}\n{}", status[0].body, self.logs());
        let questions = bot
            .iter()
            .filter(|c| c.body.contains("needs your input"))
            .count();
        assert_eq!(questions, 1, "one question: {bot:#?}");
        assert_eq!(bot.len(), 2, "nothing else: {bot:#?}");
        assert_eq!(github.pulls(repo).len(), 1, "one pull request");
        let issue = github.issue(repo, n);
        assert_eq!(issue.state_reason.as_deref(), Some("completed"));
        let phases: Vec<_> = issue
            .labels
            .iter()
            .filter(|l| l.starts_with("phase:") || *l == "awaiting-response")
            .collect();
        assert_eq!(phases, ["phase:complete"]);
    }
}

/// A directory under `dir` for the files an agent signals with: one of
/// their own, since under Landlock nothing new can be made directly in a
/// visible directory that holds a hidden one (docs/security.md, "Known
/// limits"). Give it to the sandbox as `read_write`.
pub fn signals_dir(dir: &Path) -> PathBuf {
    let signals = dir.join("signals");
    std::fs::create_dir(&signals).unwrap();
    signals
}

/// A user as webhook payloads carry one.
pub fn user(login: &str) -> Value {
    let u = FakeUser::user(login);
    json!({"login": u.login, "id": u.id(), "type": "User"})
}

fn tail(text: &str, max: usize) -> &str {
    let cut = text.len().saturating_sub(max);
    let cut = (cut..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    &text[cut..]
}
