//! Claude Code itself (the pinned npm release) working issues through
//! closer, against a scripted Anthropic Messages server: the documented
//! configuration fixes a bug end to end, a second iteration resumes the
//! session, a refused key fails the run at once by name, a denied
//! permission is named, a daemon the agent leaves behind with `setsid`
//! dies at the deadline, and the model API down (503) pauses the run
//! without counting an iteration until it answers again.

use closer::config::agents::{AdapterKind, AgentConfig};
use closer::model::RunState;
use serde_json::json;

use crate::support::agent_tools::{
    Cli, CliStory, FIXED_CALC_PY, ONE_ITERATION, PY_CONFIG, agent, open_bug, pushed_commit,
    python_story_on_clock, refused_key, run_homes, tool, twice, two_iterations, work_the_bug,
};
use crate::support::fake_llm::Reply;
use crate::support::fake_models::{CACHE_READ, CACHE_WRITE, FakeModel, INPUT, OUTPUT, Turn, Wire};

/// Claude Code pointed at `model`, as docs/agents.md tells an operator.
const CLAUDE: Cli = Cli {
    wire: Wire::Anthropic,
    agent: claude,
};

fn claude(model: &FakeModel, _dir: &std::path::Path) -> Option<AgentConfig> {
    let env = [
        ("ANTHROPIC_BASE_URL", model.base_url()),
        ("ANTHROPIC_API_KEY", "sk-ant-test".to_owned()),
    ];
    Some(agent(
        AdapterKind::ClaudeCode,
        tool("claude")?,
        &env,
        Default::default(),
    ))
}

fn write_fix() -> Turn {
    Turn::tool(
        "Write",
        json!({"file_path": "calc.py", "content": FIXED_CALC_PY}),
    )
}

fn run_tests() -> Turn {
    Turn::tool(
        "Bash",
        json!({"command": "python3 -m unittest -q", "description": "Run the tests"}),
    )
}

