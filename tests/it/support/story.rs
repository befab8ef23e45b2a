//! The story tester: closer's real intake, workers and engine in-process,
//! against the fake GitHub, the fake LLM, a local bare git repository as the
//! repository's `clone_url` and a scripted agent (the `command` adapter
//! running shell scripts, one per iteration). Webhooks are posted signed,
//! as GitHub would; tests wait on the workers' settled signals, never sleep.
//! A story on a manual clock ([`Story::start_on_clock`]) lets hours of
//! backoff pass in moments: [`Story::pass_time`] moves the clock to the
//! next queued job whenever the workers are quiet.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use closer::agent::process::BaseEnv;
use closer::clock::{Clock, ManualClock, SharedClock};
use closer::config::agents::{AdapterKind, AgentConfig};
use closer::engine::run::{Engine, EngineSettings, LlmPrices, MAYBE_APPLIED_RECHECK};
use closer::github::RetrySettings;
use closer::github::types::{IssueNumber, RepoName};
use closer::github::{GitHubApp, GitHubSettings};
use closer::llm::{LlmSettings, Provider, build_client};
use closer::model::{Run, RunState};
use closer::server::{self, AppState};
use closer::store::Store;
use closer::store::messages::MessageRow;
use closer::store::runs;
use closer::store::writer::IntakeWriter;
use closer::worker::{JobSettled, Settled, WorkerPool, WorkerSettings};
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};
use sqlx::Row;
use tempfile::TempDir;
use tokio::sync::{Notify, broadcast, watch};

use super::db::TestDb;
use super::fake_github::FakeGitHub;
use super::fake_github::state::{FakeComment, FakeUser};
use super::fake_llm::FakeLlm;
use super::git::Origin;

/// How long a story waits for the next job to settle before it fails,
/// printing the journal. Generous: the suite runs stories, real agent CLIs
/// and sandboxed goals side by side on two cores, and one iteration's step
/// (baseline, agent, goals, reproduction, judgment) went past a minute
/// there under load. A step that hangs still fails the story.
const SETTLE_WAIT: Duration = Duration::from_secs(180);

/// The webhook secret the stories sign with.
pub const SECRET: &str = "story secret";
/// The LLM key the stories' engine holds.
pub const LLM_KEY: &str = "sk-test-story-key";
pub const INSTALLATION: i64 = 77;
pub const REPO: &str = "octo/calc";
/// The maintainer who opens issues (has `write`).
pub const MAINTAINER: &str = "maria";

/// A shell project: `sh run_tests.sh` runs every `tests/*.sh` and reports
/// in TAP (`ok 1 - tests/a.sh`, `not ok 2 - tests/b.sh`), as `prove` does.
pub const RUN_TESTS: &str = "#!/bin/sh\nstatus=0\nn=0\nfor t in tests/*.sh; do\n  n=$((n+1))\n  if sh \"$t\"; then echo \"ok $n - $t\"; else echo \"not ok $n - $t\"; status=1; fi\ndone\necho \"1..$n\"\nexit $status\n";
pub const CALC: &str = "add() { echo $(( $1 - $2 )); }\n";
pub const TEST_EXISTING: &str = "echo existing test passes\n";

/// The default repository config of the stories.
pub const CONFIG: &str = "dod:\n  - { type: tests_pass, command: \"sh run_tests.sh\" }\n";

/// How the story's time runs: the queue's backoff and attempts, the
/// re-check after a write that may have been applied, and the GitHub
/// client's own (in-call, real-time) retries.
#[derive(Clone)]
pub struct Timing {
    pub worker: WorkerSettings,
    pub run_attempts: i64,
    pub delivery_attempts: i64,
    pub recheck_after: Duration,
    pub github_retry: RetrySettings,
    pub github_timeout: Duration,
}

impl Timing {
    /// Quick retries in real time, for stories with a few faults.
    pub fn quick() -> Timing {
        Timing {
            worker: WorkerSettings {
                lease: Duration::from_secs(2),
                poll_interval: Duration::from_millis(50),
                backoff: closer::store::jobs::Backoff {
                    base: Duration::from_millis(100),
                    max: Duration::from_secs(1),
                },
                ..WorkerSettings::default()
            },
            run_attempts: 3,
            delivery_attempts: 5,
            recheck_after: Duration::from_millis(200),
            github_retry: RetrySettings::default(),
            github_timeout: Duration::from_secs(30),
        }
    }

    /// `closer serve`'s queue (8 attempts, backoff from 2 s to 10 min, the
    /// 30 s re-check), for a story that moves a manual clock through an
    /// outage; the GitHub client's in-call retries, which sleep in real
    /// time, stay short (10–50 ms apart, a 300 ms answer timeout).
    pub fn serve() -> Timing {
        let quick = Timing::quick();
        Timing {
            worker: WorkerSettings {
                backoff: closer::store::jobs::Backoff::default(),
                ..quick.worker
            },
            run_attempts: 8,
            delivery_attempts: 8,
            recheck_after: MAYBE_APPLIED_RECHECK,
            github_retry: RetrySettings {
                base_backoff: Duration::from_millis(10),
                max_backoff: Duration::from_millis(50),
                ..RetrySettings::default()
            },
            github_timeout: Duration::from_millis(300),
        }
    }
}

