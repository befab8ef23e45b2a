//! OpenCode itself (the pinned npm release) working issues through closer,
//! against a scripted OpenAI Chat Completions server configured as the
//! operator's `~/.config/opencode/opencode.json` (copied into the run's
//! HOME): the documented configuration fixes a bug end to end, a second
//! iteration continues the session, a refused key fails the run at once,
//! and live progress edits appear while the agent works, within the
//! throttle.

use std::collections::BTreeMap;
use std::time::Duration;

use closer::config::agents::{AdapterKind, AgentConfig};
use closer::model::RunState;
use serde_json::{Value, json};

use crate::support::agent_tools::{
    Cli, CliStory, FIXED_CALC_PY, PY_CONFIG, agent, pushed_commit, refused_key, tool, twice,
    two_iterations, work_the_bug,
};
use crate::support::fake_llm::Reply;
use crate::support::fake_models::{CACHE_READ, FakeModel, INPUT, OUTPUT, Turn, Wire};

/// OpenCode pointed at `model` through a provider in its config file.
const OPENCODE: Cli = Cli {
    wire: Wire::Chat,
    agent: opencode,
};

fn opencode(model: &FakeModel, dir: &std::path::Path) -> Option<AgentConfig> {
    let config = dir.join("opencode.json");
    let provider = json!({
        "provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Fake",
            "options": {"baseURL": model.base_url(), "apiKey": "{env:FAKE_OPENAI_KEY}"},
            "models": {"test-model": {"name": "Test model"}}
        }},
        "model": "fake/test-model"
    });
    std::fs::write(&config, provider.to_string()).unwrap();
    let files = BTreeMap::from([(".config/opencode/opencode.json".to_owned(), config)]);
    // The tool installs its plugin package from npm in the background;
    // tests talk to 127.0.0.1 only, so that fetch fails fast here.
    let env = [
        ("FAKE_OPENAI_KEY", "sk-test".to_owned()),
        ("npm_config_registry", "http://127.0.0.1:9/".to_owned()),
        ("npm_config_fetch_retries", "0".to_owned()),
    ];
    Some(agent(AdapterKind::Opencode, tool("opencode")?, &env, files))
}

