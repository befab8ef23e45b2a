//! Agent execution and objective verification, end to end: real git
//! repositories in temp dirs, a tiny Python project with a unittest suite,
//! real subprocesses, and scripted agents (shell scripts making commits).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use closer::agent::adapter::{AgentRequest, AgentResult, AgentStatus, resolve_pass_env, run_agent};
use closer::agent::confine::Confinement;
use closer::agent::process::BaseEnv;
use closer::agent::sandbox::purpose::Purpose;
use closer::agent::sandbox::{RepoSource, Sandbox, SandboxOptions, Worktree};
use closer::config::agents::{AdapterKind, AgentConfig};
use closer::config::repo::{BaselineConfig, GoalKind, GoalSpec, RepoConfig, Tolerate};
use closer::engine::artifacts::ArtifactKind;
use closer::engine::baseline::{self, Baseline, BaselineError};
use closer::engine::convergence::{CheckId, ConvergenceState, Stage, VerdictKind};
use closer::engine::evidence as stored;
use closer::engine::goals::GoalSettings;
use closer::engine::verify::{IterationVerification, VerifyContext, verify_iteration};
use closer::model::TaskType;
use secrecy::SecretString;
use tempfile::TempDir;

use crate::support::OutputApart as _;
use crate::support::db::TestDb;
use crate::support::git::{Origin, files_containing, git};
use crate::support::process::{alive, process_with_argument, unique_sleep};
use crate::support::set_mode;

const CALC_BUGGY: &str = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n";

/// The suite: `test_add` fails on the buggy `add` (with timing and temp-path
/// noise in its message), `test_mul` passes; `test_legacy` optionally fails
/// from the start.
fn test_suite(legacy_broken: bool) -> String {
    let legacy = if legacy_broken {
        "        self.assertTrue(False, 'legacy importer is broken')\n"
    } else {
        "        self.assertTrue(True)\n"
    };
    format!(
        "import os, tempfile, time, unittest\nfrom calc import add, mul\n\n\nclass CalcTest(unittest.TestCase):\n    \
         def test_add(self):\n        self.assertEqual(add(2, 3), 5, f'checked at {{time.time()}} in {{tempfile.mkdtemp()}} pid {{os.getpid()}}')\n\n    \
         def test_mul(self):\n        self.assertEqual(mul(2, 3), 6)\n\n    def test_legacy(self):\n{legacy}\n\nif __name__ == '__main__':\n    unittest.main()\n"
    )
}

fn python_dir() -> String {
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sys, os; print(os.path.dirname(os.path.realpath(sys.executable)))",
        ])
        .output_apart()
        .expect("python3 is needed by these tests");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

struct Fixture {
    origin: Origin,
    root: TempDir,
    sandbox: Sandbox,
    base_env: BaseEnv,
    settings: GoalSettings,
}

impl Fixture {
    fn new(legacy_broken: bool) -> Fixture {
        let suite = test_suite(legacy_broken);
        let origin = Origin::with_files(&[
            ("calc.py", CALC_BUGGY),
            ("test_calc.py", &suite),
            ("README.md", "# calc\n"),
            (".gitignore", "__pycache__/\n"),
        ]);
        let root = tempfile::tempdir().expect("temp dir");
        let home = root.path().join("home");
        std::fs::create_dir_all(&home).expect("home");
        let base_env = BaseEnv {
            path: format!(
                "{}:{}",
                python_dir(),
                std::env::var("PATH").unwrap_or_default()
            ),
            home,
            lang: "C.UTF-8".into(),
        };
        let sandbox = Sandbox::new(SandboxOptions {
            root: root.path().join("sandbox"),
            base_env: base_env.clone(),
            git_timeout: Duration::from_secs(60),
            committer_name: "closer".into(),
            committer_email: "closer@localhost".into(),
        });
        let settings = GoalSettings {
            base_env: base_env.clone(),
            confinement: crate::support::confinement(root.path(), &root.path().join("sandbox")),
            scratch: root.path().join("goals"),
            default_timeout: Duration::from_secs(30),
            max_output_bytes: 1024 * 1024,
            prober: Some(env!("CARGO_BIN_EXE_closer").into()),
        };
        Fixture {
            origin,
            root,
            sandbox,
            base_env,
            settings,
        }
    }

    fn source(&self) -> RepoSource {
        RepoSource {
            url: self.origin.url.clone(),
            token: Some(SecretString::from(TOKEN)),
            default_branch: None,
            repository_id: None,
        }
    }

    async fn prepare(&self, run: &str) -> Worktree {
        self.prepare_issue(run, 4).await
    }

    async fn prepare_issue(&self, run: &str, issue: u64) -> Worktree {
        self.sandbox
            .prepare(&self.source(), issue, run, None)
            .await
            .expect("worktree")
    }

    /// A `command` agent running `body` with `sh`.
    fn agent(&self, name: &str, body: &str) -> AgentConfig {
        let path = self.script(name, body);
        AgentConfig {
            adapter: AdapterKind::Command,
            command: vec![path.display().to_string()],
            timeout_secs: 20,
            pass_env: Vec::new(),
            max_output_bytes: 1024 * 1024,
            config_files: Default::default(),
            keep_home_secs: 0,
            resume: true,
            env: Default::default(),
        }
    }

    fn script(&self, name: &str, body: &str) -> PathBuf {
        let dir = self.root.path().join("bin");
        std::fs::create_dir_all(&dir).expect("bin");
        let path = dir.join(name);
        crate::support::write_executable(&path, &format!("#!/bin/sh\n{body}\n"));
        path
    }

    /// Where the tests' probes leave their traces (visible read-write).
    fn scratch(&self) -> PathBuf {
        let dir = self.root.path().join("scratch");
        std::fs::create_dir_all(&dir).expect("scratch");
        dir
    }

    async fn run(&self, config: &AgentConfig, worktree: &Worktree, iteration: u32) -> AgentResult {
        self.run_in(config, worktree, iteration, &self.settings.confinement)
            .await
    }

    /// Runs the agent with closer's own access (`[sandbox] mode = "none"`)
    /// and leaves what it did as it is (no commit by closer, no config
    /// rewrite): for the defences that must hold even then.
    async fn run_unconfined(
        &self,
        config: &AgentConfig,
        worktree: &Worktree,
        iteration: u32,
    ) -> AgentResult {
        self.agent_only(config, worktree, iteration, &Confinement::unconfined())
            .await
    }

    async fn run_in(
        &self,
        config: &AgentConfig,
        worktree: &Worktree,
        iteration: u32,
        confinement: &Confinement,
    ) -> AgentResult {
        let result = self
            .agent_only(config, worktree, iteration, confinement)
            .await;
        // As the engine does: the agent cannot commit (its git metadata is
        // read-only in the sandbox), closer commits what it left.
        self.sandbox
            .commit_changes(worktree, &result.message, "agent's work")
            .await
            .expect("closer commits for the agent");
        result
    }

    async fn agent_only(
        &self,
        config: &AgentConfig,
        worktree: &Worktree,
        iteration: u32,
        confinement: &Confinement,
    ) -> AgentResult {
        let request = AgentRequest {
            run_id: "run-1".into(),
            iteration,
            issue: "octo/calc#4".into(),
            prompt: format!("Fix add(). Iteration {iteration}."),
            worktree: worktree.path.clone(),
            scratch_dir: self.root.path().join("prompts"),
            home: None,
            mirror: Some(worktree.mirror.clone()),
            resume: None,
            progress: None,
            stop: None,
        };
        let passed = resolve_pass_env(config, |name| std::env::var(name).ok());
        run_agent(config, &self.base_env, &passed, &request, confinement)
            .await
            .expect("agent ran")
    }

    async fn baseline(
        &self,
        worktree: &Worktree,
        run: &str,
        config: &RepoConfig,
    ) -> Result<Baseline, BaselineError> {
        self.baseline_for(worktree, run, (config, TaskType::Bug))
            .await
    }

    /// The baseline of a run of this task type.
    async fn baseline_for(
        &self,
        worktree: &Worktree,
        run: &str,
        (config, task): (&RepoConfig, TaskType),
    ) -> Result<Baseline, BaselineError> {
        let clean = self
            .sandbox
            .checkout(worktree, run, &worktree.base_commit, Purpose::Baseline)
            .await
            .expect("baseline worktree");
        let git = self.sandbox.git();
        let result = baseline::take(git, &clean, None, (config, task), &self.settings).await;
        self.sandbox
            .remove(&clean, run)
            .await
            .expect("remove baseline worktree");
        result
    }

    async fn verify(
        &self,
        worktree: &Worktree,
        case: Case<'_>,
        state: &mut ConvergenceState,
        iteration: u32,
    ) -> IterationVerification {
        let ctx = VerifyContext {
            git: self.sandbox.git(),
            worktree,
            checkout: &worktree.path,
            home: None,
            repo: case.config,
            task: case.task,
            acceptance: case.acceptance,
            baseline: case.baseline,
            settings: &self.settings,
        };
        verify_iteration(ctx, state, iteration, CheckId(format!("check-{iteration}")))
            .await
            .expect("verification ran")
    }
}

/// What an iteration is verified against.
struct Case<'a> {
    config: &'a RepoConfig,
    task: TaskType,
    acceptance: &'a [GoalSpec],
    baseline: &'a Baseline,
}