/// The story's directory the sandbox lets the agent write to (beside
/// closer's `data`, which it hides): under Landlock a writable directory
/// that holds a hidden one cannot get new entries (docs/security.md).
const SHARED: &str = "shared";

pub struct Story {
    pub github: FakeGitHub,
    pub llm: FakeLlm,
    pub origin: Origin,
    pub repo: RepoName,
    pub store: Store,
    pub dir: TempDir,
    url: String,
    client: reqwest::Client,
    settled: broadcast::Receiver<JobSettled>,
    shutdown: watch::Sender<bool>,
    ready: Arc<Notify>,
    workers: Vec<tokio::task::JoinHandle<()>>,
    /// The engine of the current workers.
    pub engine: Option<Arc<Engine>>,
    worker_stop: watch::Sender<bool>,
    deliveries: u64,
    /// Every delivery sent, in order: its event and its exact body.
    sent: Vec<(String, Vec<u8>)>,
    /// The agent the workers run (default: the scripted `agent.sh`);
    /// takes effect at the next [`Story::spawn_workers`].
    pub agent: Option<AgentConfig>,
    /// The sandbox (default: the machine's, as `closer serve` picks it);
    /// takes effect at the next [`Story::spawn_workers`].
    pub confinement: Option<closer::agent::confine::Confinement>,
    /// Live progress edits while the agent works (default: off).
    pub progress_every: Option<Duration>,
    /// `--dry-run`: GitHub writes (and pushes) recorded here, not sent;
    /// takes effect at the next [`Story::spawn_workers`].
    pub dry_run: Option<Arc<closer::github::MemoryRecorder>>,
    /// A job dead-lettered is what the story is about: [`Story::idle`]
    /// does not take it for a failure of the story.
    pub deaths_expected: bool,
    timing: Timing,
    /// The queue's clock, when the story moves it by hand.
    clock: Option<Arc<ManualClock>>,
    _db: TestDb,
}

impl Story {
    /// Everything running; the repository holds the shell project and
    /// `config` as `.github/closer.yml` (`None`: no file).
    pub async fn start(name: &str, config: Option<&str>) -> Story {
        let files = [
            ("run_tests.sh", RUN_TESTS),
            ("calc.sh", CALC),
            ("tests/existing.sh", TEST_EXISTING),
        ];
        Story::start_with_files(name, config, &files).await
    }

    /// Like [`Story::start`], with the repository holding `files` instead
    /// of the shell project.
    pub async fn start_with_files(
        name: &str,
        config: Option<&str>,
        files: &[(&str, &str)],
    ) -> Story {
        Story::build(name, config, files, None, Timing::quick()).await
    }

    /// Like [`Story::start`], with the store (the queue, the intake) on
    /// `clock`, which only [`Story::pass_time`] moves, and `timing`.
    pub async fn start_on_clock(
        name: &str,
        config: Option<&str>,
        clock: Arc<ManualClock>,
        timing: Timing,
    ) -> Story {
        let files = [
            ("run_tests.sh", RUN_TESTS),
            ("calc.sh", CALC),
            ("tests/existing.sh", TEST_EXISTING),
        ];
        Story::build(name, config, &files, Some(clock), timing).await
    }

    /// Like [`Story::start_with_files`], on `clock` with `timing` (as
    /// [`Story::start_on_clock`]).
    pub async fn start_with_files_on_clock(
        name: &str,
        config: Option<&str>,
        files: &[(&str, &str)],
        clock: Arc<ManualClock>,
        timing: Timing,
    ) -> Story {
        Story::build(name, config, files, Some(clock), timing).await
    }

    async fn build(
        name: &str,
        config: Option<&str>,
        files: &[(&str, &str)],
        clock: Option<Arc<ManualClock>>,
        timing: Timing,
    ) -> Story {
        let db = TestDb::new(name).await;
        let shared: SharedClock = match &clock {
            Some(manual) => manual.clone(),
            None => closer::clock::system(),
        };
        let store = db.store_with_clock(shared).await;
        let github = FakeGitHub::start().await;
        github.add_installation(INSTALLATION, "octo");
        let repo = github.add_repo(INSTALLATION, REPO);
        let origin = Origin::with_files(files);
        github.set_clone_url(&repo, &origin.url);
        if let Some(text) = config {
            github.set_file(&repo, "main", ".github/closer.yml", text);
        }
        github.set_permission(&repo, MAINTAINER, "write");
        let llm = FakeLlm::start().await;
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join(SHARED)).expect("shared dir");
        let agent_script = dir.path().join(SHARED).join("agent.sh");
        std::fs::write(
            &agent_script,
            "#!/bin/sh\nscript=\"$(dirname \"$0\")/iter-$CLOSER_ITERATION.sh\"\n\
             cat > \"$(dirname \"$0\")/prompt-$CLOSER_ITERATION.txt\"\n\
             if [ -f \"$script\" ]; then exec sh \"$script\"; fi\n\
             echo \"no script for iteration $CLOSER_ITERATION\" >&2; exit 3\n",
        )
        .expect("agent script");