/// `1234567` as the status comment shows it: `1,234,567`.
fn with_commas(n: u64) -> String {
    n.to_string()
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join(",")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn claude_code_fixes_the_bug_and_closer_commits_verifies_and_closes() {
    twice(
        "claude_code_fixes_the_bug_and_closer_commits_verifies_and_closes",
        || async {
            let turns = vec![
                write_fix(),
                run_tests(),
                Turn::text("Fixed add(): it subtracted."),
            ];
            let Some(cs) = CliStory::new(CLAUDE, turns).await else {
                return;
            };
            let mut s = cs.story("claude-fix", PY_CONFIG).await;
            let (n, run) = work_the_bug(&mut s, [Reply::closer(true, 0.95, &[])]).await;

            assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
            assert_eq!(s.github.issue(&s.repo, n).state, "closed");
            assert_eq!(pushed_commit(&s), "closer|Fixed add(): it subtracted.");
            // Every kind of token the tool reported counts: three model calls.
            let per_call = INPUT + CACHE_WRITE + CACHE_READ + OUTPUT;
            assert!(run.tokens_used >= 3 * per_call, "{}", run.tokens_used);
            assert!(
                run.tokens_used < 3 * per_call + 2_000,
                "{}",
                run.tokens_used
            );
            let status = s.status_comment(n).body;
            assert!(status.contains("closer: done"), "{status}");
            let shown = with_commas(run.tokens_used);
            assert!(
                status.contains(&format!("Usage so far: {shown} tokens")),
                "{status}"
            );
            // The tool prices its calls itself; that cost counts too.
            assert!(run.cost_usd > 0.0, "{}", run.cost_usd);
            // The tool's state stayed in the run's own HOME.
            let homes = run_homes(&s);
            assert_eq!(homes.len(), 1);
            assert!(homes[0].join(".claude").is_dir());
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_iteration_resumes_the_claude_code_session() {
    twice(
        "a_second_iteration_resumes_the_claude_code_session",
        || async {
            let Some((cs, _)) = two_iterations(CLAUDE, "claude-resume", write_fix()).await else {
                return;
            };
            let main = cs.model.main_requests();
            let second = main.last().expect("the second iteration asked the model");
            let messages = second["messages"].as_array().expect("messages");
            let earlier = serde_json::to_string(&messages[0]).unwrap();
            assert!(
                messages.len() > 1 && earlier.contains("add subtracts"),
                "the second iteration did not continue the first one's conversation: {} messages",
                messages.len()
            );
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refused_key_fails_the_run_at_once_and_says_so() {
    twice("a_refused_key_fails_the_run_at_once_and_says_so", || async {
        let Some((status, took)) = refused_key(CLAUDE, "claude-401").await else {
            return;
        };
        // The tool retries a refused key for minutes; closer stops it at once.
        assert!(took.as_secs() < 60, "{took:?}");
        assert!(
            status.contains(
                "the agent could not authenticate with its model provider: the model API answered 401"
            ),
            "{status}"
        );
    })
    .await;
}

/// The model API answers 503 (the tool told not to retry, as an operator
/// would not: its ten retries take three minutes): each attempt ends with
/// the tool's `api_error` result, the iteration is taken back and the step
/// deferred; the run shows it waits. When the API answers again the same
/// iteration runs once more and the run completes with one iteration.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_model_api_down_pauses_the_run_and_it_resumes_with_one_iteration() {
    twice(
        "the_model_api_down_pauses_the_run_and_it_resumes_with_one_iteration",
        || async {
            use closer::clock::Clock;
            let Some(mut cs) = CliStory::new(CLAUDE, vec![]).await else {
                return;
            };
            let model = &cs.model;
            model.then_always(Turn::Status(503, "Service Unavailable".into()));
            cs.agent
                .env
                .insert("CLAUDE_CODE_MAX_RETRIES".into(), "0".into());
            let start = closer::clock::SystemClock.now_ms();
            let (clock, _) = crate::support::db::manual_clock(start);
            // One iteration allowed: a counted outage would fail the run.
            let mut s =
                python_story_on_clock("claude-503", cs.agent.clone(), ONE_ITERATION, clock.clone()).await;
            s.llm.push([Reply::closer(true, 0.95, &[])]);
            let n = open_bug(&mut s).await;

            // Down: a minute of the queue's time, attempt after attempt.
            s.pass_time(clock.now_ms()).await;
            let deferred = s.pass_time(start + 60_000).await;
            let run = s.run(n).await.expect("a run");
            assert_eq!(run.state, RunState::Running, "{}", s.journal().await);
            assert_eq!(run.iteration, 0, "no iteration counted while it is down");
            let tried = model.served();
            assert!(tried >= 3 && deferred >= 2, "{tried} requests, {deferred} deferrals");
            let status = s.status_comment(n).body;
            assert!(
                status.contains("**Next:** waiting for the agent's model provider, which is unreachable; the run resumes by itself")
                    && status.contains("**Agent:** the agent's model provider is unavailable")
                    && status.contains("API Error: 503 Service Unavailable"),
                "{status}"
            );

            // Back: the iteration runs again and the run completes.
            model.stop_repeating();
            model.push([write_fix(), Turn::text("Fixed add(): it subtracted.")]);
            s.pass_time(start + 3_600_000).await;
            let run = s.run(n).await.expect("a run");
            assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
            assert_eq!(run.iteration, 1, "one iteration for the work");
            let iterations = closer::store::runs::iterations(s.store.pool(), &run.id)
                .await
                .unwrap();
            assert_eq!(iterations.len(), 1);
            assert_eq!(pushed_commit(&s), "closer|Fixed add(): it subtracted.");
            assert_eq!(model.served(), tried + 2, "no call after the work was done");
        },
    )
    .await;
}

/// The agent's own command meets a refused connection and a 503 (the
/// service it tests is down); it then fixes the bug. The tool's result is
/// a success: nothing is taken for the provider being down.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_503_the_agents_command_meets_is_not_the_model_api_down() {
    twice(
        "a_503_the_agents_command_meets_is_not_the_model_api_down",
        || async {
            let down = "curl -sS http://127.0.0.1:9/ || echo 'HTTP/1.1 503 Service Unavailable: Connection refused' >&2; exit 7";
            let turns = vec![
                Turn::tool("Bash", json!({"command": down, "description": "probe"})),
                write_fix(),
                Turn::text("The service answers 503 Service Unavailable (connection refused); fixed add() anyway."),
            ];
            let Some(cs) = CliStory::new(CLAUDE, turns).await else {
                return;
            };
            let mut s = cs.story("claude-503-task", ONE_ITERATION).await;
            let (_, run) = work_the_bug(&mut s, [Reply::closer(true, 0.95, &[])]).await;

            assert_eq!(run.state, RunState::Done, "{}", s.journal().await);
            assert_eq!(run.iteration, 1);
            let iterations = closer::store::runs::iterations(s.store.pool(), &run.id)
                .await
                .unwrap();
            let agent = iterations[0].agent.as_deref().unwrap();
            assert!(agent.contains(r#""status":"ok""#), "{agent}");
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_permission_the_operator_denies_is_named_in_the_status() {
    twice(
        "a_permission_the_operator_denies_is_named_in_the_status",
        || async {
            let turns = vec![
                Turn::tool(
                    "Bash",
                    json!({"command": "curl -s http://127.0.0.1:9/", "description": "fetch"}),
                ),
                Turn::text("I could not fetch the page."),
            ];
            let Some(mut cs) = CliStory::new(CLAUDE, turns).await else {
                return;
            };
            let settings = cs.dir.path().join("claude-settings.json");
            std::fs::write(&settings, r#"{"permissions": {"deny": ["Bash(curl:*)"]}}"#).unwrap();
            cs.agent
                .config_files
                .insert(".claude/settings.json".to_owned(), settings);
            let mut s = cs.story("claude-denied", ONE_ITERATION).await;
            let (n, _) = work_the_bug(&mut s, [Reply::closer(false, 0.9, &["fix add"])]).await;

            let status = s.status_comment(n).body;
            assert!(
            status.contains(
                "**Agent:** the agent was denied permission to run `curl -s http://127.0.0.1:9/`"
            ),
            "{status}"
        );
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_daemon_the_agent_leaves_with_setsid_dies_at_the_deadline() {
    twice(
        "a_daemon_the_agent_leaves_with_setsid_dies_at_the_deadline",
        || async {
            // Found by its command line: in the sandbox's PID namespace its `$$`
            // means nothing out here.
            let marker = crate::support::process::unique_sleep();
            let daemon =
                format!("setsid sh -c 'exec sleep {marker}' > /dev/null 2>&1 & sleep 1; sleep 300");
            let turns = vec![Turn::tool(
                "Bash",
                json!({"command": daemon, "description": "serve", "timeout": 600000}),
            )];
            let Some(mut cs) = CliStory::new(CLAUDE, turns).await else {
                return;
            };
            cs.agent.timeout_secs = 10;
            let mut s = cs.story("claude-setsid", ONE_ITERATION).await;
            let (n, _) = work_the_bug(&mut s, [Reply::closer(false, 0.9, &["fix add"])]).await;

            let survivor = crate::support::process::process_with_argument(&marker)
                .filter(|pid| crate::support::process::alive(*pid));
            let alive = survivor.is_some();
            if let Some(pid) = survivor {
                // SAFETY: cleaning up the daemon this test caused.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            assert!(
                !alive,
                "the agent's setsid daemon outlived the iteration's deadline"
            );
            let status = s.status_comment(n).body;
            assert!(
                status.contains("the agent timed out after 10 s"),
                "{status}"
            );
        },
    )
    .await;
}

/// Claude Code driven directly (no closer), the way the adapter runs it:
/// the prompt on stdin, JSON on stdout, a HOME and TMPDIR of its own,
/// `ANTHROPIC_BASE_URL`/`ANTHROPIC_API_KEY` pointing at the scripted server.
/// Pins the facts the adapter relies on (see /work/research/claude.md).
mod cli {
    use crate::support::SpawnApart;
    use std::path::Path;
    use std::process::{Output, Stdio};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use axum::body::Bytes;
    use axum::extract::State;
    use axum::response::{IntoResponse, Response};
    use serde_json::{Value, json};
    use tempfile::TempDir;
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use crate::support::agent_tools::tool;
    use crate::support::fake_models::anthropic::{self, Usage, edit_file, shell, write_file};
    use crate::support::fake_models::{
        CACHE_READ, CACHE_WRITE, FakeModel, INPUT, OUTPUT, Turn, Wire,
    };
    use crate::support::git::git;

    const CALC: &str = "def add(a, b):\n    return a + b\n";
    const TRY_IT: &str = "python3 -c 'import calc; print(calc.add(2, 3))'";

    /// Print mode, one JSON object, no permission checks (the adapter's
    /// mode; it uses `stream-json --verbose` for live progress).
    const JSON: &[&str] = &[
        "-p",
        "--output-format",
        "json",
        "--permission-mode",
        "bypassPermissions",
    ];
    /// The same as JSON Lines events, the `result` object last.
    const STREAM: &[&str] = &[
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "bypassPermissions",
    ];
    /// Without it, root may not skip permissions.
    const SANDBOX: (&str, &str) = ("IS_SANDBOX", "1");

    /// A git repository and a HOME of its own.
    struct Workspace {
        home: TempDir,
        repo: TempDir,
        base_url: String,
    }

    impl Workspace {
        fn new(base_url: &str, files: &[(&str, &str)]) -> Workspace {
            let home = tempfile::tempdir().unwrap();
            std::fs::create_dir_all(home.path().join("tmp")).unwrap();
            let repo = tempfile::tempdir().unwrap();
            git(repo.path(), &["init", "-q", "-b", "main"]);
            std::fs::write(repo.path().join("README.md"), "calc\n").unwrap();
            for (path, content) in files {
                std::fs::write(repo.path().join(path), content).unwrap();
            }
            git(repo.path(), &["add", "-A"]);
            git(repo.path(), &["commit", "-qm", "initial"]);
            Workspace {
                home,
                repo,
                base_url: base_url.to_owned(),
            }
        }

        fn repo(&self) -> &Path {
            self.repo.path()
        }

        /// `claude <args>` in the repository, in a clean environment plus
        /// `env`, the prompt not yet written.
        fn spawn(
            &self,
            program: &Path,
            args: &[&str],
            env: &[(&str, &str)],
        ) -> tokio::process::Child {
            let home = self.home.path();
            tokio::process::Command::new(program)
                .args(args)
                .current_dir(self.repo())
                .env_clear()
                .env("PATH", std::env::var_os("PATH").unwrap_or_default())
                .env("HOME", home)
                .env("TMPDIR", home.join("tmp"))
                .env("ANTHROPIC_BASE_URL", &self.base_url)
                .env("ANTHROPIC_API_KEY", "sk-ant-test")
                .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
                .env("DISABLE_AUTOUPDATER", "1")
                .envs(env.iter().copied())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .kill_on_drop(true)
                .spawn_apart()
                .expect("claude starts")
        }

        /// Runs `claude <args>` with `prompt` on stdin to the end.
        async fn claude(
            &self,
            program: &Path,
            args: &[&str],
            env: &[(&str, &str)],
            prompt: &str,
        ) -> Output {
            let mut child = self.spawn(program, args, env);
            let mut stdin = child.stdin.take().unwrap();
            stdin.write_all(prompt.as_bytes()).await.unwrap();
            drop(stdin);
            tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
                .await
                .expect("claude finishes within a minute")
                .unwrap()
        }
    }

    fn explain(output: &Output) -> String {
        format!(
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            output.status.code(),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    }

    /// The single object `--output-format json` prints.
    fn result(output: &Output) -> Value {
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("not one JSON object ({e}): {}", explain(output)))
    }

    /// The JSON Lines `--output-format stream-json` prints.
    fn events(output: &Output) -> Vec<Value> {
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect()
    }

    /// The `tool_result` blocks a request sends back to the model.
    fn tool_results(request: &Value) -> Vec<Value> {
        request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter(|c| c["type"] == "tool_result")
            .cloned()
            .collect()
    }

    /// The four counts of an API-style `usage` object.
    fn counts(usage: &Value) -> [u64; 4] {
        [
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "output_tokens",
        ]
        .map(|k| {
            usage[k]
                .as_u64()
                .unwrap_or_else(|| panic!("{k} in {usage}"))
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claude_writes_a_file_runs_python_and_reports_cached_usage() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        let Some(claude) = tool("claude") else { return };
        let model = FakeModel::start(
            Wire::Anthropic,
            vec![
                write_file("calc.py", CALC),
                shell(TRY_IT),
                Turn::text("calc.add(2, 3) is 5."),
            ],
        )
        .await;
        let w = Workspace::new(&model.base_url(), &[]);
        let out = w
            .claude(&claude, JSON, &[SANDBOX], "Write calc.py and try it.")
            .await;

        assert!(out.status.success(), "{}", explain(&out));
        assert_eq!(
            std::fs::read_to_string(w.repo().join("calc.py")).unwrap(),
            CALC
        );
        let r = result(&out);
        assert_eq!(r["type"], "result");
        assert_eq!(r["subtype"], "success");
        assert_eq!(r["is_error"], false);
        assert_eq!(r["result"], "calc.add(2, 3) is 5.");
        assert_eq!(r["num_turns"], 3);
        assert_eq!(r["permission_denials"], json!([]));
        assert_eq!(r["session_id"].as_str().unwrap().len(), 36, "a UUID");
        // Three calls, every kind of token added up.
        assert_eq!(
            counts(&r["usage"]),
            [3 * INPUT, 3 * CACHE_WRITE, 3 * CACHE_READ, 3 * OUTPUT]
        );
        let per_model = r["modelUsage"].as_object().unwrap();
        assert_eq!(per_model.len(), 1, "{per_model:?}");
        let (name, m) = per_model.iter().next().unwrap();
        assert_eq!(name, "claude-opus-5-5", "the default model");
        assert_eq!(m["inputTokens"], 3 * INPUT);
        assert_eq!(m["cacheCreationInputTokens"], 3 * CACHE_WRITE);
        assert_eq!(m["cacheReadInputTokens"], 3 * CACHE_READ);
        assert_eq!(m["outputTokens"], 3 * OUTPUT);
        // The tool prices the calls itself, at list price.
        let cost = r["total_cost_usd"].as_f64().unwrap();
        assert!(cost > 0.0, "{cost}");
        assert_eq!(m["costUSD"].as_f64(), Some(cost));

        let requests = model.requests();
        assert_eq!(requests.len(), 3, "nothing but the main loop");
        assert!(requests.iter().all(|r| r["stream"] == true));
        let tools = requests[0]["tools"].as_array().unwrap();
        let required = |name: &str| {
            tools
                .iter()
                .find(|t| t["name"] == name)
                .map(|t| t["input_schema"]["required"].clone())
        };
        assert_eq!(required("Write"), Some(json!(["file_path", "content"])));
        assert_eq!(
            required("Edit"),
            Some(json!(["file_path", "old_string", "new_string"]))
        );
        assert_eq!(required("Bash"), Some(json!(["command"])));
        let sent = tool_results(&requests[2]);
        assert_eq!(sent.len(), 2, "{sent:?}");
        assert!(
            sent[0]["content"]
                .as_str()
                .unwrap()
                .starts_with("File created successfully at: calc.py"),
            "{sent:?}"
        );
        assert_eq!(sent[1]["content"], "5");
        assert_eq!(sent[1]["is_error"], false);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn stream_json_reports_every_call_and_tool_result_then_the_result() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        let Some(claude) = tool("claude") else { return };
        let model = FakeModel::start(
            Wire::Anthropic,
            vec![
                edit_file("calc.py", "a - b", "a + b"),
                shell(TRY_IT),
                Turn::text("Fixed."),
            ],
        )
        .await;
        let buggy = "def add(a, b):\n    return a - b\n";
        let w = Workspace::new(&model.base_url(), &[("calc.py", buggy)]);
        let out = w.claude(&claude, STREAM, &[SANDBOX], "Fix add().").await;

        assert!(out.status.success(), "{}", explain(&out));
        assert_eq!(
            std::fs::read_to_string(w.repo().join("calc.py")).unwrap(),
            CALC
        );
        let events = events(&out);
        let kinds: Vec<String> = events
            .iter()
            .map(|e| {
                format!(
                    "{}/{}",
                    e["type"].as_str().unwrap(),
                    e["subtype"].as_str().unwrap_or("")
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "system/init",
                "assistant/",
                "user/",
                "assistant/",
                "user/",
                "assistant/",
                "result/success"
            ]
        );
        let init = &events[0];
        let session = init["session_id"].as_str().unwrap();
        assert!(events.iter().all(|e| e["session_id"] == session));
        assert_eq!(init["permissionMode"], "bypassPermissions");
        assert_eq!(init["apiKeySource"], "ANTHROPIC_API_KEY");
        assert_eq!(
            Path::new(init["cwd"].as_str().unwrap()),
            w.repo().canonicalize().unwrap()
        );
        // An assistant event per content block, with `message_start`'s usage.
        let called: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "assistant")
            .map(|e| &e["message"])
            .collect();
        assert_eq!(called[0]["content"][0]["name"], "Edit");
        assert_eq!(called[1]["content"][0]["name"], "Bash");
        assert_eq!(called[2]["content"][0]["text"], "Fixed.");
        assert_eq!(
            counts(&called[0]["usage"]),
            [INPUT, CACHE_WRITE, CACHE_READ, 1]
        );
        // What the tools did, in `tool_use_result`.
        let results: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "user")
            .map(|e| &e["tool_use_result"])
            .collect();
        assert_eq!(results[0]["filePath"], "calc.py");
        assert_eq!(
            results[0]["structuredPatch"][0]["lines"],
            json!([" def add(a, b):", "-    return a - b", "+    return a + b"])
        );
        assert_eq!(results[1]["stdout"], "5");
        assert_eq!(results[1]["interrupted"], false);

        let r = events.last().unwrap();
        assert_eq!(r["result"], "Fixed.");
        assert_eq!(
            counts(&r["usage"]),
            [3 * INPUT, 3 * CACHE_WRITE, 3 * CACHE_READ, 3 * OUTPUT]
        );
        // This invocation's usage per model (only in stream-json).
        let since = r["model_usage_since_last_result"].as_object().unwrap();
        assert_eq!(
            since.values().next().unwrap()["cacheReadInputTokens"],
            3 * CACHE_READ
        );
    }

    /// Runs Claude Code with no retries against a server refusing every key
    /// with `message`; returns the `result` object.
    async fn refused_with(message: &str) -> Option<Value> {
        let claude = tool("claude")?;
        let model = FakeModel::start(Wire::Anthropic, vec![]).await;
        model.then_always(Turn::Status(401, message.to_owned()));
        let w = Workspace::new(&model.base_url(), &[]);
        let env = [SANDBOX, ("CLAUDE_CODE_MAX_RETRIES", "0")];
        let out = w.claude(&claude, JSON, &env, "Anything.").await;

        assert_eq!(out.status.code(), Some(1), "{}", explain(&out));
        assert!(out.stderr.is_empty(), "{}", explain(&out));
        let r = result(&out);
        assert_eq!(r["type"], "result");
        assert_eq!(r["subtype"], "success", "sic");
        assert_eq!(r["is_error"], true);
        assert_eq!(r["terminal_reason"], "api_error");
        assert_eq!(r["api_error_status"], 401);
        assert_eq!(r["api_error_type"], "authentication_error");
        assert_eq!(counts(&r["usage"]), [0; 4]);
        assert_eq!(r["total_cost_usd"], 0);
        assert_eq!(r["permission_denials"], json!([]));
        assert_eq!(model.requests().len(), 1, "no retry");
        Some(r)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_key_fails_at_once_with_max_retries_zero() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        // The real API's words for a wrong key.
        let Some(r) = refused_with("invalid x-api-key").await else {
            return;
        };
        assert_eq!(r["result"], "Invalid API key · Fix external API key");
        // Other words are quoted.
        let r = refused_with("Incorrect API key provided").await.unwrap();
        assert_eq!(
            r["result"],
            "Failed to authenticate. API Error: 401 Incorrect API key provided"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_refused_key_is_retried_and_each_retry_is_an_api_retry_event() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        let Some(claude) = tool("claude") else { return };
        let model = FakeModel::start(Wire::Anthropic, vec![]).await;
        model.then_always(Turn::unauthorized());
        let w = Workspace::new(&model.base_url(), &[]);
        let started = Instant::now();
        let mut child = w.spawn(&claude, STREAM, &[SANDBOX]);
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"Anything.").await.unwrap();
        drop(stdin);
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        // Ten retries with backoff up to ~40 s each (about three minutes,
        // then the same result as with CLAUDE_CODE_MAX_RETRIES=0); the
        // first retry is announced at once.
        let retry = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                let event: Value = serde_json::from_str(&line).unwrap();
                if event["type"] == "system" && event["subtype"] == "api_retry" {
                    return event;
                }
            }
            panic!("stdout ended without an api_retry event");
        })
        .await
        .expect("an api_retry event within 20 s");
        child.kill().await.unwrap();

        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(retry["attempt"], 1);
        assert_eq!(retry["max_retries"], 10);
        assert_eq!(retry["error_status"], 401);
        assert_eq!(retry["error"], "authentication_failed");
        assert!(retry["retry_delay_ms"].as_u64().unwrap() < 2_000, "{retry}");
        assert!(!model.requests().is_empty());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn resume_continues_the_session_with_its_history_and_keeps_state_in_home() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        let Some(claude) = tool("claude") else { return };
        let model = FakeModel::start(
            Wire::Anthropic,
            vec![
                Turn::text("Noted: kumquat."),
                Turn::text("The word was kumquat."),
            ],
        )
        .await;
        let w = Workspace::new(&model.base_url(), &[]);
        let first = w
            .claude(&claude, JSON, &[SANDBOX], "Remember the word kumquat.")
            .await;
        assert!(first.status.success(), "{}", explain(&first));
        let first = result(&first);
        let session = first["session_id"].as_str().unwrap().to_owned();

        // The session and the tool's state stay under HOME (and TMPDIR).
        let home = w.home.path();
        assert!(home.join(".claude.json").is_file());
        let transcripts: Vec<_> = std::fs::read_dir(home.join(".claude/projects"))
            .unwrap()
            .flatten()
            .map(|d| d.path().join(format!("{session}.jsonl")))
            .filter(|p| p.is_file())
            .collect();
        assert_eq!(transcripts.len(), 1, "the session's transcript");
        // Its per-project scratch space, `$TMPDIR/claude-<uid>/`.
        let scratch = std::fs::read_dir(home.join("tmp"))
            .unwrap()
            .flatten()
            .any(|d| d.file_name().to_string_lossy().starts_with("claude-"));
        assert!(scratch, "claude-<uid> under TMPDIR");

        let mut args = JSON.to_vec();
        args.extend(["--resume", &session]);
        let second = w.claude(&claude, &args, &[SANDBOX], "Which word?").await;
        assert!(second.status.success(), "{}", explain(&second));
        let second = result(&second);
        assert_eq!(second["session_id"], session.as_str(), "the same session");
        assert_eq!(second["result"], "The word was kumquat.");
        // `usage` is this invocation's; `modelUsage` and the cost add up
        // the whole session.
        assert_eq!(
            counts(&second["usage"]),
            [INPUT, CACHE_WRITE, CACHE_READ, OUTPUT]
        );
        let m = second["modelUsage"]
            .as_object()
            .unwrap()
            .values()
            .next()
            .unwrap()
            .clone();
        assert_eq!(m["inputTokens"], 2 * INPUT);
        let (one, both) = (
            first["total_cost_usd"].as_f64().unwrap(),
            second["total_cost_usd"].as_f64().unwrap(),
        );
        assert!((both - 2.0 * one).abs() < 1e-9, "{one} then {both}");

        let requests = model.requests();
        assert_eq!(requests.len(), 2);
        let sent = serde_json::to_string(&requests[1]["messages"]).unwrap();
        let earlier = sent.find("Remember the word kumquat.").expect("history");
        let answer = sent.find("Noted: kumquat.").expect("its answer");
        let now = sent.find("Which word?").expect("the new prompt");
        assert!(earlier < answer && answer < now, "{sent}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_default_mode_denies_writes_and_commands_yet_exits_0() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        let Some(claude) = tool("claude") else { return };
        let model = FakeModel::start(
            Wire::Anthropic,
            vec![
                write_file("calc.py", CALC),
                shell(TRY_IT),
                Turn::text("I need permission to write calc.py."),
            ],
        )
        .await;
        let w = Workspace::new(&model.base_url(), &[]);
        let args = ["-p", "--output-format", "json"];
        let out = w
            .claude(&claude, &args, &[], "Write calc.py and try it.")
            .await;

        assert!(out.status.success(), "{}", explain(&out));
        assert!(!w.repo().join("calc.py").exists());
        let r = result(&out);
        assert_eq!(r["is_error"], false);
        assert_eq!(r["result"], "I need permission to write calc.py.");
        let path = w.repo().canonicalize().unwrap().join("calc.py");
        let path = path.to_str().unwrap();
        assert_eq!(
            r["permission_denials"],
            json!([
                {"tool_name": "Write", "tool_use_id": "toolu_1",
                 "tool_input": {"file_path": path, "content": CALC}},
                {"tool_name": "Bash", "tool_use_id": "toolu_2",
                 "tool_input": {"command": TRY_IT, "description": "Run a command"}},
            ])
        );
        // What the model was told.
        let sent = tool_results(&model.requests()[2]);
        assert_eq!(
            sent[0]["content"],
            format!(
                "Claude requested permissions to write to {path}, but you haven't granted it yet."
            )
        );
        assert_eq!(sent[1]["content"], "This command requires approval");
        assert!(sent.iter().all(|s| s["is_error"] == true));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn as_root_bypass_needs_is_sandbox_and_allowed_tools_do_not() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        let Some(claude) = tool("claude") else { return };
        // SAFETY: reads the effective uid.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("SKIPPED: not root");
            return;
        }
        let model = FakeModel::start(
            Wire::Anthropic,
            vec![
                write_file("calc.py", CALC),
                shell(TRY_IT),
                Turn::text("done"),
            ],
        )
        .await;
        let w = Workspace::new(&model.base_url(), &[]);
        let refused = w.claude(&claude, JSON, &[], "Write calc.py.").await;
        assert_eq!(refused.status.code(), Some(1), "{}", explain(&refused));
        assert!(refused.stdout.is_empty(), "{}", explain(&refused));
        assert_eq!(
            String::from_utf8_lossy(&refused.stderr).trim(),
            "--dangerously-skip-permissions cannot be used with root/sudo privileges for security reasons"
        );
        assert!(model.requests().is_empty(), "refused before any request");

        let args = [
            "-p",
            "--output-format",
            "json",
            "--allowedTools",
            "Write",
            "Edit",
            "Bash",
        ];
        let out = w
            .claude(&claude, &args, &[], "Write calc.py and try it.")
            .await;
        assert!(out.status.success(), "{}", explain(&out));
        assert_eq!(
            std::fs::read_to_string(w.repo().join("calc.py")).unwrap(),
            CALC
        );
        assert_eq!(result(&out)["permission_denials"], json!([]));
        assert_eq!(tool_results(&model.requests()[2])[1]["content"], "5");
    }

    /// Answers the first request with the first `keep` events of an answer
    /// (the body then ends cleanly, without `message_stop`), later ones in
    /// full, streamed or not as asked.
    async fn cutting_server(text: &str, keep: usize) -> (String, Arc<Mutex<Vec<Value>>>) {
        #[derive(Clone)]
        struct Shared {
            text: String,
            keep: usize,
            requests: Arc<Mutex<Vec<Value>>>,
        }
        async fn answer(State(shared): State<Shared>, body: Bytes) -> Response {
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let n = {
                let mut requests = shared.requests.lock().unwrap();
                requests.push(request.clone());
                requests.len() as u64
            };
            let model = request["model"].as_str().unwrap_or("m").to_owned();
            let turn = Turn::Text(shared.text.clone());
            let events = if n == 1 {
                let mut started =
                    anthropic::started(&Turn::text("partial "), &model, n, Usage::default());
                started.truncate(shared.keep);
                started
            } else if request["stream"] == true {
                anthropic::events(&turn, &model, n)
            } else {
                return axum::Json(anthropic::message(&turn, &model, n)).into_response();
            };
            let body: String = events
                .into_iter()
                .map(|(name, data)| format!("event: {name}\ndata: {data}\n\n"))
                .collect();
            ([("content-type", "text/event-stream")], body).into_response()
        }
        let shared = Shared {
            text: text.to_owned(),
            keep,
            requests: Arc::new(Mutex::new(Vec::new())),
        };
        let app = axum::Router::new()
            .route("/v1/messages", axum::routing::post(answer))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (format!("http://{addr}"), shared.requests)
    }

    /// Runs Claude Code against a server whose first answer stops after
    /// `keep` events; returns the events and the requests.
    async fn recovered_from(keep: usize) -> Option<(Vec<Value>, Vec<Value>)> {
        let claude = tool("claude")?;
        let (url, requests) = cutting_server("recovered answer", keep).await;
        let w = Workspace::new(&url, &[]);
        let out = w
            .claude(&claude, STREAM, &[SANDBOX], "Say something.")
            .await;

        assert!(out.status.success(), "{}", explain(&out));
        let events = events(&out);
        let said: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "assistant")
            .map(|e| &e["message"]["content"][0]["text"])
            .collect();
        assert_eq!(said, ["recovered answer"], "the partial text is dropped");
        let r = events.last().unwrap();
        assert_eq!(r["result"], "recovered answer");
        assert_eq!(
            counts(&r["usage"]),
            [2 * INPUT, 2 * CACHE_WRITE, 2 * CACHE_READ, OUTPUT + 1],
            "the cut call counts with message_start's usage"
        );
        let requests = requests.lock().unwrap().clone();
        assert_eq!(requests.len(), 2);
        assert_eq!(requests[0]["stream"], true);
        Some((events, requests))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_ending_before_any_content_is_asked_again_without_streaming() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        let Some((events, requests)) = recovered_from(1).await else {
            return;
        };
        assert_eq!(requests[1]["stream"], false);
        assert_eq!(requests[1]["max_tokens"], 64_000);
        assert!(!events.iter().any(|e| e["subtype"] == "api_retry"));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stream_ending_mid_answer_is_retried_streaming_with_an_api_retry_event() {
        let _slot = crate::support::agent_tools::cli_slot().await;
        let Some((events, requests)) = recovered_from(3).await else {
            return;
        };
        assert_eq!(requests[1]["stream"], true);
        let retries: Vec<&Value> = events
            .iter()
            .filter(|e| e["subtype"] == "api_retry")
            .collect();
        assert_eq!(retries.len(), 1);
        assert_eq!(retries[0]["error_status"], Value::Null);
        assert_eq!(retries[0]["error"], "unknown");
    }
}
