//! Figures for docs/benchmarks.md, not tests: `bench/agents.sh` runs them
//! (`--ignored`). For each real agent CLI, a two-iteration run through
//! closer with the session resumed and with a fresh session, and one slow
//! iteration with live progress on and off, printing what each iteration
//! cost: wall time, the tokens closer counted, the model calls, and the size
//! of the second iteration's first model request (the context the tool
//! carries over; the scripted server's token counts are fixed, so the
//! request size is what shows the difference).

use std::collections::BTreeMap;
use std::time::Duration;

use closer::config::agents::{AdapterKind, AgentConfig};
use closer::model::RunState;
use closer::store::runs;
use serde_json::{Value, json};

use crate::support::agent_tools::{FIXED_CALC_PY, PY_CONFIG, agent, open_bug, python_story, tool};
use crate::support::fake_llm::Reply;
use crate::support::fake_models::{FakeModel, Turn, Wire};
use crate::support::story::Story;

/// The tool `name` pointed at `model` as docs/agents.md says.
fn configured(name: &str, model: &FakeModel, dir: &std::path::Path) -> Option<AgentConfig> {
    let (adapter, env, files) = match name {
        "claude" => (
            AdapterKind::ClaudeCode,
            vec![
                ("ANTHROPIC_BASE_URL", model.base_url()),
                ("ANTHROPIC_API_KEY", "sk".to_owned()),
            ],
            BTreeMap::new(),
        ),
        "codex" => {
            let config = dir.join("codex.toml");
            let text = format!(
                "model = \"test-model\"\nmodel_provider = \"fake\"\n[model_providers.fake]\nname = \"fake\"\n\
                 base_url = \"{}\"\nenv_key = \"FAKE_OPENAI_KEY\"\nwire_api = \"responses\"\n",
                model.base_url()
            );
            std::fs::write(&config, text).unwrap();
            let files = BTreeMap::from([(".codex/config.toml".to_owned(), config)]);
            (
                AdapterKind::Codex,
                vec![("FAKE_OPENAI_KEY", "sk".to_owned())],
                files,
            )
        }
        _ => {
            let config = dir.join("opencode.json");
            let text = json!({"provider": {"fake": {"npm": "@ai-sdk/openai-compatible", "name": "Fake",
                "options": {"baseURL": model.base_url(), "apiKey": "sk"},
                "models": {"test-model": {"name": "Test"}}}}, "model": "fake/test-model"});
            std::fs::write(&config, text.to_string()).unwrap();
            let files = BTreeMap::from([(".config/opencode/opencode.json".to_owned(), config)]);
            let env = vec![
                ("npm_config_registry", "http://127.0.0.1:9/".to_owned()),
                ("npm_config_fetch_retries", "0".to_owned()),
            ];
            (AdapterKind::Opencode, env, files)
        }
    };
    Some(agent(adapter, tool(name)?, &env, files))
}

fn wire(name: &str) -> Wire {
    match name {
        "claude" => Wire::Anthropic,
        "codex" => Wire::Responses,
        _ => Wire::Chat,
    }
}

fn write_fix(name: &str) -> Turn {
    match name {
        "claude" => Turn::tool(
            "Write",
            json!({"file_path": "calc.py", "content": FIXED_CALC_PY}),
        ),
        "codex" => Turn::tool(
            "exec_command",
            json!({"cmd": "printf 'def add(a, b):\\n    return a + b\\n' > calc.py"}),
        ),
        _ => Turn::tool(
            "write",
            json!({"filePath": "calc.py", "content": FIXED_CALC_PY}),
        ),
    }
}

/// Per iteration: (wall ms, tokens counted).
async fn iterations(s: &Story, n: closer::model::IssueNumber) -> Vec<(u64, u64)> {
    let run = s.run(n).await.expect("a run");
    runs::iterations(s.store.pool(), &run.id)
        .await
        .unwrap()
        .iter()
        .filter_map(|i| serde_json::from_str::<Value>(i.agent.as_deref()?).ok())
        .map(|a| {
            let t = &a["usage"]["tokens"];
            let total = ["input", "output", "cache_write", "cache_read"]
                .iter()
                .filter_map(|k| t[*k].as_u64())
                .sum();
            (a["duration_ms"].as_u64().unwrap_or(0), total)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a benchmark: bench/agents.sh runs it"]
async fn bench_two_iterations_with_and_without_resume() {
    println!(
        "| tool | session | iteration 1: wall ms / tokens | iteration 2: wall ms / tokens | iteration 2 first request: messages / bytes |"
    );
    println!("| --- | --- | --- | --- | --- |");
    for name in ["claude", "codex", "opencode"] {
        for resume in [true, false] {
            let script = vec![
                write_fix(name),
                Turn::text("Fixed add()."),
                Turn::text("Checked."),
            ];
            let model = FakeModel::start(wire(name), script).await;
            let dir = tempfile::tempdir().unwrap();
            let Some(mut agent) = configured(name, &model, dir.path()) else {
                return;
            };
            agent.resume = resume;
            let mut s = python_story(&format!("bench-{name}-{resume}"), agent, PY_CONFIG).await;
            s.llm.push([
                Reply::closer(false, 0.9, &["check negatives"]),
                Reply::closer(true, 0.95, &[]),
            ]);
            let n = open_bug(&mut s).await;
            s.idle().await;
            assert_eq!(
                s.run(n).await.unwrap().state,
                RunState::Done,
                "{}",
                s.journal().await
            );
            let its = iterations(&s, n).await;
            let third = model.main_requests().get(2).cloned().unwrap_or(Value::Null);
            let items = third.get("messages").or_else(|| third.get("input"));
            let count = items.and_then(Value::as_array).map_or(0, Vec::len);
            let bytes = third.to_string().len();
            println!(
                "| {name} | {} | {} / {} | {} / {} | {count} / {bytes} |",
                if resume { "resumed" } else { "fresh" },
                its[0].0,
                its[0].1,
                its[1].0,
                its[1].1
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a benchmark: bench/agents.sh runs it"]
async fn bench_status_edits_with_live_progress() {
    println!("| live progress | agent wall s | status edits in the run | of which progress |");
    println!("| --- | --- | --- | --- |");
    for every in [None, Some(Duration::from_secs(5))] {
        let slow = Turn::tool(
            "bash",
            json!({"command": "sleep 30", "description": "slow tests"}),
        );
        let script = vec![write_fix("opencode"), slow, Turn::text("Fixed add().")];
        let model = FakeModel::start(Wire::Chat, script).await;
        let dir = tempfile::tempdir().unwrap();
        let Some(agent) = configured("opencode", &model, dir.path()) else {
            return;
        };
        let mut s = python_story("bench-progress", agent, PY_CONFIG).await;
        s.kill_workers();
        s.progress_every = every;
        s.spawn_workers();
        s.llm.push([Reply::closer(true, 0.95, &[])]);
        let n = open_bug(&mut s).await;
        s.idle().await;
        let status = s.status_comment(n);
        let edits = s.github.requests_to(
            "PATCH",
            &format!("/repos/octo/calc/issues/comments/{}", status.id),
        );
        let progress = edits.iter().filter(|r| r.body.contains("**Now:**")).count();
        let wall = iterations(&s, n).await[0].0 / 1000;
        let label = every.map_or("off".to_owned(), |e| format!("every {} s", e.as_secs()));
        println!("| {label} | {wall} | {} | {progress} |", edits.len());
    }
}