fn case<'a>(config: &'a RepoConfig, task: TaskType, baseline: &'a Baseline) -> Case<'a> {
    Case {
        config,
        task,
        acceptance: &[],
        baseline,
    }
}

const TOKEN: &str = "ghs_0123456789abcdefTOKENtoken0123456789";

fn goal(kind: GoalKind) -> GoalSpec {
    GoalSpec {
        kind,
        required: true,
        timeout_secs: None,
    }
}

fn repo_config() -> RepoConfig {
    RepoConfig {
        dod: vec![goal(GoalKind::TestsPass {
            command: "python3 -m unittest -v".into(),
        })],
        ..RepoConfig::default()
    }
}

const FIX_ADD: &str = "sed -i 's/return a - b/return a + b/' calc.py && echo 'fix add'";

fn failing_tests(v: &IterationVerification) -> Vec<String> {
    v.failures.iter().filter_map(|f| f.test.clone()).collect()
}

#[tokio::test]
async fn a_fix_that_makes_failing_tests_pass_passes_every_goal() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-fix").await;
    let config = repo_config();
    let baseline = fx
        .baseline(&wt, "run-fix", &config)
        .await
        .expect("baseline");
    let names: Vec<_> = baseline
        .failures
        .iter()
        .filter_map(|f| f.test.as_deref())
        .collect();
    assert_eq!(names, ["test_calc.CalcTest.test_add"]);

    let agent = fx.agent("fix.sh", FIX_ADD);
    let result = fx.run(&agent, &wt, 1).await;
    assert_eq!(result.status, AgentStatus::Ok, "{result:?}");

    let mut state = ConvergenceState::default();
    let v = fx
        .verify(&wt, case(&config, TaskType::Bug, &baseline), &mut state, 1)
        .await;
    assert!(v.goals.iter().all(|g| g.passed), "{:#?}", v.goals);
    assert_eq!(v.goals[0].evidence, "exit 0");
    assert!(v.new_failures.is_empty());
    assert!(v.missing_artifacts.is_empty());
    assert_eq!(v.artifacts.commits.len(), 1);
    assert_eq!(v.artifacts.commits[0].message, "fix add");
    assert_eq!(v.artifacts.branch.as_deref(), Some("closer/issue-4"));
    let changed: Vec<_> = v
        .artifacts
        .changed_files
        .iter()
        .map(|f| (f.path.as_str(), f.added, f.deleted))
        .collect();
    assert_eq!(changed, [("calc.py", 1, 1)]);
    assert_eq!(v.decision.decision, VerdictKind::Complete);
    assert_eq!(v.decision.check_id, CheckId("check-1".into()));
    assert!(v.complete());
}

/// The setup (decision 146) is a required check of its own: failing at
/// head (twice: it is run once more) it blocks, says which command failed
/// and the commands after it are not run; failing on the base commit it
/// leaves no baseline to judge against.
#[tokio::test]
async fn a_failing_setup_blocks_completion_and_on_the_base_commit_leaves_no_baseline() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-setup").await;
    let mut config = repo_config();
    config.setup.commands = vec!["echo 'no registry' >&2; exit 4".into()];
    let refused = fx
        .baseline(&wt, "run-setup", &config)
        .await
        .expect_err("no baseline without its setup");
    let refused = refused.to_string();
    assert!(
        refused.contains("setup `echo") && refused.contains("exited with 4: no registry"),
        "{refused}"
    );

    config.setup.commands = vec!["echo try >> setup.tries; test ! -e setup.lock || exit 3".into()];
    let baseline = fx
        .baseline(&wt, "run-setup", &config)
        .await
        .expect("a baseline");
    let agent = fx.agent("fix.sh", &format!("{FIX_ADD} && touch setup.lock"));
    fx.run(&agent, &wt, 1).await;
    let mut state = ConvergenceState::default();
    let v = fx
        .verify(&wt, case(&config, TaskType::Bug, &baseline), &mut state, 1)
        .await;
    let setup = &v.goals[0];
    assert_eq!(setup.goal_type, "setup");
    assert!(!setup.passed && setup.required, "{setup:?}");
    assert!(setup.evidence.contains("exited with 3"), "{setup:?}");
    let tries = std::fs::read_to_string(wt.path.join("setup.tries")).unwrap();
    assert_eq!(tries.lines().count(), 2, "run once more after failing");
    let tests = &v.goals[1];
    assert!(
        tests.not_runnable && tests.evidence == "not run: the setup failed",
        "without its setup a command says nothing about the change: {tests:?}"
    );
    assert_ne!(v.decision.decision, VerdictKind::Complete);
    assert!(!v.complete());
}

/// What closer never commits is no artifact: a test file under build
/// output closer excludes (`tests/node_modules/`) that the repository's
/// own `.gitignore` does not name counts for no goal, and is not among the
/// artifacts, where the reproduction takes its test files from (decision
/// 146).
#[tokio::test]
async fn files_closer_never_commits_are_no_artifacts() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-excluded").await;
    let mut config = repo_config();
    config.dod.push(goal(GoalKind::TestAdded {
        pattern: "tests/**".into(),
    }));
    let baseline = fx
        .baseline(&wt, "run-excluded", &config)
        .await
        .expect("a baseline");
    let plant = format!(
        "mkdir -p tests/node_modules/dep && echo 'def test_x(): pass' > tests/node_modules/dep/test_x.py && {FIX_ADD}"
    );
    let agent = fx.agent("plant.sh", &plant);
    fx.run(&agent, &wt, 1).await;
    // The control: the file is there beside the commit, and git alone
    // (the repository's ignore rules) would list it.
    let listed = git(&wt.path, &["ls-files", "--others", "--exclude-standard"]);
    assert!(
        listed.contains("tests/node_modules/dep/test_x.py"),
        "{listed}"
    );

    let mut state = ConvergenceState::default();
    let v = fx
        .verify(&wt, case(&config, TaskType::Bug, &baseline), &mut state, 1)
        .await;
    let paths: Vec<&str> = v.artifacts.all_files().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["calc.py"]);
    let added = v
        .goals
        .iter()
        .find(|g| g.goal_type == "test_added")
        .unwrap();
    assert!(!added.passed, "{added:?}");
}

/// The reproduction's copies of the head's test files (decision 146): byte
/// for byte (a fixture that is not UTF-8 included), a name git would read as
/// pathspec magic taken literally, and only a file that is exactly the
/// commit's blob.
#[tokio::test]
async fn a_committed_file_is_copied_byte_for_byte_and_only_as_the_commit_holds_it() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-copy").await;
    let script = r"printf '\377\376\000\200 not utf-8' > tests_data.bin && echo 'x = 1' > ':(glob)test_magic.py' && echo 'y = 2' > test_later.py && echo files";
    let agent = fx.agent("files.sh", script);
    fx.run(&agent, &wt, 1).await;
    let head = fx.sandbox.head(&wt).await.unwrap();
    let dest = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(wt.path.join("tests_data.bin")).unwrap();
    // The control: read as text, as git's output is, the fixture changes.
    assert_ne!(String::from_utf8_lossy(&bytes).as_bytes(), &bytes[..]);
    for path in ["tests_data.bin", ":(glob)test_magic.py"] {
        let blob = fx.sandbox.committed_blob(&wt, &head, path).await.unwrap();
        let blob = blob.unwrap_or_else(|| panic!("{path} is in the commit"));
        let copied = fx
            .sandbox
            .copy_committed(&wt, path, &blob, dest.path())
            .await;
        assert!(copied.unwrap(), "{path}");
        assert_eq!(
            std::fs::read(dest.path().join(path)).unwrap(),
            std::fs::read(wt.path.join(path)).unwrap(),
            "{path}"
        );
    }
    let later = fx.sandbox.committed_blob(&wt, &head, "test_later.py").await;
    let later = later.unwrap().expect("test_later.py is in the commit");
    std::fs::write(wt.path.join("test_later.py"), "y = 3\n").unwrap();
    let copied = fx
        .sandbox
        .copy_committed(&wt, "test_later.py", &later, dest.path())
        .await;
    assert!(
        !copied.unwrap(),
        "a file changed after the commit is not the commit's"
    );
    assert!(!dest.path().join("test_later.py").exists());
    for absent in ["missing.py", "../calc.py", "tests_data.bin/x"] {
        let blob = fx.sandbox.committed_blob(&wt, &head, absent).await.unwrap();
        assert_eq!(blob, None, "{absent}");
    }
}

#[tokio::test]
async fn breaking_a_test_that_passed_at_baseline_is_a_new_failure() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-break").await;
    let config = repo_config();
    let baseline = fx
        .baseline(&wt, "run-break", &config)
        .await
        .expect("baseline");
    let agent = fx.agent(
        "break.sh",
        &format!("{FIX_ADD} && sed -i 's/return a \\* b/return a ** b/' calc.py"),
    );
    fx.run(&agent, &wt, 1).await;
    let mut state = ConvergenceState::default();
    let v = fx
        .verify(&wt, case(&config, TaskType::Bug, &baseline), &mut state, 1)
        .await;
    let new: Vec<_> = v
        .new_failures
        .iter()
        .filter_map(|f| f.test.as_deref())
        .collect();
    assert_eq!(new, ["test_calc.CalcTest.test_mul"]);
    assert_eq!(v.decision.decision, VerdictKind::Incomplete);
    assert!(
        v.decision
            .reasons
            .iter()
            .any(|r| r.contains("1 new failure")),
        "{:?}",
        v.decision.reasons
    );
    assert!(
        v.decision
            .fingerprints
            .contains(&v.new_failures[0].fingerprint)
    );
}

