//! Attacks on the sandbox, from inside it: each probe is a shell command a
//! hostile agent (or a repository's goal) would run, run once in a jail of
//! every backend this machine has (bwrap, Landlock) and once unconfined —
//! the control that shows the probe works when nothing stops it.
//!
//! The layout mimics an installation: `etc/closer/` holds the App key and
//! the config (hidden) beside a public file; `data/` (hidden) holds the
//! database, this run's worktree (read-write in the view), another run's
//! worktree and the mirror (read-only in the view).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use closer::agent::confine::{Confinement, Kind, Mode, SandboxConfig, View};
use closer::agent::process::{self, ProcessOutput, ProcessSpec};

struct Install {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Install {
    fn new() -> Install {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = dir.path().canonicalize().expect("canonical");
        for (path, text) in [
            (
                "etc/closer/app.pem",
                "-----BEGIN RSA PRIVATE KEY----- app key",
            ),
            ("etc/closer/config.toml", "webhook_secret = \"hunter2\""),
            ("etc/closer/public.txt", "nothing secret"),
            ("data/closer.db", "SQLite format 3"),
            (
                "data/worktrees/run-a/calc.py",
                "def add(a, b): return a - b",
            ),
            ("data/worktrees/run-b/private.py", "other customer's code"),
            ("data/mirrors/calc.git/HEAD", "ref: refs/heads/main"),
            ("data/homes/run-a/.keep", ""),
        ] {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        }
        Install { _dir: dir, root }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The sandbox as `closer serve` would configure it here.
    fn confinement(&self, mode: Mode) -> Option<Confinement> {
        let config = SandboxConfig {
            mode,
            read_only: vec![self.path("etc")],
            hide: vec![
                self.path("etc/closer/app.pem"),
                self.path("etc/closer/config.toml"),
                self.path("data"),
            ],
            ..SandboxConfig::default()
        };
        match Confinement::detect(&config, &std::env::var("PATH").unwrap_or_default()) {
            Ok(c) => Some(c),
            Err(e) => {
                assert!(
                    std::env::var_os("CI").is_none(),
                    "CI must have every sandbox backend: {e}"
                );
                eprintln!("SKIPPED {mode:?}: {e}");
                None
            }
        }
    }

    fn view(&self) -> View {
        View {
            read_write: vec![
                self.path("data/worktrees/run-a"),
                self.path("data/homes/run-a"),
            ],
            read_only: vec![self.path("data/mirrors/calc.git")],
        }
    }

    /// Runs `script` as a process of `kind` in `confinement`.
    async fn probe(&self, confinement: &Confinement, kind: Kind, script: &str) -> ProcessOutput {
        let worktree = self.path("data/worktrees/run-a");
        let mut env = BTreeMap::from([
            ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
            (
                "HOME".to_owned(),
                self.path("data/homes/run-a").display().to_string(),
            ),
        ]);
        env.insert("LANG".into(), "C.UTF-8".into());
        let mut spec = ProcessSpec::shell(script, &worktree, env, Duration::from_secs(30));
        spec.jail = Some(confinement.jail(kind, self.view()));
        process::run(&spec).await.expect("the probe ran")
    }
}

/// The backends to attack, with the unconfined control first.
fn backends(install: &Install) -> (Confinement, Vec<Confinement>) {
    let control = install
        .confinement(Mode::None)
        .expect("mode none always works");
    let confined = [Mode::Bwrap, Mode::Landlock]
        .into_iter()
        .filter_map(|m| install.confinement(m))
        .collect();
    (control, confined)
}

/// Each probe succeeds (exit 0) unconfined and fails in every sandbox.
async fn blocked_everywhere(install: &Install, kind: Kind, what: &str, script: &str) {
    let (control, confined) = backends(install);
    let out = install.probe(&control, kind, script).await;
    assert!(
        out.success(),
        "control: unconfined, {what} works: {}",
        out.tail(10)
    );
    for confinement in confined {
        let out = install.probe(&confinement, kind, script).await;
        assert!(
            !out.success(),
            "{what} must fail under {}: {}",
            confinement.backend().name(),
            out.tail(10)
        );
    }
}

#[tokio::test]
async fn the_agent_cannot_read_the_app_key_or_the_config() {
    let i = Install::new();
    let key = i.path("etc/closer/app.pem");
    let config = i.path("etc/closer/config.toml");
    blocked_everywhere(
        &i,
        Kind::Agent,
        "reading the App key",
        &format!("cat '{}'", key.display()),
    )
    .await;
    blocked_everywhere(
        &i,
        Kind::Agent,
        "reading the config",
        &format!("cat '{}'", config.display()),
    )
    .await;
    // The directory itself stays visible: only closer's files are hidden.
    let (_, confined) = backends(&i);
    for c in confined {
        let public = i.path("etc/closer/public.txt");
        let out = i
            .probe(&c, Kind::Agent, &format!("cat '{}'", public.display()))
            .await;
        assert!(out.success(), "{}: {}", c.backend().name(), out.tail(5));
    }
}

#[tokio::test]
async fn the_agent_cannot_read_the_database_or_another_runs_worktree() {
    let i = Install::new();
    let db = i.path("data/closer.db");
    let other = i.path("data/worktrees/run-b/private.py");
    blocked_everywhere(
        &i,
        Kind::Agent,
        "reading the database",
        &format!("cat '{}'", db.display()),
    )
    .await;
    blocked_everywhere(
        &i,
        Kind::Agent,
        "reading another run",
        &format!("cat '{}'", other.display()),
    )
    .await;
}

#[tokio::test]
async fn the_agent_cannot_read_closers_environment_through_proc() {
    let i = Install::new();
    let script = format!("cat /proc/{}/environ | grep -q PATH", std::process::id());
    blocked_everywhere(
        &i,
        Kind::Agent,
        "reading closer's /proc/<pid>/environ",
        &script,
    )
    .await;
}

#[tokio::test]
async fn the_agent_cannot_write_outside_its_worktree_and_home() {
    let i = Install::new();
    let outside = i.path("etc/planted");
    blocked_everywhere(
        &i,
        Kind::Agent,
        "writing outside",
        &format!("echo x > '{}'", outside.display()),
    )
    .await;
    let mirror = i.path("data/mirrors/calc.git/HEAD");
    blocked_everywhere(
        &i,
        Kind::Agent,
        "moving a ref in the mirror",
        &format!("echo evil > '{}'", mirror.display()),
    )
    .await;
    // Its own places are writable under every backend.
    let (_, confined) = backends(&i);
    for c in confined {
        let out = i
            .probe(
                &c,
                Kind::Agent,
                "echo fixed > calc.py && echo x > \"$HOME/state\" && cat calc.py",
            )
            .await;
        assert!(out.success(), "{}: {}", c.backend().name(), out.tail(5));
    }
}

#[tokio::test]
async fn goals_have_no_network_while_agents_do() {
    let i = Install::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            drop(stream);
        }
    });
    let connect = format!(
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=5)'"
    );
    blocked_everywhere(&i, Kind::Goal, "a goal connecting out", &connect).await;
    let (_, confined) = backends(&i);
    for c in confined {
        let out = i.probe(&c, Kind::Agent, &connect).await;
        assert!(
            out.success(),
            "agents reach their model under {}: {}",
            c.backend().name(),
            out.tail(5)
        );
    }
}