        let (shutdown, shutdown_rx) = watch::channel(false);
        let ready = Arc::new(Notify::new());
        let (writer, _writer_task) =
            IntakeWriter::spawn(store.clone(), 1024).expect("intake writer");
        let state = Arc::new(AppState::new(
            store.clone(),
            Some(writer),
            &SecretString::from(SECRET),
            ready.clone(),
            timing.delivery_attempts,
        ));
        // As `closer serve` does once it has asked GitHub who it is.
        let _ = state.app_slug.set(super::fake_github::APP_SLUG.to_owned());
        let router = server::router(state, "/webhooks");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let mut stop = shutdown_rx;
        tokio::spawn(async move {
            let _ = axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stop.changed().await;
                })
                .await;
        });
        let (settled_tx, settled) = broadcast::channel(1);
        drop(settled_tx);
        let mut story = Story {
            github,
            llm,
            origin,
            repo,
            store,
            dir,
            url,
            client: super::client(),
            settled,
            shutdown,
            ready,
            workers: Vec::new(),
            engine: None,
            worker_stop: watch::channel(false).0,
            deliveries: 0,
            sent: Vec::new(),
            agent: None,
            confinement: None,
            progress_every: None,
            dry_run: None,
            deaths_expected: false,
            timing,
            clock,
            _db: db,
        };
        story.spawn_workers();
        story
    }

    /// Starts the engine and two workers, as a fresh process would (a new
    /// GitHub App client, a new engine, nothing kept in memory).
    pub fn spawn_workers(&mut self) {
        let app = Arc::new(
            GitHubApp::new(
                GitHubSettings {
                    api_url: self.github.url(),
                    app_id: Some(self.github.app_id()),
                    private_key: Some(self.github.private_key_pem()),
                    dry_run: self.dry_run.is_some(),
                    retry: self.timing.github_retry.clone(),
                    request_timeout: self.timing.github_timeout,
                    // As `closer serve` starts it.
                    redactor: closer::redact::Redactor::with_operator_secrets(
                        Some(&SecretString::from(SECRET)),
                        Some(&SecretString::from(LLM_KEY)),
                    ),
                    ..GitHubSettings::default()
                },
                closer::clock::system(),
                self.dry_run
                    .clone()
                    .map(|r| r as Arc<dyn closer::github::WriteRecorder>),
            )
            .expect("GitHub App"),
        );
        let mut llm_settings = LlmSettings::new(
            Provider::Openai,
            &self.llm.openai_url(),
            SecretString::from(LLM_KEY),
            "test-model",
        );
        llm_settings.retry.max_attempts = 1;
        let agent = self.agent.clone().unwrap_or_else(|| AgentConfig {
            adapter: AdapterKind::Command,
            command: vec!["sh".into(), self.path("agent.sh").display().to_string()],
            timeout_secs: 60,
            pass_env: Vec::new(),
            max_output_bytes: 1 << 20,
            config_files: Default::default(),
            keep_home_secs: 0,
            resume: true,
            env: Default::default(),
        });
        let engine = Engine::new(
            self.store.clone(),
            app,
            EngineSettings {
                agents: [("default".to_owned(), agent)].into_iter().collect(),
                llm: Some(build_client(llm_settings).expect("LLM client")),
                data_dir: self.data_dir(),
                confinement: self
                    .confinement
                    .clone()
                    .unwrap_or_else(|| super::confinement(&self.shared_dir(), &self.data_dir())),
                base_env: BaseEnv::from_process(),
                max_attempts: self.timing.run_attempts,
                dashboard_url: None,
                max_tokens_per_run: None,
                max_cost_usd_per_run: None,
                llm_prices: LlmPrices::default(),
                recheck_after: self.timing.recheck_after,
                progress_every: self.progress_every,
                prompt_renderer: closer::prompts::Renderer::new(env!("CARGO_BIN_EXE_closer")),
            },
            self.ready.clone(),
        );
        // The same wiring as `closer serve`.
        let runners = closer::service::job_runners(&self.store, &engine);
        let settings = self.timing.worker.clone();
        let pool = WorkerPool::new(self.store.clone(), runners, settings, self.ready.clone());
        self.settled = pool.subscribe();
        let (stop, stop_rx) = watch::channel(false);
        self.worker_stop = stop;
        self.workers = pool.spawn(2, "story", stop_rx);
        self.engine = Some(engine);
    }

    /// Kills the workers mid-job, as a crash would: their tasks are dropped
    /// (agents killed with them), their leases left to expire.
    /// Every job settled from now on, as the workers report them.
    pub fn watch_settled(&self) -> broadcast::Receiver<JobSettled> {
        self.settled.resubscribe()
    }

    pub fn kill_workers(&mut self) {
        for worker in self.workers.drain(..) {
            worker.abort();
        }
    }

    /// The agent's script for iteration `n` (runs in the worktree).
    pub fn agent_step(&self, n: u32, script: &str) {
        std::fs::write(self.path(&format!("iter-{n}.sh")), script).expect("write");
    }

    /// The prompt the agent got in iteration `n`.
    pub fn prompt(&self, n: u32) -> String {
        std::fs::read_to_string(self.path(&format!("prompt-{n}.txt"))).unwrap_or_default()
    }

    /// The directory the story's agent and goals may write to (its scripts,
    /// prompts and marker files); closer's data directory is beside it, not
    /// inside, as an operator's would be.
    pub fn shared_dir(&self) -> PathBuf {
        self.dir.path().join(SHARED)
    }

    /// closer's data directory (mirrors, worktrees, the runs' HOMEs).
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// `name` in [`Story::shared_dir`].
    pub fn path(&self, name: &str) -> PathBuf {
        self.shared_dir().join(name)
    }

    /// Opens an issue as the maintainer with `labels` and delivers `issues.opened`.
    pub async fn open_issue(&mut self, title: &str, body: &str, labels: &[&str]) -> IssueNumber {
        let number = self.github.open_issue(&self.repo, MAINTAINER, title, body);
        for label in labels {
            self.github.label_issue(&self.repo, number, label);
        }
        let payload = json!({
            "action": "opened",
            "issue": self.issue_json(number),
            "sender": user_json(&FakeUser::user(MAINTAINER)),
        });
        self.deliver("issues", payload).await;
        number
    }

    /// Puts `label` on the issue as `user` and delivers `issues.labeled`.
    pub async fn label_as(&mut self, number: IssueNumber, user: &str, label: &str) {
        self.github.label_issue(&self.repo, number, label);
        let payload = json!({
            "action": "labeled",
            "issue": self.issue_json(number),
            "label": {"name": label},
            "sender": user_json(&FakeUser::user(user)),
        });
        self.deliver("issues", payload).await;
    }

    /// `user` edits the issue's title and body; `issues.edited` is
    /// delivered, its `changes` naming what changed, as GitHub's do.
    pub async fn edit_issue_as(
        &mut self,
        number: IssueNumber,
        user: &str,
        title: &str,
        body: &str,
    ) {
        let before = self.github.issue(&self.repo, number);
        let before_body = before.body.unwrap_or_default();
        self.github.edit_issue(&self.repo, number, title, body);
        let mut changes = json!({});
        if before.title != title {
            changes["title"] = json!({"from": before.title});
        }
        if before_body != body {
            changes["body"] = json!({"from": before_body});
        }
        let payload = json!({
            "action": "edited",
            "issue": self.issue_json(number),
            "changes": changes,
            "sender": user_json(&FakeUser::user(user)),
        });
        self.deliver("issues", payload).await;
    }

    /// `user` takes `label` off the issue; `issues.unlabeled` is delivered.
    pub async fn unlabel_as(&mut self, number: IssueNumber, user: &str, label: &str) {
        self.github.unlabel_issue(&self.repo, number, label);
        let payload = json!({
            "action": "unlabeled",
            "issue": self.issue_json(number),
            "label": {"name": label},
            "sender": user_json(&FakeUser::user(user)),
        });
        self.deliver("issues", payload).await;
    }

    /// `user` closes the issue; `issues.closed` is delivered.
    pub async fn close_as(&mut self, number: IssueNumber, user: &str) {
        self.set_state_as(number, user, "closed", "closed").await;
    }

    /// Opens the closed issue again as `user` and delivers `issues.reopened`.
    pub async fn reopen_as(&mut self, number: IssueNumber, user: &str) {
        self.set_state_as(number, user, "open", "reopened").await;
    }

    /// `user` sets the issue's `state`, and `issues.<action>` is delivered.
    async fn set_state_as(&mut self, number: IssueNumber, user: &str, state: &str, action: &str) {
        self.github.set_issue_state(&self.repo, number, state);
        let payload = json!({
            "action": action,
            "issue": self.issue_json(number),
            "sender": user_json(&FakeUser::user(user)),
        });
        self.deliver("issues", payload).await;
    }

    /// Comments as `user` and delivers `issue_comment.created`.
    pub async fn comment_as(&mut self, number: IssueNumber, user: FakeUser, body: &str) -> u64 {
        let id = self
            .github
            .comment_as(&self.repo, number, user.clone(), body);
        let payload = self.comment_event("created", number, id, body, &user, &user);
        self.deliver("issue_comment", payload).await;
        id
    }

    /// An `issue_comment` payload: comment `id` on issue `number`, written
    /// by `author`, the event sent by `sender`.
    fn comment_event(
        &self,
        action: &str,
        number: IssueNumber,
        id: u64,
        body: &str,
        author: &FakeUser,
        sender: &FakeUser,
    ) -> Value {
        json!({
            "action": action,
            "issue": self.issue_json(number),
            "comment": {"id": id, "body": body, "user": user_json(author), "performed_via_github_app": null},
            "sender": user_json(sender),
        })
    }

    /// `editor` changes comment `id` (by `author`) to `body`, and
    /// `issue_comment.edited` is delivered with the text it had.
    pub async fn edit_comment_as(
        &mut self,
        number: IssueNumber,
        id: u64,
        author: FakeUser,
        editor: FakeUser,
        body: &str,
    ) {
        let from = self.github.edit_comment(&self.repo, id, body);
        let mut payload = self.comment_event("edited", number, id, body, &author, &editor);
        payload["changes"] = json!({"body": {"from": from}});
        self.deliver("issue_comment", payload).await;
    }

    /// `who` deletes comment `id` (by `author`), and `issue_comment.deleted`
    /// is delivered with the text it had.
    pub async fn delete_comment_as(
        &mut self,
        number: IssueNumber,
        id: u64,
        author: FakeUser,
        who: FakeUser,
    ) {
        let body = self.github.delete_comment(&self.repo, id);
        let payload = self.comment_event("deleted", number, id, &body, &author, &who);
        self.deliver("issue_comment", payload).await;
    }

    /// Delivers `issue_comment.created` for an existing comment again, under
    /// a new delivery id (a captured delivery replayed).
    pub async fn replay_comment(
        &mut self,
        number: IssueNumber,
        id: u64,
        user: FakeUser,
        body: &str,
    ) {
        let payload = self.comment_event("created", number, id, body, &user, &user);
        self.deliver("issue_comment", payload).await;
    }

    /// Delivers `pull_request.closed` with `merged: true` for a merged PR
    /// whose head branch is in the story's repository.
    pub async fn merged(&mut self, number: IssueNumber, head: &str) {
        self.merged_from(number, head, REPO).await;
    }

    /// The same, for a head branch in `head_repo` (a fork's).
    pub async fn merged_from(&mut self, number: IssueNumber, head: &str, head_repo: &str) {
        let payload = json!({
            "action": "closed",
            "pull_request": {"number": number.0, "head": {"ref": head, "repo": {"full_name": head_repo}},
                             "base": {"ref": "main"}, "merged": true, "state": "closed"},
            "sender": user_json(&FakeUser::user(MAINTAINER)),
        });
        self.deliver("pull_request", payload).await;
    }

    /// Posts a signed delivery of `event` (repository and installation added).
    pub async fn deliver(&mut self, event: &str, mut payload: Value) -> StatusCode {
        payload["installation"] = json!({"id": INSTALLATION});
        payload["repository"] = self.github.repo_payload(&self.repo);
        let body = serde_json::to_vec(&payload).unwrap();
        self.sent.push((event.to_owned(), body.clone()));
        self.deliveries += 1;
        let id = super::unique(&format!("story-{}", self.deliveries));
        self.deliver_raw(event, &id, &body).await
    }

    /// The repository is deleted and another created under its name, in
    /// the same installation: a new GitHub id, no issues yet (numbers start
    /// at 1 again), and the same clone URL serving `files` with none of the
    /// old history. The maintainer has write access to it, and `config` is
    /// its `.github/closer.yml`.
    pub fn recreate_repo(&mut self, files: &[(&str, &str)], config: Option<&str>) {
        self.github.delete_repo(&self.repo);
        let repo = self.github.add_repo(INSTALLATION, &self.repo.to_string());
        self.origin.start_over(files);
        self.github.set_clone_url(&repo, &self.origin.url);
        if let Some(text) = config {
            self.github
                .set_file(&repo, "main", ".github/closer.yml", text);
        }
        self.github.set_permission(&repo, MAINTAINER, "write");
        self.repo = repo;
    }

    /// The repository is renamed (or moved) on GitHub to `new_full_name`;
    /// the story's deliveries name it so from now on. With `tell`,
    /// `repository.renamed` (same owner) or `.transferred` is delivered.
    pub async fn rename_repo(&mut self, new_full_name: &str, tell: bool) {
        let old = self.repo.clone();
        self.repo = self.github.rename_repo(&old, new_full_name);
        if !tell {
            return;
        }
        let payload = match old.owner() == self.repo.owner() {
            true => json!({
                "action": "renamed",
                "changes": {"repository": {"name": {"from": old.name()}}},
                "sender": user_json(&FakeUser::user(MAINTAINER)),
            }),
            false => json!({
                "action": "transferred",
                "changes": {"owner": {"from": {"user": user_json(&FakeUser::user(old.owner()))}}},
                "sender": user_json(&FakeUser::user(MAINTAINER)),
            }),
        };
        self.deliver("repository", payload).await;
    }

    /// How many deliveries the story has sent ([`Story::replay`] takes one
    /// by its place, from 0).
    pub fn sent(&self) -> usize {
        self.sent.len()
    }

    /// Sends delivery `index` again, byte for byte (so with a valid
    /// signature), under a new delivery id: what somebody who captured it
    /// could do.
    pub async fn replay(&mut self, index: usize) -> StatusCode {
        let (event, body) = self.sent[index].clone();
        self.deliveries += 1;
        let id = super::unique(&format!("story-replay-{}", self.deliveries));
        self.deliver_raw(&event, &id, &body).await
    }

    /// Posts these bytes as delivery `id`.
    pub async fn deliver_raw(&self, event: &str, id: &str, body: &[u8]) -> StatusCode {
        let status = self
            .client
            .post(format!("{}/webhooks", self.url))
            .header("content-type", "application/json")
            .header("x-github-event", event)
            .header("x-github-delivery", id)
            .header("x-hub-signature-256", super::sign(SECRET, body))
            .body(body.to_vec())
            .send()
            .await
            .expect("delivered")
            .status();
        assert!(status.is_success(), "delivery answered {status}");
        status
    }

    /// The issue as a webhook shows it (GitHub's REST shape).
    pub fn issue_json(&self, number: IssueNumber) -> Value {
        self.github.issue_json(&self.repo, number)
    }

    /// Waits until no job is queued or leased (every step has run). Panics
    /// when a job is dead-lettered, with its error.
    pub async fn idle(&mut self) {
        loop {
            let pending: i64 = sqlx::query(
                "SELECT COUNT(*) AS n FROM jobs WHERE state = 'queued' OR state = 'leased'",
            )
            .fetch_one(self.store.pool())
            .await
            .unwrap()
            .get("n");
            if pending == 0 {
                self.assert_one_truth();
                return;
            }
            match tokio::time::timeout(SETTLE_WAIT, self.settled.recv()).await {
                Ok(Ok(job)) if job.outcome == Settled::Dead && !self.deaths_expected => {
                    let error: Option<String> =
                        sqlx::query("SELECT last_error FROM jobs WHERE id = $1")
                            .bind(job.id)
                            .fetch_one(self.store.pool())
                            .await
                            .unwrap()
                            .get("last_error");
                    panic!("job {} ({}) died: {error:?}", job.id, job.kind);
                }
                Ok(Ok(_)) => {}
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(e)) => panic!("settled channel: {e}"),
                Err(_) => panic!(
                    "{pending} job(s) still pending after {} s\n{}",
                    SETTLE_WAIT.as_secs(),
                    self.journal().await
                ),
            }
        }
    }

    /// Time passes on the story's manual clock until `until` (ms): each
    /// time the workers are quiet (no job leased, none due), the clock moves
    /// to the next queued job's time, as the hours of an outage would pass.
    /// Returns how many jobs were deferred meanwhile; panics when one is
    /// dead-lettered.
    pub async fn pass_time(&mut self, until: i64) -> usize {
        let clock = self.clock.clone().expect("a story on a manual clock");
        let mut deferred = 0;
        let mut busy_since = std::time::Instant::now();
        loop {
            deferred += self.drain_settled();
            if !self.quiet().await {
                // The clock stands still while a job runs: one that never
                // settles would hold it (and the story) forever.
                if busy_since.elapsed() > SETTLE_WAIT {
                    panic!(
                        "a job still busy after {} s\n{}",
                        SETTLE_WAIT.as_secs(),
                        self.journal().await
                    );
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
            busy_since = std::time::Instant::now();
            let next: Option<i64> =
                sqlx::query("SELECT MIN(run_at) AS next FROM jobs WHERE state = 'queued'")
                    .fetch_one(self.store.pool())
                    .await
                    .unwrap()
                    .get("next");
            match next {
                Some(at) if at <= until => clock.set(at.max(clock.now_ms())),
                _ => {
                    clock.set(until.max(clock.now_ms()));
                    return deferred + self.drain_settled();
                }
            }
            self.ready.notify_waiters();
        }
    }

    /// No job leased and none due at the story's time.
    async fn quiet(&self) -> bool {
        let busy: i64 = sqlx::query(
            "SELECT COUNT(*) AS n FROM jobs WHERE state = 'leased' \
             OR (state = 'queued' AND run_at <= $1)",
        )
        .bind(self.store.now_ms())
        .fetch_one(self.store.pool())
        .await
        .unwrap()
        .get("n");
        busy == 0
    }

    /// The deferrals among the jobs settled so far; panics on a dead one.
    fn drain_settled(&mut self) -> usize {
        let mut deferred = 0;
        loop {
            match self.settled.try_recv() {
                Ok(job) if job.outcome == Settled::Dead => {
                    panic!(
                        "job {} ({} {}) was dead-lettered",
                        job.id, job.kind, job.key
                    )
                }
                Ok(job) => deferred += usize::from(job.outcome == Settled::Deferred),
                Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(_) => return deferred,
            }
        }
    }

    /// Waits until `done` holds for the issue's run (checked after every
    /// settled job).
    pub async fn until(&mut self, done: impl Fn(Option<&Run>) -> bool, number: IssueNumber) {
        loop {
            if done(self.run(number).await.as_ref()) {
                return;
            }
            match tokio::time::timeout(SETTLE_WAIT, self.settled.recv()).await {
                Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(e)) => panic!("settled channel: {e}"),
                Err(_) => panic!(
                    "condition not reached within {} s: {:#?}",
                    SETTLE_WAIT.as_secs(),
                    self.run(number).await
                ),
            }
        }
    }

    /// Waits until every delivery so far was handled, while a run's job
    /// may still be working (the run's steps are not waited for).
    pub async fn deliveries_handled(&mut self) {
        let deadline = std::time::Instant::now() + SETTLE_WAIT;
        loop {
            let waiting: i64 =
                sqlx::query("SELECT COUNT(*) AS n FROM deliveries WHERE status = 'received'")
                    .fetch_one(self.store.pool())
                    .await
                    .unwrap()
                    .get("n");
            if waiting == 0 {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "deliveries not handled within {} s",
                SETTLE_WAIT.as_secs()
            );
            let _ = tokio::time::timeout(Duration::from_millis(200), self.settled.recv()).await;
        }
    }

    /// Waits until a job of `kind` is postponed (sent back to the queue,
    /// its attempt not counted).
    pub async fn next_postponed(&mut self, kind: &str) {
        let deadline = std::time::Instant::now() + SETTLE_WAIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match tokio::time::timeout(left, self.settled.recv()).await {
                Ok(Ok(job)) if job.kind == kind && job.outcome == Settled::Postponed => return,
                Ok(Ok(_)) | Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
                Ok(Err(e)) => panic!("settled channel: {e}"),
                Err(_) => panic!("no {kind} job postponed within {} s", SETTLE_WAIT.as_secs()),
            }
        }
    }

    /// Waits until a job fails (to be tried again or not) and returns its
    /// last error.
    pub async fn next_failed_job(&mut self) -> String {
        let deadline = std::time::Instant::now() + SETTLE_WAIT;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let job = match tokio::time::timeout(left, self.settled.recv()).await {
                Ok(Ok(job)) => job,
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => continue,
                Ok(Err(e)) => panic!("settled channel: {e}"),
                Err(_) => panic!("no job failed within {} s", SETTLE_WAIT.as_secs()),
            };
            if matches!(
                job.outcome,
                Settled::Retry | Settled::Deferred | Settled::Dead
            ) {
                return sqlx::query("SELECT last_error FROM jobs WHERE id = $1")
                    .bind(job.id)
                    .fetch_one(self.store.pool())
                    .await
                    .unwrap()
                    .get::<Option<String>, _>("last_error")
                    .unwrap_or_default();
            }
        }
    }

    /// The outcome of the latest delivery, once a worker recorded one
    /// (while a run's job may still be working).
    pub async fn last_delivery_outcome(&mut self) -> String {
        let deadline = std::time::Instant::now() + SETTLE_WAIT;
        loop {
            let outcome: Option<String> =
                sqlx::query("SELECT outcome FROM deliveries ORDER BY id DESC LIMIT 1")
                    .fetch_one(self.store.pool())
                    .await
                    .unwrap()
                    .get("outcome");
            if let Some(outcome) = outcome {
                return outcome;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the latest delivery got no outcome within {} s",
                SETTLE_WAIT.as_secs()
            );
            let _ = tokio::time::timeout(Duration::from_millis(200), self.settled.recv()).await;
        }
    }

    /// What the deliveries and jobs recorded, and the processes still
    /// working in the story's directory, for failure messages.
    pub async fn journal(&self) -> String {
        let mut out = String::new();
        for row in sqlx::query("SELECT event, outcome FROM deliveries ORDER BY id")
            .fetch_all(self.store.pool())
            .await
            .unwrap()
        {
            let event: String = row.get("event");
            let outcome: Option<String> = row.get("outcome");
            out.push_str(&format!("delivery {event}: {outcome:?}\n"));
        }
        for row in sqlx::query("SELECT id, kind, payload, state, last_error FROM jobs ORDER BY id")
            .fetch_all(self.store.pool())
            .await
            .unwrap()
        {
            let (id, kind, payload, state, error): (i64, String, String, String, Option<String>) = (
                row.get("id"),
                row.get("kind"),
                row.get("payload"),
                row.get("state"),
                row.get("last_error"),
            );
            out.push_str(&format!("job {id} {kind} {payload} {state} {error:?}\n"));
        }
        for process in super::process::processes_in(self.dir.path()) {
            out.push_str(&format!("{process}\n"));
        }
        out
    }

    /// The installation's API client, acting as the App (e.g. to change
    /// GitHub behind closer's back, without a webhook).
    pub async fn api(&self) -> Arc<closer::github::InstallationClient> {
        let app = GitHubApp::new(
            GitHubSettings {
                api_url: self.github.url(),
                app_id: Some(self.github.app_id()),
                private_key: Some(self.github.private_key_pem()),
                ..GitHubSettings::default()
            },
            closer::clock::system(),
            None,
        )
        .expect("GitHub App");
        app.installation(closer::github::types::InstallationId(INSTALLATION))
            .await
            .expect("installation client")
    }

    /// The issue's run.
    pub async fn run(&self, number: IssueNumber) -> Option<Run> {
        runs::by_issue(self.store.pool(), &self.repo, number)
            .await
            .unwrap()
    }

    /// The replies stored for the issue's run, oldest first.
    pub async fn replies(&self, number: IssueNumber) -> Vec<MessageRow> {
        let run = self.run(number).await.expect("a run");
        closer::store::messages::of_run(self.store.pool(), &run.id)
            .await
            .unwrap()
    }

    /// The maintainer answers the run's question ("Yes, negatives too.")
    /// and the story runs until nothing is left to do.
    pub async fn answer(&mut self, number: IssueNumber) {
        self.comment_as(number, FakeUser::user(MAINTAINER), "Yes, negatives too.")
            .await;
        self.idle().await;
    }

    /// The issue's run is in `state` after `iteration` iterations; the
    /// journal is shown when it is not.
    pub async fn expect_run(&self, number: IssueNumber, state: RunState, iteration: u32) {
        let run = self.run(number).await.expect("the issue's run");
        assert_eq!(
            (run.state, run.iteration),
            (state, iteration),
            "{}",
            self.journal().await
        );
    }

    pub async fn run_count(&self) -> i64 {
        sqlx::query("SELECT COUNT(*) AS n FROM runs")
            .fetch_one(self.store.pool())
            .await
            .unwrap()
            .get("n")
    }

    pub fn comments(&self, number: IssueNumber) -> Vec<FakeComment> {
        self.github.comments(&self.repo, number)
    }

    /// The comments the App wrote.
    pub fn bot_comments(&self, number: IssueNumber) -> Vec<FakeComment> {
        self.comments(number)
            .into_iter()
            .filter(|c| c.author.is_bot)
            .collect()
    }

    /// The text of the first comment of closer's that is not its status
    /// comment: a failed run's diagnosis (asserts there is one).
    pub fn diagnosis(&self, number: IssueNumber) -> String {
        self.bot_comments(number)
            .into_iter()
            .find(|c| !c.body.starts_with("<!-- closer:run="))
            .expect("a diagnosis comment")
            .body
    }

    /// The one status comment (asserts there is exactly one).
    pub fn status_comment(&self, number: IssueNumber) -> FakeComment {
        let status: Vec<FakeComment> = self
            .bot_comments(number)
            .into_iter()
            .filter(|c| c.body.starts_with("<!-- closer:run="))
            .collect();
        assert_eq!(status.len(), 1, "exactly one status comment: {status:#?}");
        status.into_iter().next().unwrap()
    }

    /// The promise closer never breaks, checked whenever a story is idle:
    /// an issue closed as completed under a status comment of closer's
    /// shows that comment in its final state (done, no failed required
    /// check, nothing left verifying) and exactly one phase label,
    /// `phase:complete` (the false-close figure of docs/judgment.md).
    pub fn assert_one_truth(&self) {
        if !self.github.has_repo(&self.repo) {
            return; // deleted, with its issues
        }
        for issue in self.github.issues(&self.repo) {
            if issue.state != "closed" || issue.state_reason.as_deref() != Some("completed") {
                continue;
            }
            let number = IssueNumber(issue.number);
            let Some(status) = self
                .bot_comments(number)
                .into_iter()
                .find(|c| c.body.starts_with("<!-- closer:run="))
            else {
                continue;
            };
            let body = &status.body;
            // A maintainer's merge at a commit closer did not verify closes
            // the issue; the status says so instead of claiming it.
            if body.contains("a commit closer did not verify") {
                continue;
            }
            assert!(
                body.contains("closer: done"),
                "FALSE CLOSE: issue #{} closed under a status that is not done:\n{body}",
                issue.number
            );
            assert!(
                !body.contains("| ❌ failed | required |"),
                "FALSE CLOSE: issue #{} closed with a failed required check:\n{body}",
                issue.number
            );
            // GitHub names labels without regard to case.
            let phases: Vec<String> = issue
                .labels
                .iter()
                .map(|l| l.to_lowercase())
                .filter(|l| l.starts_with("phase:"))
                .collect();
            assert_eq!(
                phases,
                ["phase:complete"],
                "issue #{} closed with phase labels {phases:?}",
                issue.number
            );
        }
    }

    pub fn labels(&self, number: IssueNumber) -> Vec<String> {
        self.github.labels(&self.repo, number)
    }

    /// The `phase:*` labels added, in order, from the requests GitHub saw.
    pub fn phases_added(&self, number: IssueNumber) -> Vec<String> {
        let path = format!("/repos/{REPO}/issues/{}/labels", number.0);
        self.github
            .requests_to("POST", &path)
            .iter()
            .filter_map(|r| serde_json::from_str::<Value>(&r.body).ok())
            .flat_map(|b| {
                b["labels"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|l| l.as_str().map(str::to_owned))
                    .collect::<Vec<_>>()
            })
            .filter(|l| l.starts_with("phase:"))
            .collect()
    }

    pub async fn stop(self) {
        let _ = self.worker_stop.send(true);
        let _ = self.shutdown.send(true);
    }
}

pub fn user_json(user: &FakeUser) -> Value {
    json!({"login": user.login, "id": user.id(), "type": if user.is_bot { "Bot" } else { "User" }})
}