/// Strict by default: a test that fails at the base commit and still fails
/// blocks completion (it is very often the bug itself), named as failing
/// since base with how to tolerate it; with `baseline.tolerate:
/// preexisting` it is tolerated — and still listed.
#[tokio::test]
async fn a_test_already_failing_at_baseline_blocks_unless_the_repository_tolerates_it() {
    let fx = Fixture::new(true);
    let wt = fx.prepare("run-legacy").await;
    let config = repo_config();
    let baseline = fx
        .baseline(&wt, "run-legacy", &config)
        .await
        .expect("baseline");
    assert_eq!(baseline.failures.len(), 2, "{:#?}", baseline.failures);
    fx.run(&fx.agent("fix.sh", FIX_ADD), &wt, 1).await;
    let mut state = ConvergenceState::default();
    let v = fx
        .verify(&wt, case(&config, TaskType::Bug, &baseline), &mut state, 1)
        .await;
    assert_eq!(failing_tests(&v), ["test_calc.CalcTest.test_legacy"]);
    assert!(!v.goals[0].passed, "the command still fails");
    assert!(!v.goals[0].tolerated && v.goals[0].blocks());
    assert!(v.new_failures.is_empty(), "{:#?}", v.new_failures);
    assert_eq!(v.since_base.len(), 1, "{:#?}", v.since_base);
    assert_eq!(v.decision.decision, VerdictKind::Incomplete);
    let reason = v
        .decision
        .reasons
        .iter()
        .find(|r| r.starts_with("failing since base"))
        .expect("a reason naming the failure");
    assert!(
        reason.contains("test_legacy") && reason.contains("tolerate: preexisting"),
        "{reason}"
    );
    assert_eq!(
        v.fixed_since_base
            .iter()
            .filter_map(|f| f.test.clone())
            .collect::<Vec<_>>(),
        ["test_calc.CalcTest.test_add"]
    );

    let tolerant = RepoConfig {
        baseline: BaselineConfig {
            tolerate: Tolerate::Preexisting,
            ..BaselineConfig::default()
        },
        ..repo_config()
    };
    let mut state = ConvergenceState::default();
    let v = fx
        .verify(
            &wt,
            case(&tolerant, TaskType::Bug, &baseline),
            &mut state,
            2,
        )
        .await;
    assert!(v.goals[0].tolerated && !v.goals[0].blocks());
    assert_eq!(v.tolerated.len(), 1, "{:#?}", v.tolerated);
    assert_eq!(
        v.decision.decision,
        VerdictKind::Complete,
        "{:?}",
        v.decision.reasons
    );
}

#[tokio::test]
async fn touching_a_file_outside_allowed_paths_is_a_scope_violation() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-scope").await;
    let mut config = repo_config();
    config.convergence.allowed_paths = vec!["calc.py".into(), "test_*.py".into()];
    let baseline = fx
        .baseline(&wt, "run-scope", &config)
        .await
        .expect("baseline");
    fx.run(
        &fx.agent(
            "wander.sh",
            &format!("{FIX_ADD} && echo 'more docs' >> README.md"),
        ),
        &wt,
        1,
    )
    .await;
    let mut state = ConvergenceState::default();
    let v = fx
        .verify(&wt, case(&config, TaskType::Bug, &baseline), &mut state, 1)
        .await;
    assert!(v.goals.iter().all(|g| g.passed));
    assert_eq!(v.scope.out_of_scope, ["README.md"]);
    assert!(v.scope.violation());
    assert_eq!(v.decision.decision, VerdictKind::Incomplete);
    assert!(
        v.decision
            .reasons
            .iter()
            .any(|r| r.contains("scope violation: README.md"))
    );
    assert_eq!(
        v.decision.fingerprints.len(),
        1,
        "the violation has a fingerprint of its own"
    );
}

#[tokio::test]
async fn an_agent_that_changes_nothing_goes_to_stage_two_then_fails_with_a_diagnosis() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-idle").await;
    let config = repo_config();
    let baseline = fx
        .baseline(&wt, "run-idle", &config)
        .await
        .expect("baseline");
    let idle = fx.agent("idle.sh", "echo 'I fixed everything.'");
    let db = TestDb::new("verification_idle").await;
    let store = db.store().await;
    stored::save_baseline(store.pool(), "run-idle", &baseline, 1)
        .await
        .expect("save");

    let mut state = ConvergenceState::default();
    let mut decisions = Vec::new();
    for iteration in 1..=3 {
        let result = fx.run(&idle, &wt, iteration).await;
        assert_eq!(result.message, "I fixed everything.");
        let v = fx
            .verify(
                &wt,
                case(&config, TaskType::Feature, &baseline),
                &mut state,
                iteration,
            )
            .await;
        assert_eq!(
            v.missing_artifacts,
            [ArtifactKind::Commit, ArtifactKind::Branch]
        );
        stored::save_iteration(store.pool(), "run-idle", &v, &state, i64::from(iteration))
            .await
            .expect("save");
        decisions.push(v.decision);
    }
    let stages: Vec<_> = decisions.iter().map(|d| (d.decision, d.stage)).collect();
    assert_eq!(
        stages,
        [
            (VerdictKind::Incomplete, Stage::Normal),
            (VerdictKind::Incomplete, Stage::MinimalFix),
            (VerdictKind::Failed, Stage::Stopped),
        ]
    );
    assert!(decisions[1].minimal_fix.is_some());
    let diagnosis = decisions[2].diagnosis.clone().expect("diagnosis");
    assert!(
        diagnosis.repeated.iter().all(|r| r.count == 3),
        "{diagnosis:#?}"
    );
    assert!(
        diagnosis
            .repeated
            .iter()
            .any(|r| r.summary.contains("missing commit"))
    );
    assert_eq!(
        diagnosis.stages.iter().map(|s| s.to).collect::<Vec<_>>(),
        [Stage::MinimalFix, Stage::Stopped]
    );
    assert!(
        diagnosis.stages[0].reason.contains("no change to the diff"),
        "{:?}",
        diagnosis.stages
    );

    let diagnostics = stored::diagnostics(store.pool(), "run-idle")
        .await
        .expect("diagnostics");
    assert_eq!(
        diagnostics["fingerprint_history"].as_array().map(Vec::len),
        Some(3)
    );
    assert_eq!(diagnostics["completion_reasons"][2]["decision"], "failed");
    assert_eq!(
        diagnostics["baseline_failures"][0]["test"],
        "test_calc.CalcTest.test_add"
    );
    let latest = stored::latest_decision(store.pool(), "run-idle")
        .await
        .expect("read")
        .expect("stored");
    assert_eq!(latest.check_id, CheckId("check-3".into()));
}

#[tokio::test]
async fn the_same_failing_test_with_timing_noise_keeps_its_fingerprint() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-noise").await;
    let config = repo_config();
    // The test passes at baseline, then the agent breaks it and keeps
    // touching an unrelated comment: the diff changes, the failure does not.
    let mut baseline_config = config.clone();
    baseline_config.dod.clear();
    let baseline = fx
        .baseline(&wt, "run-noise", &baseline_config)
        .await
        .expect("baseline");
    let fiddle = fx.agent(
        "fiddle.sh",
        "echo \"# attempt $CLOSER_ITERATION\" >> calc.py && echo \"attempt $CLOSER_ITERATION\"",
    );
    let mut state = ConvergenceState::default();
    let mut fingerprints = Vec::new();
    let mut errors = Vec::new();
    for iteration in 1..=2 {
        fx.run(&fiddle, &wt, iteration).await;
        let v = fx
            .verify(
                &wt,
                case(&config, TaskType::Bug, &baseline),
                &mut state,
                iteration,
            )
            .await;
        assert_eq!(failing_tests(&v), ["test_calc.CalcTest.test_add"]);
        fingerprints.push(v.new_failures[0].fingerprint.clone());
        errors.push(v.new_failures[0].error.clone());
        if iteration == 2 {
            assert_eq!(
                v.decision.stage,
                Stage::MinimalFix,
                "{:?}",
                state.stage_changes
            );
            assert!(
                state.stage_changes[0].reason.contains("same failure set"),
                "{:?}",
                state.stage_changes
            );
        }
    }
    assert_eq!(fingerprints[0], fingerprints[1]);
    assert!(
        errors[0].contains("<N>") && errors[0].contains("<TMP>"),
        "{}",
        errors[0]
    );
    assert_ne!(state.history[0].diff_hash, state.history[1].diff_hash);
}

#[tokio::test]
async fn a_hanging_agent_is_killed_at_the_timeout_with_its_children() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-hang").await;
    let marker = unique_sleep();
    let mut agent = fx.agent("hang.sh", &format!("sleep {marker} &\nsleep 300"));
    agent.timeout_secs = 1;
    let started = std::time::Instant::now();
    let result = fx.run(&agent, &wt, 1).await;
    assert!(result.timed_out);
    assert_eq!(result.status, AgentStatus::Error);
    assert!(
        result
            .error
            .as_deref()
            .is_some_and(|e| e.contains("timed out"))
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    // SIGKILL is delivered asynchronously: on a loaded machine the child may
    // take a moment to go; it must be gone well before its own 300 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    let survivor = || process_with_argument(&marker).filter(|pid| alive(*pid));
    while survivor().is_some() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(survivor(), None, "the agent's child survived");
}