#[tokio::test]
async fn the_sandbox_sees_none_of_closers_processes() {
    let i = Install::new();
    // Unconfined, closer (this test process) is in /proc; in the sandbox it
    // is not (bwrap: own PID namespace) or cannot be inspected (Landlock:
    // ptrace scoping keeps `environ`, `mem`, `fd` and `root` out of reach).
    let me = std::process::id();
    let script = format!("ls /proc/{me}/root/ >/dev/null && ls /proc/{me}/fd >/dev/null");
    blocked_everywhere(&i, Kind::Agent, "looking into closer's process", &script).await;
}

#[tokio::test]
async fn a_sandboxed_process_holds_no_privilege() {
    let i = Install::new();
    let (_, confined) = backends(&i);
    for c in confined {
        let out = i
            .probe(
                &c,
                Kind::Agent,
                "grep -E '^(CapEff|NoNewPrivs)' /proc/self/status",
            )
            .await;
        assert!(out.success(), "{}", out.tail(5));
        assert!(
            out.stdout.text.contains("CapEff:\t0000000000000000"),
            "{}: {}",
            c.backend().name(),
            out.stdout.text
        );
        assert!(
            out.stdout.text.contains("NoNewPrivs:\t1"),
            "{}: {}",
            c.backend().name(),
            out.stdout.text
        );
    }
}

#[tokio::test]
async fn a_daemon_left_behind_dies_with_the_sandbox() {
    let i = Install::new();
    let (_, confined) = backends(&i);
    for c in confined {
        let marker = format!("600.{}{}", std::process::id(), c.backend().name().len());
        let out = i
            .probe(
                &c,
                Kind::Agent,
                &format!("setsid sleep {marker} >/dev/null 2>&1 < /dev/null & echo started"),
            )
            .await;
        assert!(out.success(), "{}", out.tail(5));
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !running_with_argument(&marker),
            "a setsid daemon outlived the sandbox under {}",
            c.backend().name()
        );
    }
}