fn write_fix() -> Turn {
    Turn::tool(
        "write",
        json!({"filePath": "calc.py", "content": FIXED_CALC_PY}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn opencode_fixes_the_bug_and_closer_commits_verifies_and_closes() {
    twice(
        "opencode_fixes_the_bug_and_closer_commits_verifies_and_closes",
        || async {
            let turns = vec![
                write_fix(),
                Turn::tool(
                    "bash",
                    json!({"command": "python3 -m unittest -q", "description": "Run the tests"}),
                ),
                Turn::text("Fixed add()."),
            ];
            let Some(cs) = CliStory::new(OPENCODE, turns).await else {
                return;
            };
            let mut s = cs.story("opencode-fix", PY_CONFIG).await;
            let (_, run) = work_the_bug(&mut s, [Reply::closer(true, 0.95, &[])]).await;

            assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
            assert_eq!(pushed_commit(&s), "closer|Fixed add().");
            // Cache reads count: three model calls of the main loop.
            let per_call = INPUT + CACHE_READ + OUTPUT;
            assert!(run.tokens_used >= 3 * per_call, "{}", run.tokens_used);
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_iteration_continues_the_opencode_session() {
    twice(
        "a_second_iteration_continues_the_opencode_session",
        || async {
            let Some((cs, _)) = two_iterations(OPENCODE, "opencode-resume", write_fix()).await
            else {
                return;
            };
            let last = cs.model.main_requests().pop().expect("asked");
            let messages = serde_json::to_string(&last["messages"]).unwrap();
            assert!(
                messages.contains("add subtracts"),
                "the second iteration started a new session"
            );
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_key_fails_the_opencode_run_at_once_and_says_so() {
    twice("a_refused_key_fails_the_opencode_run_at_once_and_says_so", || async {
        let Some((status, _)) = refused_key(OPENCODE, "opencode-401").await else {
            return;
        };
        assert!(
            status.contains(
                "the agent could not authenticate with its model provider: Incorrect API key provided"
            ),
            "{status}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn live_progress_shows_what_a_slow_agent_is_doing_within_the_throttle() {
    twice("live_progress_shows_what_a_slow_agent_is_doing_within_the_throttle", || async {
        let turns = vec![
            write_fix(),
            Turn::tool("bash", json!({"command": "sleep 6 && python3 -m unittest -q", "description": "Slow tests"})),
            Turn::text("Fixed add()."),
        ];
        let Some(cs) = CliStory::new(OPENCODE, turns).await else {
            return;
        };
        let mut s = cs.story("opencode-progress", PY_CONFIG).await;
        let every = Duration::from_secs(2);
        s.kill_workers();
        s.progress_every = Some(every);
        s.spawn_workers();
        let (n, run) = work_the_bug(&mut s, [Reply::closer(true, 0.95, &[])]).await;

        assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
        let status = s.status_comment(n);
        let path = format!("/repos/octo/calc/issues/comments/{}", status.id);
        let edits = s.github.requests_to("PATCH", &path);
        let progress: Vec<(std::time::Instant, String)> = edits
            .iter()
            .filter_map(|r| {
                let body: Value = serde_json::from_str(&r.body).ok()?;
                let text = body["body"].as_str()?.to_owned();
                text.contains("**Now:**").then_some((r.at, text))
            })
            .collect();
        assert!(
            progress.len() >= 2,
            "{} live progress edits",
            progress.len()
        );
        // OpenCode reports a tool call once it has completed: while the slow
        // command runs, the line shows the edit before it.
        assert!(
            progress
                .iter()
                .any(|(_, b)| b.contains("**Now:** editing calc.py")),
            "{:#?}",
            progress.iter().map(|(_, b)| b).collect::<Vec<_>>()
        );
        for pair in progress.windows(2) {
            let gap = pair[1].0.duration_since(pair[0].0);
            assert!(
                gap >= every - Duration::from_millis(200),
                "edits {gap:?} apart"
            );
        }
        eprintln!(
            "status edits with live progress: {} (all edits: {})",
            progress.len(),
            edits.len()
        );
    })
    .await;
}

/// The OpenCode CLI driven directly (no closer), the way the adapter runs
/// it: `opencode run --format json [--session <id>]`, the prompt on stdin,
/// JSON Lines on stdout, HOME/TMPDIR/XDG dirs of its own, the provider in
/// `~/.config/opencode/opencode.json`. Pins the wire facts the adapter
/// relies on (see /work/research/opencode.md).
mod cli {
    use crate::support::SpawnApart;
    use std::path::Path;
    use std::process::Output;
    use std::time::Duration;

    use serde_json::{Value, json};
    use tempfile::TempDir;

    use crate::support::agent_tools::tool;
    use crate::support::fake_models::chat::{shell, write_file};
    use crate::support::fake_models::{CACHE_READ, FakeModel, INPUT, OUTPUT, Turn, Wire};
    use crate::support::git::git;

    const CALC: &str = "def add(a, b):\n    return a + b\n";

    /// What the adapter passes in `OPENCODE_CONFIG_CONTENT` today.
    /// The permissions without `read`: reading `*.env` / `*.env.*` asks by
    /// default, and with nobody to answer that ends the run.
    const WITHOUT_READ: &str = r#"{"permission":{"edit":"allow","bash":"allow","webfetch":"allow","external_directory":"allow","doom_loop":"allow"},"autoupdate":false,"share":"disabled"}"#;
    /// What the adapter passes.
    const UNATTENDED: &str = closer::agent::adapters::opencode::PERMISSIONS;

    /// Set to 1: no models.dev catalogue fetch, no self-update, no share,
    /// no LSP downloads, no default plugins, no repository config, no
    /// Claude Code files or external skills.
    const QUIET: &[&str] = &[
        "OPENCODE_DISABLE_MODELS_FETCH",
        "OPENCODE_DISABLE_AUTOUPDATE",
        "OPENCODE_DISABLE_SHARE",
        "OPENCODE_DISABLE_LSP_DOWNLOAD",
        "OPENCODE_DISABLE_DEFAULT_PLUGINS",
        "OPENCODE_DISABLE_PROJECT_CONFIG",
        "OPENCODE_DISABLE_CLAUDE_CODE",
        "OPENCODE_DISABLE_EXTERNAL_SKILLS",
    ];

    /// A git repository and a HOME of its own, OpenCode configured in it.
    struct Workspace {
        home: TempDir,
        repo: TempDir,
    }

    impl Workspace {
        /// `base_url` as provider `fake`, model `fake/test-model`.
        fn new(base_url: &str) -> Workspace {
            let home = tempfile::tempdir().unwrap();
            let config = home.path().join(".config/opencode");
            std::fs::create_dir_all(&config).unwrap();
            std::fs::create_dir_all(home.path().join("tmp")).unwrap();
            let provider = json!({
                "$schema": "https://opencode.ai/config.json",
                "provider": {"fake": {
                    "npm": "@ai-sdk/openai-compatible",
                    "name": "Fake",
                    "options": {"baseURL": base_url, "apiKey": "{env:FAKE_OPENAI_KEY}"},
                    "models": {"test-model": {"name": "Test model"}}
                }},
                "model": "fake/test-model"
            });
            std::fs::write(config.join("opencode.json"), provider.to_string()).unwrap();
            // Every run installs `@opencode-ai/plugin` into the config dir
            // from the npm registry in the background unless the dir
            // already has `node_modules` and a lock naming the package
            // (no OPENCODE_* variable turns that off).
            std::fs::create_dir_all(config.join("node_modules")).unwrap();
            std::fs::write(
                config.join("package-lock.json"),
                r#"{"packages":{"":{"dependencies":{"@opencode-ai/plugin":"*"}}}}"#,
            )
            .unwrap();
            let repo = tempfile::tempdir().unwrap();
            git(repo.path(), &["init", "-q", "-b", "main"]);
            std::fs::write(repo.path().join("README.md"), "calc\n").unwrap();
            git(repo.path(), &["add", "-A"]);
            git(repo.path(), &["commit", "-qm", "initial"]);
            Workspace { home, repo }
        }

        fn repo(&self) -> &Path {
            self.repo.path()
        }

        /// `opencode run --format json <args>` with `prompt` on stdin, in a
        /// clean environment; `permissions` in `OPENCODE_CONFIG_CONTENT`.
        async fn run(
            &self,
            program: &Path,
            args: &[&str],
            permissions: Option<&str>,
            prompt: &str,
        ) -> Output {
            let home = self.home.path();
            let mut command = tokio::process::Command::new(program);
            command
                .args(["run", "--format", "json"])
                .args(args)
                .current_dir(self.repo())
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("HOME", home)
                .env("TMPDIR", home.join("tmp"))
                .env("XDG_CONFIG_HOME", home.join(".config"))
                .env("XDG_DATA_HOME", home.join(".local/share"))
                .env("XDG_STATE_HOME", home.join(".local/state"))
                .env("XDG_CACHE_HOME", home.join(".cache"))
                .env("FAKE_OPENAI_KEY", "sk-test")
                .envs(QUIET.iter().map(|name| (*name, "1")))
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .kill_on_drop(true);
            if let Some(permissions) = permissions {
                command.env("OPENCODE_CONFIG_CONTENT", permissions);
            }
            let mut child = command.spawn_apart().expect("opencode starts");
            let mut stdin = child.stdin.take().unwrap();
            tokio::io::AsyncWriteExt::write_all(&mut stdin, prompt.as_bytes())
                .await
                .unwrap();
            drop(stdin);
            tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
                .await
                .expect("opencode finishes within a minute")
                .unwrap()
        }
    }

    fn events(output: &Output) -> Vec<Value> {
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("every stdout line is JSON"))
            .collect()
    }

    fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
        events.iter().filter(|e| e["type"] == kind).collect()
    }

    /// The `part` of each `tool_use` event.
    fn tool_parts(events: &[Value]) -> Vec<&Value> {
        of_type(events, "tool_use")
            .into_iter()
            .map(|e| &e["part"])
            .collect()
    }

    fn texts(events: &[Value]) -> Vec<&str> {
        of_type(events, "text")
            .iter()
            .filter_map(|e| e["part"]["text"].as_str())
            .collect()
    }

    fn session_id(events: &[Value]) -> String {
        let id = events[0]["sessionID"].as_str().expect("a session id");
        assert!(
            events.iter().all(|e| e["sessionID"] == id),
            "one session per run"
        );
        id.to_owned()
    }

    fn explain(output: &Output) -> String {
        format!(
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    }

    /// The title request: streamed, no tools, a fixed system prompt.
    fn is_title(request: &Value) -> bool {
        request["messages"][0]["content"]
            .as_str()
            .is_some_and(|s| s.starts_with("You are a title generator"))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn opencode_writes_calc_py_runs_python_and_reports_cached_usage() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        let Some(opencode) = tool("opencode") else {
            return;
        };
        let model = FakeModel::start(
            Wire::Chat,
            vec![
                write_file("calc.py", CALC),
                shell("python3 -c 'import calc; print(calc.add(2, 3))'"),
                Turn::text("calc.add(2, 3) is 5."),
            ],
        )
        .await;
        let w = Workspace::new(&model.base_url());
        let out = w
            .run(
                &opencode,
                &[],
                Some(UNATTENDED),
                "Write calc.py and try it.\n",
            )
            .await;

        assert!(out.status.success(), "{}", explain(&out));
        assert_eq!(
            std::fs::read_to_string(w.repo().join("calc.py")).unwrap(),
            CALC
        );
        let events = events(&out);
        let kinds: Vec<&str> = events.iter().filter_map(|e| e["type"].as_str()).collect();
        assert_eq!(
            kinds,
            [
                "step_start",
                "tool_use",
                "step_finish",
                "step_start",
                "tool_use",
                "step_finish",
                "step_start",
                "text",
                "step_finish"
            ],
            "{}",
            explain(&out)
        );
        session_id(&events);
        let tools = tool_parts(&events);
        assert_eq!(tools[0]["tool"], "write");
        assert_eq!(tools[0]["state"]["status"], "completed");
        assert_eq!(tools[0]["state"]["input"]["filePath"], "calc.py");
        assert_eq!(tools[0]["state"]["output"], "Wrote file successfully.");
        assert_eq!(tools[1]["tool"], "bash");
        assert_eq!(tools[1]["state"]["output"], "5\n");
        assert_eq!(tools[1]["state"]["metadata"]["exit"], 0);
        assert_eq!(texts(&events), ["calc.add(2, 3) is 5."]);
        // Each step's usage: cached tokens taken out of `input`.
        for finish in of_type(&events, "step_finish") {
            let part = &finish["part"];
            assert_eq!(
                part["tokens"],
                json!({"total": INPUT + CACHE_READ + OUTPUT, "input": INPUT, "output": OUTPUT,
                    "reasoning": 0, "cache": {"write": 0, "read": CACHE_READ}}),
                "{}",
                explain(&out)
            );
            assert_eq!(part["cost"], 0, "no price in the config, no catalogue");
        }
        let reasons: Vec<&Value> = of_type(&events, "step_finish")
            .iter()
            .map(|e| &e["part"]["reason"])
            .collect();
        assert_eq!(
            reasons,
            [&json!("tool-calls"), &json!("tool-calls"), &json!("stop")]
        );

        // What OpenCode asked: a title on the side, then three turns.
        let requests = model.requests();
        assert_eq!(requests.len(), 4, "{requests:#?}");
        assert_eq!(requests.iter().filter(|r| is_title(r)).count(), 1);
        let main = model.main_requests();
        assert_eq!(main.len(), 3);
        for request in &main {
            assert_eq!(request["stream"], true);
            assert_eq!(request["stream_options"]["include_usage"], true);
            assert_eq!(request["model"], "test-model");
        }
        let offered: Vec<&str> = main[0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["function"]["name"].as_str())
            .collect();
        for name in ["bash", "edit", "write", "read", "glob", "grep"] {
            assert!(offered.contains(&name), "{offered:?}");
        }
        let messages = main[2]["messages"].as_array().unwrap();
        assert_eq!(messages[1]["content"], "Write calc.py and try it.\n");
        let results: Vec<&Value> = messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| &m["content"])
            .collect();
        assert_eq!(results, [&json!("Wrote file successfully."), &json!("5\n")]);
        // Nothing fetched from npm into the config dir.
        let config = w.home.path().join(".config/opencode");
        assert!(!config.join("package.json").exists());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_key_ends_the_run_at_once_with_exit_1_and_one_api_error() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        let Some(opencode) = tool("opencode") else {
            return;
        };
        let model = FakeModel::start(Wire::Chat, vec![]).await;
        model.then_always(Turn::unauthorized());
        let w = Workspace::new(&model.base_url());
        let out = w.run(&opencode, &[], Some(UNATTENDED), "Anything.").await;

        assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
        assert!(out.stderr.is_empty(), "{}", explain(&out));
        let events = events(&out);
        assert_eq!(events.len(), 1, "{}", explain(&out));
        let error = &events[0];
        assert_eq!(error["type"], "error");
        assert!(error["sessionID"].as_str().unwrap().starts_with("ses_"));
        assert_eq!(error["error"]["name"], "APIError");
        let data = &error["error"]["data"];
        assert_eq!(data["message"], "Incorrect API key provided");
        assert_eq!(data["statusCode"], 401);
        assert_eq!(data["isRetryable"], false);
        assert!(
            data["responseBody"]
                .as_str()
                .unwrap()
                .contains("invalid_api_key")
        );
        assert!(
            data["metadata"]["url"]
                .as_str()
                .unwrap()
                .ends_with("/v1/chat/completions")
        );
        // Not retried: the main request once (and the title on the side).
        assert_eq!(model.main_requests().len(), 1);
    }

    /// The provider answers 503: OpenCode retries five times (as fast as
    /// the answer's `retry-after-ms` allows), then ends with one
    /// `APIError` event, retryable, with the status: the adapter reads it
    /// as the provider down.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_503_after_its_retries_ends_the_run_with_a_retryable_api_error() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        let Some(opencode) = tool("opencode") else {
            return;
        };
        let model = FakeModel::start(Wire::Chat, vec![]).await;
        model.then_always(Turn::Status(503, "Service Unavailable".into()));
        let w = Workspace::new(&model.base_url());
        let out = w.run(&opencode, &[], Some(UNATTENDED), "Anything.").await;

        assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
        let events = events(&out);
        let error = of_type(&events, "error");
        assert_eq!(error.len(), 1, "{}", explain(&out));
        let data = &error[0]["error"]["data"];
        assert_eq!(error[0]["error"]["name"], "APIError");
        assert_eq!(data["statusCode"], 503);
        assert_eq!(data["isRetryable"], true);
        assert_eq!(model.main_requests().len(), 6, "one call and five retries");
        crate::support::agent_tools::assert_read_as_provider_down(
            &closer::agent::adapters::opencode::Opencode,
            &out.stdout,
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn run_session_continues_the_session_with_its_history() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        let Some(opencode) = tool("opencode") else {
            return;
        };
        let model = FakeModel::start(
            Wire::Chat,
            vec![
                Turn::text("Noted: kumquat."),
                Turn::text("The word was kumquat."),
            ],
        )
        .await;
        let w = Workspace::new(&model.base_url());
        let first = w
            .run(
                &opencode,
                &[],
                Some(UNATTENDED),
                "Remember the word kumquat.",
            )
            .await;
        assert!(first.status.success(), "{}", explain(&first));
        let session = session_id(&events(&first));
        assert!(session.starts_with("ses_"), "{session}");

        let second = w
            .run(
                &opencode,
                &["--session", &session],
                Some(UNATTENDED),
                "Which word?",
            )
            .await;
        assert!(second.status.success(), "{}", explain(&second));
        let events = events(&second);
        assert_eq!(session_id(&events), session, "the same session");
        assert_eq!(texts(&events), ["The word was kumquat."]);
        let requests = model.requests();
        assert_eq!(
            requests.iter().filter(|r| is_title(r)).count(),
            1,
            "no new title for a continued session"
        );
        let last = model.main_requests().pop().unwrap();
        let history: Vec<(String, String)> = last["messages"]
            .as_array()
            .unwrap()
            .iter()
            .skip(1)
            .map(|m| {
                (
                    m["role"].as_str().unwrap().to_owned(),
                    m["content"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect();
        let pair = |r: &str, c: &str| (r.to_owned(), c.to_owned());
        assert_eq!(
            history,
            [
                pair("user", "Remember the word kumquat."),
                pair("assistant", "Noted: kumquat."),
                pair("user", "Which word?"),
            ]
        );

        // An unknown session: exit 1 before any request, nothing on stdout.
        let before = model.requests().len();
        let lost = w
            .run(
                &opencode,
                &["--session", "ses_0000000000000000000000000"],
                Some(UNATTENDED),
                "Again.",
            )
            .await;
        assert_eq!(lost.status.code(), Some(1), "{}", explain(&lost));
        assert!(lost.stdout.is_empty());
        assert!(
            String::from_utf8_lossy(&lost.stderr).contains("Session not found"),
            "{}",
            explain(&lost)
        );
        assert_eq!(model.requests().len(), before);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_permission_that_asks_is_rejected_and_the_run_ends_with_exit_0_and_no_answer() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        let Some(opencode) = tool("opencode") else {
            return;
        };
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("x.txt");
        let model = FakeModel::start(
            Wire::Chat,
            vec![
                write_file(target.to_str().unwrap(), "outside\n"),
                Turn::text("Done."),
            ],
        )
        .await;
        let w = Workspace::new(&model.base_url());
        // No permission config: writing outside the repository asks
        // (`external_directory`), and `run` answers every ask with reject.
        let out = w.run(&opencode, &[], None, "Write outside.").await;

        assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
        assert!(!target.exists());
        let events = events(&out);
        let tools = tool_parts(&events);
        assert_eq!(tools.len(), 1, "{}", explain(&out));
        assert_eq!(tools[0]["tool"], "write");
        assert_eq!(tools[0]["state"]["status"], "error");
        assert_eq!(
            tools[0]["state"]["error"],
            "The user rejected permission to use this specific tool call."
        );
        assert!(texts(&events).is_empty(), "no final answer");
        assert!(of_type(&events, "error").is_empty());
        let stderr = String::from_utf8_lossy(&out.stderr);
        let dir = outside.path().display();
        assert!(
            stderr.contains(&format!(
                "permission requested: external_directory ({dir}/*); auto-rejecting"
            )),
            "{stderr}"
        );
        assert_eq!(
            model.main_requests().len(),
            1,
            "the model is not told about the rejection"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reading_a_dotenv_file_is_rejected_unless_read_is_allowed_as_the_adapter_does() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        let Some(opencode) = tool("opencode") else {
            return;
        };
        let read = || Turn::tool("read", json!({"filePath": ".env"}));
        let model = FakeModel::start(Wire::Chat, vec![read()]).await;
        let w = Workspace::new(&model.base_url());
        std::fs::write(w.repo().join(".env"), "DEBUG=1\n").unwrap();

        let out = w
            .run(&opencode, &[], Some(WITHOUT_READ), "Read .env.")
            .await;
        assert_eq!(out.status.code(), Some(0), "{}", explain(&out));
        let rejected = events(&out);
        let tools = tool_parts(&rejected);
        assert_eq!(
            tools[0]["state"]["error"],
            "The user rejected permission to use this specific tool call.",
            "{}",
            explain(&out)
        );
        assert!(texts(&rejected).is_empty());
        assert!(String::from_utf8_lossy(&out.stderr).contains("read (.env); auto-rejecting"));

        model.push([read(), Turn::text("Read it.")]);
        let out = w.run(&opencode, &[], Some(UNATTENDED), "Read .env.").await;
        assert!(out.status.success(), "{}", explain(&out));
        let events = events(&out);
        let tools = tool_parts(&events);
        assert_eq!(
            tools[0]["state"]["status"],
            "completed",
            "{}",
            explain(&out)
        );
        assert!(
            tools[0]["state"]["output"]
                .as_str()
                .unwrap()
                .contains("DEBUG=1")
        );
        assert_eq!(texts(&events), ["Read it."]);
    }
}