#[tokio::test]
async fn an_agent_printing_50_mb_is_capped() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-flood").await;
    let agent = fx.agent("flood.sh", "head -c 52428800 /dev/zero | tr '\\0' 'x'");
    let result = fx.run(&agent, &wt, 1).await;
    assert_eq!(result.status, AgentStatus::Ok, "{:?}", result.error);
    assert_eq!(result.stdout_dropped_bytes, 50 * 1024 * 1024 - 1024 * 1024);
    // Its first and last half of the cap, a line break between them.
    assert_eq!(result.message.len(), 1024 * 1024 + 1);
}

/// The probe below, run alone with the secrets in its environment.
const ENV_PROBE: &str = "verification::agent_environment_probe";

#[test]
fn the_agent_finds_no_secret_in_its_environment() {
    // The secrets go into the environment of a child copy of this test
    // binary, never into this process's, which other tests share.
    crate::support::alone::run(
        ENV_PROBE,
        &[
            ("GITHUB_TOKEN", TOKEN),
            ("GITHUB_PRIVATE_KEY_PATH", "/etc/closer/app.pem"),
            ("GITHUB_WEBHOOK_SECRET", "whsec-do-not-leak"),
            ("MY_AGENT_API_KEY", "agent-key-1"),
        ],
    );
}

/// Runs only in the child started above (it returns at once elsewhere).
#[tokio::test]
async fn agent_environment_probe() {
    if !crate::support::alone::is_the_child_for(ENV_PROBE) {
        return;
    }
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-env").await;
    let dump = fx.scratch().join("env.txt");
    let mut agent = fx.agent(
        "env.sh",
        &format!(
            "env > {}\necho \"${{GITHUB_TOKEN:-none}} ${{GITHUB_WEBHOOK_SECRET:-none}}\"",
            dump.display()
        ),
    );
    agent.pass_env = vec![
        "MY_AGENT_API_KEY".into(),
        "GITHUB_TOKEN".into(),
        "GITHUB_WEBHOOK_SECRET".into(),
    ];
    let result = fx.run(&agent, &wt, 2).await;
    assert_eq!(result.message, "none none");
    let env: BTreeMap<String, String> = std::fs::read_to_string(&dump)
        .expect("env dump")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let names: Vec<&str> = env
        .keys()
        .map(String::as_str)
        .filter(|k| !matches!(*k, "PWD" | "SHLVL" | "_" | "OLDPWD"))
        .collect();
    assert_eq!(
        names,
        [
            "CLOSER_ISSUE",
            "CLOSER_ITERATION",
            "CLOSER_PROMPT_FILE",
            "CLOSER_RUN_ID",
            "HOME",
            "LANG",
            "MY_AGENT_API_KEY",
            "PATH"
        ]
    );
    assert_eq!(env["MY_AGENT_API_KEY"], "agent-key-1");
    assert!(
        !std::fs::read_to_string(&dump)
            .expect("dump")
            .contains(TOKEN)
    );
    crate::support::alone::finished(ENV_PROBE);
}

#[tokio::test]
async fn the_command_contract_prompt_on_stdin_and_in_a_file_json_on_stdout() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-contract").await;
    let agent = fx.agent(
        "contract.sh",
        "stdin=$(cat)\nfile=$(cat \"$CLOSER_PROMPT_FILE\")\n\
         printf '{\"message\": \"ok\", \"stdin\": \"%s\", \"file\": \"%s\", \"iteration\": \"%s\", \"issue\": \"%s\", \"cwd\": \"%s\"}' \
         \"$stdin\" \"$file\" \"$CLOSER_ITERATION\" \"$CLOSER_ISSUE\" \"$(pwd)\"",
    );
    let result = fx.run(&agent, &wt, 3).await;
    assert_eq!(result.status, AgentStatus::Ok);
    assert_eq!(result.message, "ok");
    assert_eq!(result.structured["stdin"], "Fix add(). Iteration 3.");
    assert_eq!(result.structured["file"], "Fix add(). Iteration 3.");
    assert_eq!(result.structured["iteration"], "3");
    assert_eq!(result.structured["issue"], "octo/calc#4");
    assert_eq!(result.structured["cwd"], wt.path.display().to_string());
    let failing = fx.agent("fail.sh", "echo 'gave up'; exit 3");
    let result = fx.run(&failing, &wt, 4).await;
    assert_eq!(result.status, AgentStatus::Error);
    assert_eq!(result.exit_code, Some(3));
    assert_eq!(
        result.structured,
        serde_json::json!({ "message": "gave up" })
    );
}

#[tokio::test]
async fn tool_adapters_run_stand_ins_printing_the_tools_output_shapes() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-tools").await;
    let args = fx.scratch().join("args.txt");
    let cases = [
        (
            AdapterKind::ClaudeCode,
            r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":1200,"num_turns":2,"result":"Fixed add.","session_id":"s-1","total_cost_usd":0.01}"#,
            "-p --output-format stream-json --verbose --permission-mode bypassPermissions --setting-sources user",
            "Fixed add.",
        ),
        (
            AdapterKind::Codex,
            "{\"type\":\"thread.started\",\"thread_id\":\"t-1\"}\n{\"type\":\"turn.started\"}\n{\"type\":\"item.completed\",\"item\":{\"id\":\"item_0\",\"type\":\"agent_message\",\"text\":\"Fixed add.\"}}\n{\"type\":\"turn.completed\",\"usage\":{\"input_tokens\":10,\"cached_input_tokens\":0,\"output_tokens\":5}}",
            "exec --json --skip-git-repo-check -c sandbox_mode=\"workspace-write\" -c approval_policy=\"never\" -c analytics.enabled=false -c features.plugins=false -",
            "Fixed add.",
        ),
        (
            AdapterKind::Opencode,
            "{\"type\":\"step_start\",\"timestamp\":1,\"sessionID\":\"ses_1\",\"part\":{\"type\":\"step-start\"}}\n{\"type\":\"text\",\"timestamp\":2,\"sessionID\":\"ses_1\",\"part\":{\"type\":\"text\",\"text\":\"Fixed add.\"}}\n{\"type\":\"step_finish\",\"timestamp\":3,\"sessionID\":\"ses_1\",\"part\":{\"type\":\"step-finish\",\"cost\":0,\"tokens\":{\"input\":1,\"output\":1}}}",
            "run --format json",
            "Fixed add.",
        ),
    ];
    for (kind, output, flags, message) in cases {
        let stand_in = fx.script(
            kind.as_str(),
            &format!(
                "echo \"$@\" > {}\ncat > /dev/null\ncat <<'OUT'\n{output}\nOUT",
                args.display()
            ),
        );
        let config = AgentConfig {
            adapter: kind,
            command: vec![stand_in.display().to_string()],
            timeout_secs: 10,
            pass_env: Vec::new(),
            max_output_bytes: 1024 * 1024,
            config_files: Default::default(),
            keep_home_secs: 0,
            resume: true,
            env: Default::default(),
        };
        let result = fx.run(&config, &wt, 1).await;
        assert_eq!(result.status, AgentStatus::Ok, "{kind:?}: {result:?}");
        assert_eq!(result.message, message, "{kind:?}");
        assert_eq!(
            std::fs::read_to_string(&args).expect("args").trim(),
            flags,
            "{kind:?}"
        );
    }
}

#[tokio::test]
async fn git_hooks_the_agent_plants_never_run_when_closer_reads_the_worktree() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-plant").await;
    let fsmonitor = fx.scratch().join("fsmonitor-ran");
    let textconv = fx.scratch().join("textconv-ran");
    // The agent changes a file and plants an fsmonitor hook and a textconv
    // driver: programs git would run for whoever reads the worktree next.
    let script = format!(
        "printf '#!/bin/sh\\ntouch {f}\\n' > {h} && chmod +x {h}\n\
         git config core.fsmonitor {h}\n\
         git config diff.evil.textconv 'sh -c \"touch {t}; cat \\\"\\$0\\\"\"'\n\
         echo '*.py diff=evil' > .gitattributes\n\
         echo '# changed' >> calc.py",
        f = fsmonitor.display(),
        t = textconv.display(),
        h = fx.scratch().join("fsmonitor.sh").display()
    );
    // In the sandbox the mirror is read-only: the plant fails outright.
    fx.run(&fx.agent("plant.sh", &script), &wt, 1).await;
    let planted = std::fs::read_to_string(wt.mirror.join("config")).unwrap();
    assert!(!planted.contains("fsmonitor"), "{planted}");
    // Unconfined (`mode = "none"`) it succeeds, and closer's git must still
    // not run it.
    fx.run_unconfined(&fx.agent("plant.sh", &script), &wt, 1)
        .await;
    let config = repo_config();
    let baseline = Baseline::empty(&wt.base_commit);
    let mut state = ConvergenceState::default();
    fx.verify(&wt, case(&config, TaskType::Bug, &baseline), &mut state, 1)
        .await;
    assert!(!fsmonitor.exists(), "closer ran the agent's fsmonitor hook");
    assert!(!textconv.exists(), "closer ran the agent's textconv driver");

    // The control: a plain `git diff`, as closer ran it before, runs both.
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "diff",
            &wt.base_commit,
            "--",
        ])
        .current_dir(&wt.path)
        .output_apart()
        .expect("git runs");
    assert!(out.status.success(), "{out:?}");
    assert!(
        fsmonitor.exists() && textconv.exists(),
        "the probe would not have fired"
    );
}

