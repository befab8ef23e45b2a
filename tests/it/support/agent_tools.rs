//! The real agent CLIs, pinned and installed by `.ci/run` (npm, into
//! `$CLOSER_AGENT_TOOLS`, default `~/.cache/closer-agent-tools`), and the
//! story that puts one in front of a scripted model server: a Python
//! repository whose `add` subtracts, the bug labelled for closer.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use closer::config::agents::{AdapterKind, AgentConfig};
use closer::model::{IssueNumber, Run};

use super::fake_llm::Reply;
use super::fake_models::{FakeModel, Turn, Wire};
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

/// One real CLI as the stories meet it: the wire its model speaks, and the
/// operator's agent entry pointing it at a model (files it needs written
/// into the given directory); `None`, after saying why, when the tool is
/// not installed.
#[derive(Clone, Copy)]
pub struct Cli {
    pub wire: Wire,
    pub agent: fn(&FakeModel, &Path) -> Option<AgentConfig>,
}

/// A real CLI set up for one story: its turn at the machine
/// ([`cli_slot`]), the scripted model it talks to, and its agent entry, to
/// adjust before the story starts.
pub struct CliStory {
    pub model: FakeModel,
    pub agent: AgentConfig,
    /// Where the agent's config files live, as long as the story.
    pub dir: tempfile::TempDir,
    _slot: tokio::sync::SemaphorePermit<'static>,
}

impl CliStory {
    /// `cli` in front of a model that answers `turns` in order; `None`
    /// when the tool is not installed (the story skips, loudly).
    pub async fn new(cli: Cli, turns: Vec<Turn>) -> Option<CliStory> {
        let slot = cli_slot().await;
        let model = FakeModel::start(cli.wire, turns).await;
        let dir = tempfile::tempdir().unwrap();
        let agent = (cli.agent)(&model, dir.path())?;
        Some(CliStory {
            model,
            agent,
            dir,
            _slot: slot,
        })
    }

    /// The Python bug story with this agent doing the work under `config`.
    pub async fn story(&self, name: &str, config: &str) -> Story {
        python_story(name, self.agent.clone(), config).await
    }
}

/// closer works the story's bug, opened and labelled now, its completion
/// check answering `verdicts`, until the queue is idle: the bug and its run.
pub async fn work_the_bug(
    s: &mut Story,
    verdicts: impl IntoIterator<Item = Reply>,
) -> (IssueNumber, Run) {
    s.llm.push(verdicts);
    let n = open_bug(s).await;
    s.idle().await;
    (n, s.run(n).await.expect("a run"))
}

/// The bug fixed with `fix` in a first iteration the completion check
/// finds short ("check negative numbers"), then a second one: the run done
/// after two. Returns the CLI's story (its model holds the requests) and
/// the run.
pub async fn two_iterations(cli: Cli, name: &str, fix: Turn) -> Option<(CliStory, Run)> {
    let turns = vec![
        fix,
        Turn::text("Fixed add()."),
        Turn::text("Checked negatives too."),
    ];
    let cs = CliStory::new(cli, turns).await?;
    let mut s = cs.story(name, PY_CONFIG).await;
    let verdicts = [
        Reply::closer(false, 0.9, &["check negative numbers"]),
        Reply::closer(true, 0.95, &[]),
    ];
    let (_, run) = work_the_bug(&mut s, verdicts).await;
    assert_eq!(
        run.state,
        closer::model::RunState::Done,
        "{}",
        s.journal().await
    );
    assert_eq!(run.iteration, 2);
    Some((cs, run))
}

/// The model refuses the key: the run fails after one iteration. Returns
/// the status comment and how long the story took from the bug's opening.
pub async fn refused_key(cli: Cli, name: &str) -> Option<(String, std::time::Duration)> {
    let cs = CliStory::new(cli, vec![]).await?;
    cs.model.then_always(Turn::unauthorized());
    let mut s = cs.story(name, PY_CONFIG).await;
    let started = std::time::Instant::now();
    let (n, run) = work_the_bug(&mut s, []).await;
    let took = started.elapsed();
    assert_eq!(
        run.state,
        closer::model::RunState::Failed,
        "{}",
        s.journal().await
    );
    assert_eq!(run.iteration, 1);
    Some((s.status_comment(n).body, took))
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

/// The runs' own HOMEs under the story's data directory.
pub fn run_homes(s: &Story) -> Vec<PathBuf> {
    std::fs::read_dir(s.data_dir().join("homes"))
        .unwrap()
        .flatten()
        .map(|home| home.path())
        .collect()
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
