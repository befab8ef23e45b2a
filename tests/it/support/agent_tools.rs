//! The real agent CLIs, pinned and installed by `.ci/run` (npm, into
//! `$CLOSER_AGENT_TOOLS`, default `~/.cache/closer-agent-tools`), and the
//! story that puts one in front of a scripted model server: a Python
//! repository whose `add` subtracts, the bug labelled for closer.

use std::collections::BTreeMap;
use std::path::PathBuf;

use closer::config::agents::{AdapterKind, AgentConfig};

use super::story::Story;

pub const CALC_PY: &str = "def add(a, b):\n    return a - b\n";
pub const FIXED_CALC_PY: &str = "def add(a, b):\n    return a + b\n";
pub const TEST_CALC_PY: &str = "import unittest\n\nfrom calc import add\n\n\nclass CalcTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";
pub const PY_CONFIG: &str = "dod:\n  - { type: tests_pass, command: \"python3 -m unittest -v\" }\n";
/// The same, with a single iteration: the run ends after the first.
pub const ONE_ITERATION: &str = "dod:\n  - { type: tests_pass, command: \"python3 -m unittest -v\" }\ncompletion:\n  max_iterations: 1\n";

/// The pinned CLI `name`, or `None` after saying loudly why the test is
/// skipped; in CI (where `.ci/run` installs them) a missing tool fails.
pub fn tool(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("CLOSER_AGENT_TOOLS")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/closer-agent-tools"))
        })
        .unwrap_or_default();
    let path = dir.join("node_modules/.bin").join(name);
    if path.exists() {
        return Some(path);
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "{name} is not installed at {}: .ci/run installs it",
            path.display()
        );
    }
    eprintln!(
        "SKIPPED: {name} is not installed at {} (run .ci/run, or npm install the pinned tools there)",
        path.display()
    );
    None
}

/// An operator's entry for a tool adapter: the program, variables, files.
pub fn agent(
    adapter: AdapterKind,
    program: PathBuf,
    env: &[(&str, String)],
    config_files: BTreeMap<String, PathBuf>,
) -> AgentConfig {
    AgentConfig {
        adapter,
        command: vec![program.display().to_string()],
        timeout_secs: 120,
        pass_env: Vec::new(),
        max_output_bytes: 10 << 20,
        config_files,
        keep_home_secs: 86_400,
        resume: true,
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect(),
    }
}

/// The Python bug story with `agent` doing the work under `config`.
pub async fn python_story(name: &str, agent: AgentConfig, config: &str) -> Story {
    let files = [("calc.py", CALC_PY), ("test_calc.py", TEST_CALC_PY)];
    let mut s = Story::start_with_files(name, Some(config), &files).await;
    s.kill_workers();
    s.agent = Some(agent);
    s.spawn_workers();
    s
}

/// The same story on the queue's manual clock, with `closer serve`'s queue
/// settings: [`Story::pass_time`] lets an outage's backoff pass.
pub async fn python_story_on_clock(
    name: &str,
    agent: AgentConfig,
    config: &str,
    clock: std::sync::Arc<closer::clock::ManualClock>,
) -> Story {
    let files = [("calc.py", CALC_PY), ("test_calc.py", TEST_CALC_PY)];
    let timing = super::story::Timing::serve();
    let mut s = Story::start_with_files_on_clock(name, Some(config), &files, clock, timing).await;
    s.kill_workers();
    s.agent = Some(agent);
    s.spawn_workers();
    s
}

/// The run's own HOME under the story's data directory.
pub fn run_homes(s: &Story) -> PathBuf {
    s.dir.path().join("data").join("homes")
}

/// One real agent CLI at a time: each is a heavy process (a JavaScript
/// runtime), and a two-core CI machine also runs every other story
/// meanwhile. Hold the permit for the whole test.
pub async fn cli_slot() -> tokio::sync::SemaphorePermit<'static> {
    static SLOTS: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);
    SLOTS.acquire().await.expect("never closed")
}

/// Runs a real-CLI story, and once more if it fails, saying so loudly.
///
/// In CI about one such story in four full runs stalled (the tool did not
/// finish its turn within a minute), never reproduced locally; a story that
/// fails twice fails.
pub async fn twice<F, Fut>(name: &str, story: F)
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let Err(first) = tokio::spawn(story()).await else {
        return;
    };
    eprintln!("RETRYING {name}: the first attempt failed: {first}");
    if let Err(second) = tokio::spawn(story()).await {
        std::panic::resume_unwind(second.into_panic());
    }
}

/// Opens the story's bug, labelled for closer.
pub async fn open_bug(s: &mut Story) -> closer::model::IssueNumber {
    s.open_issue("add() is wrong", "add subtracts", &["closer", "type:bug"])
        .await
}

/// `author|subject` of the commit closer pushed to `closer/issue-1`.
pub fn pushed_commit(s: &Story) -> String {
    let head = s.origin.branch_head("closer/issue-1").expect("pushed");
    super::git::git(&s.origin.bare, &["show", "-s", "--format=%an|%s", &head])
        .trim()
        .to_owned()
}

/// Asserts that `adapter` reads the tool's `stdout` as its model provider
/// being down.
pub fn assert_read_as_provider_down(
    adapter: &dyn closer::agent::adapter::AgentAdapter,
    stdout: &[u8],
) {
    let read = adapter.interpret(&String::from_utf8_lossy(stdout));
    assert!(
        matches!(
            read.failure,
            Some(closer::agent::outcome::AgentFailure::ModelUnavailable { .. })
        ),
        "{:?}",
        read.failure
    );
}