/// A repository nested in the worktree keeps a config and attributes of
/// its own, which closer's `-c` flags and `GIT_ATTR_SOURCE` do not reach:
/// the agent, confined, makes one whose clean filter runs a program, named
/// by its `.gitattributes` (`sub`) or by its `.git/info/attributes`
/// (`sub2`). Git runs `status` inside a nested repository whenever it looks
/// at the outer one, so closer's own git would run the agent's program
/// outside the sandbox; it must not.
#[tokio::test]
async fn a_nested_repositorys_filter_never_runs_when_closer_reads_the_worktree() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-nested").await;
    let fired = fx.scratch().join("filter-ran");
    let nest = |dir: &str, attributes: &str| {
        format!(
            "git init -q {dir} && cd {dir} && echo a > f && git add f\n\
             git -c user.name=a -c user.email=a@b commit -qm s\n\
             git config filter.x.clean 'sh -c \"touch {m}; cat\"'\n\
             mkdir -p .git/info && echo '* filter=x' > {attributes} && cd ..\n",
            m = fired.display(),
        )
    };
    let script = format!(
        "{}{}echo '# changed' >> calc.py",
        nest("sub", ".gitattributes"),
        nest("sub2", ".git/info/attributes")
    );
    fx.run(&fx.agent("nest.sh", &script), &wt, 1).await;
    let touch = || {
        for f in ["sub/f", "sub2/f"] {
            if let Ok(file) = std::fs::File::options().write(true).open(wt.path.join(f)) {
                let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
                file.set_modified(later).unwrap();
            }
        }
    };
    touch();
    let config = repo_config();
    let baseline = Baseline::empty(&wt.base_commit);
    let mut state = ConvergenceState::default();
    fx.verify(&wt, case(&config, TaskType::Bug, &baseline), &mut state, 1)
        .await;
    fx.verify(&wt, case(&config, TaskType::Bug, &baseline), &mut state, 2)
        .await;
    assert!(!fired.exists(), "closer ran a nested repository's filter");
    assert!(wt.path.join("sub2/f").exists(), "the plant worked");
    assert!(!wt.path.join("sub/.git").exists() && !wt.path.join("sub2/.git").exists());

    // The control, in a repository of its own: the same repositories
    // nested and recorded, and git with closer's flags and its attribute
    // source but without taking them apart runs the filter (`sub2`'s
    // `.git/info/attributes` is read whatever the attribute source).
    let control = fx.scratch().join("control");
    std::fs::create_dir_all(&control).unwrap();
    let setup = format!(
        "git init -q . && {script}\n\
         git add -A && git -c user.name=a -c user.email=a@b commit -qm nest\n\
         sleep 1.1 && touch sub/f sub2/f"
    );
    let planted = std::process::Command::new("sh")
        .args(["-c", &setup])
        .current_dir(&control)
        .output_apart()
        .unwrap();
    assert!(planted.status.success(), "{planted:?}");
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "core.hooksPath=/dev/null",
            "-c",
            "core.fsmonitor=false",
        ])
        .args(["status", "--porcelain"])
        .env(
            "GIT_ATTR_SOURCE",
            "4b825dc642cb6eb9a060e54bf8d69288fbee4904",
        )
        .current_dir(&control)
        .output_apart()
        .expect("git runs");
    assert!(out.status.success(), "{out:?}");
    assert!(fired.exists(), "the probe would not have fired");
}

/// A nested repository whose `.git` holds directories nested 30,000 deep
/// (relative steps, so no path is ever too long): closer takes it apart
/// before it reads the worktree, and the removal must not recurse. Before
/// (decision 210), std's `remove_dir_all` overflowed the stack here and
/// aborted the whole process, this test binary with it. The control is
/// `agent::sandbox::remove::tests::a_tree_deeper_than_the_stack_allows_is_removed`.
#[tokio::test]
async fn a_nested_repository_nested_30000_deep_is_taken_apart() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-deep").await;
    let script = "git init -q deep && cd deep/.git && python3 -c '\n\
         import os\n\
         fd = os.open(\".\", os.O_RDONLY)\n\
         for _ in range(30000):\n    \
             os.mkdir(\"d\", dir_fd=fd)\n    \
             n = os.open(\"d\", os.O_RDONLY, dir_fd=fd); os.close(fd); fd = n\n' && cd ../..\n\
         [ -d deep/.git/d/d/d ] && echo '# changed' >> calc.py && echo planted";
    // closer commits what the agent left, and takes the nested repository
    // apart first.
    let result = fx.run(&fx.agent("deep.sh", script), &wt, 1).await;
    assert!(result.log_excerpt.contains("planted"), "{result:?}");
    assert!(!wt.path.join("deep/.git").exists());
    let config = repo_config();
    let baseline = Baseline::empty(&wt.base_commit);
    let mut state = ConvergenceState::default();
    fx.verify(&wt, case(&config, TaskType::Bug, &baseline), &mut state, 1)
        .await;
    assert!(!wt.path.join("deep/.git").exists());
}

/// A process the agent left running (under Landlock below ABI 6 it can
/// kill its reaper and outlive its iteration) puts a nested repository
/// back as fast as closer takes it apart: a gitlink `sub` in the worktree's
/// index, and a `sub/.git` whose clean filter runs a program. Whenever
/// closer reads the worktree (the artifacts' diffs, the push check's
/// status) the repository may be back, so git must not go into it at all.
/// Before (decision 201), `git status` and `git diff <base>` ran `status`
/// inside it, and the filter, in closer's unconfined git.
#[tokio::test]
async fn a_nested_repository_put_back_after_the_take_apart_is_never_entered() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-nested-back").await;
    let fired = fx.scratch().join("filter-ran");
    let template = fx.scratch().join("template");
    let sh = |dir: &std::path::Path, script: &str| {
        let out = std::process::Command::new("sh")
            .args(["-c", script])
            .current_dir(dir)
            .output_apart()
            .expect("sh runs");
        assert!(out.status.success(), "{script}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    std::fs::create_dir_all(&template).unwrap();
    let head = sh(
        &template,
        &format!(
            "git init -q . && echo a > f && git add f && \
             git -c user.name=a -c user.email=a@b commit -qm s && \
             git config filter.x.clean 'sh -c \"touch {}; cat\"' && \
             mkdir -p .git/info && echo '* filter=x' > .git/info/attributes && \
             git rev-parse HEAD",
            fired.display()
        ),
    );
    std::fs::create_dir_all(wt.path.join("sub")).unwrap();
    std::fs::write(wt.path.join("sub/f"), "a\n").unwrap();
    let gitlink = format!("160000,{head},sub");
    git(
        &wt.path,
        &["update-index", "--add", "--cacheinfo", &gitlink],
    );
    // The agent's process: `sub/.git` back at once whenever it is gone,
    // and `sub/f` newer than its index says, so git would look inside.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let racer = {
        let (stop, sub, template) = (stop.clone(), wt.path.join("sub"), template.clone());
        std::thread::spawn(move || {
            let mut rounds = 0u32;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                if !sub.join(".git").exists() {
                    let fresh = sub.join(format!(".git-{rounds}"));
                    let copied = std::process::Command::new("cp")
                        .arg("-a")
                        .arg(template.join(".git"))
                        .arg(&fresh)
                        .status();
                    if copied.is_ok_and(|s| s.success()) {
                        let _ = std::fs::rename(&fresh, sub.join(".git"));
                    }
                    rounds += 1;
                }
                if let Ok(file) = std::fs::File::options().write(true).open(sub.join("f")) {
                    let later = std::time::SystemTime::now() + Duration::from_secs(5);
                    let _ = file.set_modified(later);
                }
                std::thread::yield_now();
            }
            rounds
        })
    };
    let git = fx.sandbox.git();
    for _ in 0..25 {
        // Errors are fine (the racer's half-copied repository): the filter
        // is what must never run.
        let _ = closer::engine::artifacts::collect(git, &wt).await;
        let _ = fx.sandbox.push_refusal(&wt, Some(&wt.base_commit)).await;
        let _ = fx.sandbox.commit_changes(&wt, "a change", "a change").await;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let rounds = racer.join().unwrap();
    assert!(
        rounds >= 10,
        "the repository was put back only {rounds} times"
    );
    assert!(
        !fired.exists(),
        "closer's git went into a nested repository"
    );
}

/// A submodule shows in the artifacts, and when the agent removes it (its
/// directory gone) closer's commit records the removal, though closer's
/// `add -A` leaves gitlinks out and its diffs keep out of submodules
/// (decision 201). Control: with `--ignore-submodules=all` (the first
/// version) the artifacts do not show the submodule.
#[tokio::test]
async fn a_submodule_the_agent_removed_is_committed_as_removed() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-submodule-gone").await;
    // The branch has a submodule `vendor` (a gitlink; its directory, as a
    // checkout without submodules leaves it, empty).
    let base = wt.base_commit.clone();
    let gitlink = format!("160000,{base},vendor");
    git(
        &wt.path,
        &["update-index", "--add", "--cacheinfo", &gitlink],
    );
    git(&wt.path, &["commit", "-qm", "vendor"]);
    std::fs::create_dir_all(wt.path.join("vendor")).unwrap();
    // The artifacts show the gitlink, added since the base.
    let collected = closer::engine::artifacts::collect(fx.sandbox.git(), &wt)
        .await
        .unwrap();
    let changed = &collected.artifacts.changed_files;
    assert!(changed.iter().any(|f| f.path == "vendor"), "{changed:?}");
    // Left as it is, nothing changes.
    let none = fx
        .sandbox
        .commit_changes(&wt, "nothing", "nothing")
        .await
        .unwrap();
    assert_eq!(none, None);
    // The agent removes it.
    std::fs::remove_dir(wt.path.join("vendor")).unwrap();
    let commit = fx
        .sandbox
        .commit_changes(&wt, "Drop vendor", "x")
        .await
        .unwrap();
    assert!(commit.is_some(), "the removal was not committed");
    let tree = git(&wt.path, &["ls-tree", "--name-only", "HEAD"]);
    assert!(!tree.lines().any(|l| l == "vendor"), "{tree}");
}