fn running_with_argument(argument: &str) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| {
            cmdline
                .split(|b| *b == 0)
                .any(|arg| arg == argument.as_bytes())
        })
    })
}

#[tokio::test]
async fn a_missing_program_is_reported_as_missing_not_as_a_sandbox_failure() {
    let i = Install::new();
    let (_, confined) = backends(&i);
    for c in confined {
        let mut spec = ProcessSpec::shell(
            "true",
            Path::new("/"),
            BTreeMap::new(),
            Duration::from_secs(5),
        );
        spec.argv = vec!["closer-no-such-program".into()];
        spec.cwd = i.path("data/worktrees/run-a");
        spec.env.insert("PATH".into(), "/usr/bin:/bin".into());
        spec.jail = Some(c.jail(Kind::Agent, i.view()));
        let err = process::run(&spec).await.expect_err("not found");
        assert!(err.to_string().contains("closer-no-such-program"), "{err}");
    }
}

mod runs {
    use closer::agent::confine::{Backend, Confinement, SandboxConfig};
    use closer::model::RunState;

    use crate::support::db::TestDb;
    use crate::support::process::closer_command;
    use crate::support::story::{CONFIG, Story};

    /// What `auto` leaves when a machine has neither bwrap nor Landlock.
    fn no_sandbox() -> Confinement {
        let reason = "no confinement is available here (bubblewrap (bwrap) is not installed; \
                      Landlock is not enabled in this kernel)";
        Confinement::new(
            Backend::Unavailable {
                reason: reason.into(),
            },
            &SandboxConfig::default(),
            "",
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn without_a_sandbox_a_run_fails_at_once_saying_why_and_nothing_runs() {
        let mut s = Story::start("nosandbox", Some(CONFIG)).await;
        s.kill_workers();
        s.confinement = Some(no_sandbox());
        s.spawn_workers();
        s.agent_step(1, "echo ran > ran.txt\necho '{\"summary\": \"done\"}'\n");
        let n = s
            .open_issue("add subtracts", "", &["closer", "type:bug"])
            .await;
        s.idle().await;
        let run = s.run(n).await.expect("a run");
        assert_eq!(run.state, RunState::Failed, "{run:#?}");
        assert!(!s.path("prompt-1.txt").exists(), "the agent never ran");
        // The diagnosis says why.
        let comments = s.github.comments(&s.repo, n);
        assert!(
            comments
                .iter()
                .any(|c| c.body.contains("no confinement is available here")),
            "{comments:#?}"
        );
        s.stop().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn mode_none_runs_and_every_status_comment_says_it_is_unconfined() {
        let mut s = Story::start("unconfined", Some(CONFIG)).await;
        s.kill_workers();
        s.confinement = Some(Confinement::unconfined());
        s.spawn_workers();
        s.agent_step(1, &crate::stories::fix_add());
        s.llm
            .push([crate::support::fake_llm::Reply::closer(true, 0.95, &[])]);
        let n = s
            .open_issue("add subtracts", "", &["closer", "type:bug"])
            .await;
        s.idle().await;
        let run = s.run(n).await.expect("a run");
        assert_eq!(run.state, RunState::Done, "{run:#?}");
        let status = s.status_comment(n);
        assert!(status.body.contains("**unconfined**"), "{}", status.body);
        s.stop().await;
    }

    #[tokio::test]
    async fn a_backend_asked_for_by_name_that_is_missing_stops_closer_at_start() {
        let db = TestDb::new("nobwrap").await;
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("closer.toml");
        std::fs::write(&config, "[sandbox]\nmode = \"bwrap\"\n").unwrap();
        // A PATH without bwrap on it.
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for tool in ["git", "sh"] {
            let found =
                closer::agent::process::resolve_program(tool, Some("/usr/local/bin:/usr/bin:/bin"));
            std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
        }
        let output = closer_command(&db.url, &[("PATH", bin.to_str().unwrap())])
            .arg("--config")
            .arg(&config)
            .args(["serve", "--dry-run", "--bind", "127.0.0.1:0"])
            .output()
            .await
            .expect("closer runs");
        let text = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{text}");
        assert!(
            text.contains("mode = \"bwrap\" is not available here")
                && text.contains("not installed"),
            "{text}"
        );
    }
}