#[tokio::test]
async fn the_base_commit_closer_stored_wins_over_a_base_ref_the_agent_moved() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-moved").await;
    let base = wt.base_commit.clone();
    let script =
        format!("{FIX_ADD}\ngit commit -qam fix\ngit update-ref refs/closer/base/run-moved HEAD");
    // Unconfined: in the sandbox the mirror is read-only and the ref cannot
    // move at all (`confinement::the_agent_cannot_write_outside_its_worktree_and_home`).
    fx.run_unconfined(&fx.agent("move.sh", &script), &wt, 1)
        .await;
    let source = fx.source();
    let again = fx
        .sandbox
        .prepare(&source, 4, "run-moved", Some(&base))
        .await
        .expect("worktree");
    assert_eq!(again.base_commit, base);
    // The control: the ref itself was moved, and read alone it would
    // hide the agent's commit from every check measured against the base.
    let moved = fx
        .sandbox
        .prepare(&source, 4, "run-moved", None)
        .await
        .expect("worktree");
    assert_ne!(moved.base_commit, base, "the probe did not move the ref");
}

#[tokio::test]
async fn a_tool_that_lingers_after_its_final_report_is_stopped_and_the_run_counts() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-linger").await;
    let marker = unique_sleep();
    // Claude Code's shape: the result, then the process does not exit.
    let stand_in = fx.script(
        "claude-linger",
        &format!(
            "cat > /dev/null\necho '{{\"type\":\"result\",\"subtype\":\"success\",\"is_error\":false,\"result\":\"Fixed add.\",\"session_id\":\"s-1\"}}'\n\
             exec sleep {marker}\n"
        ),
    );
    let config = AgentConfig {
        adapter: AdapterKind::ClaudeCode,
        command: vec![stand_in.display().to_string()],
        timeout_secs: 120,
        pass_env: Vec::new(),
        max_output_bytes: 1024 * 1024,
        config_files: Default::default(),
        keep_home_secs: 0,
        resume: true,
        env: Default::default(),
    };
    let started = std::time::Instant::now();
    let result = fx.run(&config, &wt, 1).await;
    assert_eq!(result.status, AgentStatus::Ok, "{result:?}");
    assert_eq!(result.message, "Fixed add.");
    let waited = started.elapsed();
    assert!(
        waited >= closer::agent::adapter::FINISH_GRACE && waited < Duration::from_secs(60),
        "{waited:?}"
    );
    assert_eq!(
        process_with_argument(&marker).filter(|pid| alive(*pid)),
        None,
        "the lingering tool was left running"
    );
}

#[tokio::test]
async fn the_token_never_reaches_the_worktree_the_mirror_or_the_agent() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-token").await;
    let dump = fx.scratch().join("env.txt");
    fx.run(
        &fx.agent(
            "fix-env.sh",
            &format!("env > {}\n{FIX_ADD}", dump.display()),
        ),
        &wt,
        1,
    )
    .await;
    // Fetch again (a second run on the same mirror) and push.
    let other = fx.prepare_issue("run-token-2", 5).await;
    fx.sandbox
        .push(&wt, &fx.source(), None)
        .await
        .expect("push");
    let head = git(&wt.path, &["rev-parse", "HEAD"]);
    assert_eq!(
        fx.origin.branch_head("closer/issue-4").as_deref(),
        Some(head.trim())
    );
    let leaks = files_containing(fx.root.path(), TOKEN);
    assert!(leaks.is_empty(), "token found in {leaks:?}");
    let config = std::fs::read_to_string(wt.mirror.join("config")).expect("mirror config");
    assert!(
        !config.contains("extraHeader") && !config.contains("[remote"),
        "{config}"
    );
    assert!(
        !std::fs::read_to_string(&dump)
            .expect("env")
            .contains("GIT_CONFIG")
    );
    fx.sandbox
        .remove(&other, "run-token-2")
        .await
        .expect("remove");
}

#[tokio::test]
async fn what_an_agent_writes_into_the_repository_config_takes_no_part_in_the_push() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-tamper").await;
    let hook_ran = fx.scratch().join("hook-ran.txt");
    let script = format!(
        "{FIX_ADD}\ngit commit -qam fix\n\
         common=$(git rev-parse --git-common-dir)\n\
         printf '#!/bin/sh\\nenv > {hook}\\n' > \"$common/hooks/pre-push\"\n\
         chmod +x \"$common/hooks/pre-push\"\n\
         git config url.file:///nonexistent/.insteadOf {url}\n\
         git config http.proxy http://127.0.0.1:9\n\
         git config core.hooksPath \"$common/hooks\"",
        hook = hook_ran.display(),
        url = fx.origin.url
    );
    // Unconfined (`mode = "none"`): in the sandbox the mirror is read-only
    // and none of this can be written at all.
    let result = fx
        .run_unconfined(&fx.agent("tamper.sh", &script), &wt, 1)
        .await;
    assert_eq!(result.status, AgentStatus::Ok, "{result:?}");
    let tampered = std::fs::read_to_string(wt.mirror.join("config")).expect("config");
    assert!(
        tampered.contains("insteadOf"),
        "the agent did write: {tampered}"
    );

    fx.sandbox
        .push(&wt, &fx.source(), None)
        .await
        .expect("push");
    let head = git(&wt.path, &["rev-parse", "HEAD"]);
    assert_eq!(
        fx.origin.branch_head("closer/issue-4").as_deref(),
        Some(head.trim())
    );
    assert!(!hook_ran.exists(), "a hook ran during the push");
    let config = std::fs::read_to_string(wt.mirror.join("config")).expect("config");
    assert!(
        !config.contains("insteadOf") && !config.contains("proxy") && !config.contains("hooksPath"),
        "{config}"
    );
}

#[tokio::test]
async fn an_agent_cannot_fake_commits_by_pointing_the_worktree_elsewhere() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-fake").await;
    let script = "base=$(git rev-parse HEAD)\n\
         fake=$(mktemp -d -p \"$HOME\")\n\
         git clone -q \"$(git rev-parse --path-format=absolute --git-common-dir)\" \"$fake/r\" 2>/dev/null\n\
         git -C \"$fake/r\" checkout -q -b closer/issue-4 \"$base\"\n\
         git -C \"$fake/r\" -c user.name=x -c user.email=y commit -q --allow-empty -m cheat\n\
         echo \"gitdir: $fake/r/.git\" > .git\n\
         git log --format=%s -1";
    let result = fx.run(&fx.agent("fake.sh", script), &wt, 1).await;
    assert_eq!(
        result.message, "cheat",
        "the agent's own view is the fake repository"
    );
    let config = repo_config();
    let baseline = Baseline::empty(&wt.base_commit);
    let mut state = ConvergenceState::default();
    let v = fx
        .verify(&wt, case(&config, TaskType::Bug, &baseline), &mut state, 1)
        .await;
    assert!(v.artifacts.commits.is_empty(), "{:?}", v.artifacts.commits);
    assert!(v.missing_artifacts.contains(&ArtifactKind::Commit));
}

#[tokio::test]
async fn over_http_the_token_reaches_git_through_its_credential_pipe_only() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    // As GitHub does: the first request is refused with a Basic challenge,
    // the second carries the credentials. While the first is held, the
    // environment of every git process is read, as a process of the same
    // user watching /proc would.
    let server = tokio::spawn(async move {
        let mut requests = Vec::new();
        let mut environ_seen = Vec::new();
        for answer in [
            "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"GitHub\"\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        ] {
            let (mut socket, _) = listener.accept().await.expect("accept");
            let mut buf = vec![0u8; 16 * 1024];
            let n = socket.read(&mut buf).await.expect("read");
            requests.push(String::from_utf8_lossy(&buf[..n]).into_owned());
            if environ_seen.is_empty() {
                environ_seen = git_environments();
            }
            let _ = socket.write_all(answer.as_bytes()).await;
        }
        (requests, environ_seen)
    });
    let fx = Fixture::new(false);
    let source = RepoSource {
        url: format!("http://127.0.0.1:{port}/octo/calc.git"),
        token: Some(SecretString::from(TOKEN)),
        default_branch: Some("main".into()),
        repository_id: None,
    };
    let err = fx
        .sandbox
        .prepare(&source, 4, "run-http", None)
        .await
        .expect_err("the fake server has no repo");
    assert!(!err.to_string().contains(TOKEN), "{err}");
    let (requests, environments) = tokio::time::timeout(Duration::from_secs(20), server)
        .await
        .expect("git contacted the server twice")
        .expect("server");
    use base64::Engine;
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{TOKEN}"));
    assert!(
        requests[1]
            .to_lowercase()
            .contains(&format!("authorization: basic {}", basic.to_lowercase())),
        "{requests:?}"
    );
    // The probe could read git's environment (the control)…
    assert!(
        environments
            .iter()
            .any(|e| e.contains("GIT_TERMINAL_PROMPT")),
        "no git environment was readable: {environments:?}"
    );
    // …and the token was not in it.
    for environ in &environments {
        assert!(
            !environ.contains(TOKEN) && !environ.contains(&basic),
            "{environ}"
        );
    }
    let leaks = files_containing(fx.root.path(), TOKEN);
    let leaks_b64 = files_containing(fx.root.path(), &basic);
    assert!(
        leaks.is_empty() && leaks_b64.is_empty(),
        "{leaks:?} {leaks_b64:?}"
    );
}

/// The environment of every running git process, as text.
fn git_environments() -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
                c.starts_with(b"git\0") || c.windows(17).any(|w| w == b"credential.helper")
            })
        })
        .filter_map(|e| std::fs::read(e.path().join("environ")).ok())
        .map(|env| String::from_utf8_lossy(&env).replace('\0', "\n"))
        // Not the fixture git of the secret-carrying child that
        // `the_agent_finds_no_secret_in_its_environment` starts: it inherits
        // the child's environment (and its marker), token included, on
        // purpose. closer's own git gets a cleared environment.
        .filter(|env| !env.contains(&crate::support::alone::marker(ENV_PROBE)))
        .collect()
}

#[tokio::test]
async fn the_worktree_is_reused_across_iterations_and_removed_at_the_end() {
    let fx = Fixture::new(false);
    let first = fx.prepare("run-reuse").await;
    std::fs::write(first.path.join("scratch.txt"), "work in progress\n").expect("write");
    fx.origin
        .push_change("README.md", "# calc, changed upstream\n");
    let again = fx.prepare("run-reuse").await;
    assert_eq!(again, first, "same worktree, same base");
    assert!(again.path.join("scratch.txt").exists());
    // A new run sees the upstream change: fetched into the same mirror.
    let fresh = fx.prepare_issue("run-reuse-2", 5).await;
    assert_eq!(fresh.mirror, first.mirror);
    assert_ne!(fresh.base_commit, first.base_commit);
    fx.sandbox
        .remove(&first, "run-reuse")
        .await
        .expect("remove");
    assert!(!first.path.exists());
    let branches = git(&first.mirror, &["branch", "--list", "closer/*"]);
    assert_eq!(
        branches.trim(),
        "+ closer/issue-5",
        "the other run's branch stays"
    );
    fx.sandbox
        .remove(&fresh, "run-reuse-2")
        .await
        .expect("remove");
    assert!(
        git(&first.mirror, &["branch", "--list", "closer/*"])
            .trim()
            .is_empty()
    );
    // A crashed run's worktree does not block the next run of the same issue.
    let crashed = fx.prepare_issue("run-crashed", 7).await;
    let next = fx.prepare_issue("run-after-crash", 7).await;
    assert!(!crashed.path.exists());
    assert_eq!(
        git(&next.path, &["symbolic-ref", "--short", "HEAD"]).trim(),
        "closer/issue-7"
    );
}

/// The checks' clean checkout of a commit holds what the commit holds and
/// nothing the agent left beside it, and a directory the checks made
/// unwritable there neither keeps it from being removed nor keeps the next
/// check from replacing it.
#[tokio::test]
async fn a_checkout_holds_only_the_commit_and_is_removed_whatever_the_checks_left() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-checkout").await;
    std::fs::create_dir_all(wt.path.join("__pycache__")).unwrap();
    std::fs::write(wt.path.join("__pycache__/calc.pyc"), "planted").unwrap();
    std::fs::write(
        wt.path.join("calc.py"),
        "def add(a, b):\n    return a + b\n",
    )
    .unwrap();
    let head = fx.sandbox.head(&wt).await.unwrap();
    let checkout = fx
        .sandbox
        .checkout(&wt, "run-checkout", &head, Purpose::Checks)
        .await
        .expect("a checkout");
    assert!(!checkout.path.join("__pycache__").exists());
    let calc = std::fs::read_to_string(checkout.path.join("calc.py")).unwrap();
    assert!(
        calc.contains("return a - b"),
        "the commit's calc.py: {calc}"
    );

    let locked = |root: &std::path::Path| {
        let dir = root.join("fixtures/locked");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("data"), "x").unwrap();
        set_mode(&dir, 0o000);
    };
    // The control: a plain recursive remove cannot empty such a tree. Root
    // passes over permission bits, so only an unprivileged user shows it.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        let plain = tempfile::tempdir().unwrap();
        locked(plain.path());
        assert!(std::fs::remove_dir_all(plain.path().join("fixtures")).is_err());
        set_mode(&plain.path().join("fixtures/locked"), 0o700);
    } else {
        eprintln!("running as root: the control of the unwritable directory is not shown");
    }

    locked(&checkout.path);
    let again = fx
        .sandbox
        .checkout(&wt, "run-checkout", &head, Purpose::Checks)
        .await
        .expect("a crashed check's checkout is replaced");
    locked(&again.path);
    fx.sandbox
        .remove(&again, "run-checkout")
        .await
        .expect("removed");
    assert!(!again.path.exists());
    assert!(
        wt.path.join("__pycache__/calc.pyc").exists(),
        "the run's worktree is untouched"
    );
}

/// Under `mode = "none"` the agent can write the mirror: a replace ref
/// making the commit under test read as another commit does not change
/// what the checks' checkout holds (decision 230). The control: git with
/// replacements honoured reads the other commit's file.
#[tokio::test]
async fn a_replace_ref_in_the_mirror_does_not_change_what_the_checks_see() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-replace").await;
    let head = fx.sandbox.head(&wt).await.unwrap();
    std::fs::write(wt.path.join("calc.py"), "FAKE = True\n").unwrap();
    git(
        &wt.path,
        &[
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@b",
            "commit",
            "-qam",
            "fake",
        ],
    );
    let fake = git(&wt.path, &["rev-parse", "HEAD"]).trim().to_owned();
    git(&wt.path, &["reset", "-q", "--hard", &head]);
    let mirror = format!("--git-dir={}", wt.mirror.display());
    git(&wt.path, &[&mirror, "replace", &head, &fake]);
    let shown = git(&wt.path, &[&mirror, "show", &format!("{head}:calc.py")]);
    assert!(
        shown.contains("FAKE"),
        "control: git honours the replacement: {shown}"
    );

    let checkout = fx
        .sandbox
        .checkout(&wt, "run-replace", &head, Purpose::Checks)
        .await
        .expect("a checkout");
    let calc = std::fs::read_to_string(checkout.path.join("calc.py")).unwrap();
    assert!(
        calc.contains("return a - b"),
        "the commit's calc.py: {calc}"
    );
}

#[tokio::test]
async fn concurrent_runs_on_one_repository_share_the_mirror_safely() {
    let fx = Fixture::new(false);
    let runs: Vec<String> = (0..4).map(|i| format!("run-par-{i}")).collect();
    let source = fx.source();
    let tasks: Vec<_> = runs
        .iter()
        .zip(10u64..)
        .map(|(run, issue)| {
            let (sandbox, source, run) = (fx.sandbox.clone(), source.clone(), run.clone());
            tokio::spawn(async move { sandbox.prepare(&source, issue, &run, None).await })
        })
        .collect();
    let mut prepared = Vec::new();
    for task in tasks {
        prepared.push(task.await.expect("task"));
    }
    let mut paths = Vec::new();
    for wt in prepared {
        let wt = wt.expect("prepared concurrently");
        assert!(wt.path.join("calc.py").exists());
        paths.push(wt.path.clone());
    }
    paths.dedup();
    assert_eq!(paths.len(), 4);
    let mirror = fx.prepare("run-par-check").await.mirror;
    git(&mirror, &["fsck", "--no-progress"]);
}

#[tokio::test]
async fn a_baseline_that_cannot_be_taken_stops_the_run() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-nobase").await;
    let mut config = repo_config();
    config.dod = vec![goal(GoalKind::BuildSucceeds {
        command: "no-such-build-tool --all".into(),
    })];
    let err = fx
        .baseline(&wt, "run-nobase", &config)
        .await
        .expect_err("missing command");
    assert!(err.to_string().contains("no-such-build-tool"), "{err}");
    config.dod = vec![GoalSpec {
        kind: GoalKind::TestsPass {
            command: "sleep 30".into(),
        },
        required: true,
        timeout_secs: Some(1),
    }];
    let err = fx
        .baseline(&wt, "run-nobase", &config)
        .await
        .expect_err("timeout");
    assert!(err.to_string().contains("timed out"), "{err}");
}

#[tokio::test]
async fn every_goal_type_reports_evidence() {
    let fx = Fixture::new(false);
    let wt = fx.prepare("run-goals").await;
    let port = free_port();
    let secret_line = format!("GITHUB_TOKEN = \"ghp_{}\"", "A1b2C3d4E5f6G7h8".repeat(3));
    fx.run(
        &fx.agent(
            "goals.sh",
            &format!(
                "{FIX_ADD}\nprintf 'import unittest\\n' > test_extra.py\nmkdir -p web && echo '{{\"status\": {{\"ok\": true, \"items\": [1, 2]}}}}' > web/health.json\n\
                 printf '%s\\n' '{secret_line}' > settings.py\nln -s /etc/hostname leak"
            ),
        ),
        &wt,
        1,
    )
    .await;
    let server = format!("exec python3 -m http.server {port} --bind 127.0.0.1 --directory web");
    let url = format!("http://127.0.0.1:{port}/health.json");
    let acceptance = vec![
        goal(GoalKind::LintPasses {
            command: "python3 -m py_compile calc.py".into(),
        }),
        goal(GoalKind::BuildSucceeds {
            command: "true".into(),
        }),
        goal(GoalKind::TestsPass {
            command: "python3 -m unittest".into(),
        }),
        goal(GoalKind::CustomScript {
            command: "test -f calc.py && exit 4".into(),
        }),
        goal(GoalKind::TestAdded {
            pattern: "test_*.py".into(),
        }),
        goal(GoalKind::FilesChanged {
            pattern: "calc.py".into(),
        }),
        goal(GoalKind::FileExists {
            path: "web/health.json".into(),
        }),
        // A committed link to a file outside: not a file of the checkout.
        goal(GoalKind::FileExists {
            path: "leak".into(),
        }),
        goal(GoalKind::NoSecrets {}),
        goal(GoalKind::EndpointResponds {
            command: server.clone(),
            url: url.clone(),
            status: None,
        }),
        goal(GoalKind::ResponseContains {
            command: server.clone(),
            url: url.clone(),
            json_path: Some("$.status.items[1]".into()),
            expected: Some(serde_json::json!(2)),
            contains: None,
        }),
        // The server's 404 page holds the text: an error is no answer.
        goal(GoalKind::ResponseContains {
            command: server.clone(),
            url: url.replace("health.json", "missing.json"),
            json_path: None,
            expected: None,
            contains: Some("File not found".into()),
        }),
    ];
    let config = RepoConfig::default();
    let mut state = ConvergenceState::default();
    let baseline = Baseline::empty(&wt.base_commit);
    let v = fx
        .verify(
            &wt,
            Case {
                config: &config,
                task: TaskType::ReadInfo,
                acceptance: &acceptance,
                baseline: &baseline,
            },
            &mut state,
            1,
        )
        .await;
    let got: Vec<(&str, bool, &str)> = v
        .goals
        .iter()
        .map(|g| (g.goal_type.as_str(), g.passed, g.evidence.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("lint_passes", true, "exit 0"),
            ("build_succeeds", true, "exit 0"),
            ("tests_pass", true, "exit 0"),
            ("custom_script", false, got[3].2),
            ("test_added", true, "new: test_extra.py"),
            ("files_changed", true, "changed: calc.py"),
            ("file_exists", true, "web/health.json exists"),
            (
                "file_exists",
                false,
                "leak leads out of the checkout through a link"
            ),
            (
                "no_secrets",
                false,
                "possible secrets: settings.py:1 github_token"
            ),
            ("endpoint_responds", true, "status 200 (expected 200)"),
            ("response_contains", true, "$.status.items[1] = 2"),
            ("response_contains", false, "status 404: not a success"),
        ]
    );
    assert!(got[3].2.starts_with("exit 4"), "{}", got[3].2);
    assert!(v.goals.iter().all(|g| !g.evidence.contains("ghp_")));
    assert_eq!(v.decision.decision, VerdictKind::Incomplete);
    // What the goals started is stopped.
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "the server still listens"
    );
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

// ---- persistence: the same round trip on SQLite and, with
// TEST_DATABASE_URL, on a fresh PostgreSQL database.

mod persistence {
    use closer::config::repo::ConvergenceConfig;
    use closer::engine::artifacts::{ArtifactKind, Artifacts, ChangedFile, Commit};
    use closer::engine::baseline::Baseline;
    use closer::engine::convergence::{CheckId, ConvergenceState, Observation};
    use closer::engine::evidence as stored;
    use closer::engine::fingerprint::Failure;
    use closer::engine::goals::{GoalLevel, GoalResult};
    use closer::engine::scope::ScopeVerdict;
    use closer::engine::verify::IterationVerification;
    use closer::store::Store;

    use crate::support::db::TestDb;

    fn failure(test: &str) -> Failure {
        closer::engine::fingerprint::parse_failures(
            "cargo test",
            &format!("test {test} ... FAILED\n\ntest result: FAILED. 0 passed; 1 failed\n"),
            None,
        )
        .remove(0)
    }

    fn goal(passed: bool, evidence: &str) -> GoalResult {
        GoalResult {
            level: GoalLevel::Dod,
            goal_type: "tests_pass".into(),
            target: "cargo test".into(),
            passed,
            required: true,
            duration_ms: 42,
            evidence: evidence.into(),
            failures: Vec::new(),
            passed_tests: Vec::new(),
            started_tests: Vec::new(),
            output_cut: false,
            not_runnable: false,
            tolerated: false,
        }
    }

    fn verification(iteration: u32, state: &mut ConvergenceState) -> IterationVerification {
        let old = failure("tests::old");
        let new = failure("tests::new");
        let decision = state.observe(
            Observation {
                iteration,
                blocking: vec![new.clone()],
                reasons: vec!["1 new failure(s) against the baseline".into()],
                diff_hash: format!("d{iteration}"),
                evidence: vec!["tests_pass: exit 101".into()],
            },
            &ConvergenceConfig::default(),
            CheckId(format!("check-{iteration}")),
        );
        IterationVerification {
            iteration,
            artifacts: Artifacts {
                base_commit: "b".repeat(40),
                head: "c".repeat(40),
                branch: Some("closer/issue-4".into()),
                commits: vec![Commit {
                    sha: "c".repeat(40),
                    message: "fix".into(),
                }],
                changed_files: vec![ChangedFile {
                    path: "src/lib.rs".into(),
                    added: 3,
                    deleted: 1,
                    new: false,
                }],
                untracked: Vec::new(),
                diff_hash: format!("d{iteration}"),
            },
            missing_artifacts: vec![ArtifactKind::Branch],
            goals: vec![goal(false, "exit 101; failing: tests::new, tests::old")],
            failures: vec![old, new.clone()],
            new_failures: vec![new],
            since_base: Vec::new(),
            tolerated: Vec::new(),
            fixed_since_base: Vec::new(),
            reproduction: None,
            scope: ScopeVerdict {
                out_of_scope: Vec::new(),
                changed_lines: 4,
                diff_budget: None,
                over_budget: false,
            },
            decision,
        }
    }

    async fn round_trip(store: &Store) {
        use stored::*;
        let pool = store.pool();
        let run = "run-1";
        let baseline = Baseline {
            base_commit: "b".repeat(40),
            failures: vec![failure("tests::old")],
            goals: vec![goal(false, "exit 101; failing: tests::old")],
        };
        save_baseline(pool, run, &baseline, 1_000).await.unwrap();
        let mut state = ConvergenceState::default();
        let first = verification(1, &mut state);
        save_iteration(pool, run, &first, &state, 2_000)
            .await
            .unwrap();
        // Saving again (a retried job) replaces, not duplicates.
        save_iteration(pool, run, &first, &state, 2_500)
            .await
            .unwrap();
        let second = verification(2, &mut state);
        save_iteration(pool, run, &second, &state, 3_000)
            .await
            .unwrap();

        let (artifacts, missing) = artifacts(pool, run, 1).await.unwrap().unwrap();
        assert_eq!(artifacts, first.artifacts);
        assert_eq!(missing, [ArtifactKind::Branch]);
        assert_eq!(goal_results(pool, run, 1).await.unwrap(), first.goals);
        assert_eq!(
            goal_results(pool, run, BASELINE_ITERATION).await.unwrap(),
            baseline.goals
        );
        let stored = failures(pool, run, 1).await.unwrap();
        assert_eq!(stored.len(), 2);
        let flags: Vec<(Option<&str>, bool)> = stored
            .iter()
            .map(|s| (s.failure.test.as_deref(), s.is_new))
            .collect();
        assert_eq!(
            flags,
            [(Some("tests::old"), false), (Some("tests::new"), true)]
        );
        assert_eq!(stored[1].failure, first.new_failures[0]);
        assert_eq!(
            decision(pool, run, 1).await.unwrap(),
            Some(first.decision.clone())
        );
        let latest = latest_decision(pool, run).await.unwrap().unwrap();
        assert_eq!(latest.check_id, CheckId("check-2".into()));
        assert_eq!(latest.stage, second.decision.stage);
        assert_eq!(
            convergence_state(pool, run).await.unwrap(),
            Some(state.clone())
        );

        let all = diagnostics(pool, run).await.unwrap();
        assert_eq!(all["baseline_failures"][0]["test"], "tests::old");
        assert_eq!(all["current_failures"].as_array().map(Vec::len), Some(2));
        assert_eq!(all["fingerprint_history"].as_array().map(Vec::len), Some(2));
        assert_eq!(all["completion_reasons"][1]["check_id"], "check-2");
        assert_eq!(all["completion_reasons"][1]["stage"], 2);
        assert_eq!(
            all["completion_reasons"][0]["reasons"][0],
            "1 new failure(s) against the baseline"
        );
        assert_eq!(
            diagnostics(pool, "other-run").await.unwrap()["current_failures"],
            serde_json::Value::Null
        );
    }

    #[tokio::test]
    async fn verification_evidence_round_trips() {
        let db = TestDb::new("verification_round_trip").await;
        round_trip(&db.store().await).await;
    }
}
