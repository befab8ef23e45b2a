//! What an agent leaves in a worktree cannot make closer read without end
//! or read outside it: a symbolic link to a file elsewhere is listed, not
//! followed; a sparse 10 GB file is listed, not read; too many files, too
//! many added lines, too many untracked bytes or too large a diff is a named
//! failure; a live goal's response body is read up to its cap.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use closer::agent::confine::{Backend, Confinement};
use closer::agent::process::BaseEnv;
use closer::agent::sandbox::git::GitError;
use closer::agent::sandbox::{RepoSource, Sandbox, SandboxOptions, Worktree};
use closer::config::repo::{GoalKind, GoalSpec};
use closer::engine::artifacts::{self, Collected};
use closer::engine::goals::{self, GoalContext, GoalLevel, GoalSettings};
use tempfile::TempDir;

use crate::support::git::{Origin, git};

/// An AWS-shaped key: the secret scanner's test pattern, here a marker of
/// whether a file's content was read.
const MARKER: &str = "aws_key = AKIAQWERTYUIOPASDFGHJ";

struct Fixture {
    origin: Origin,
    _root: TempDir,
    sandbox: Sandbox,
    base_env: BaseEnv,
}

impl Fixture {
    fn new() -> Fixture {
        let origin = Origin::with_files(&[("README.md", "# app\n")]);
        let root = tempfile::tempdir().expect("temp dir");
        let home = root.path().join("home");
        std::fs::create_dir_all(&home).expect("home");
        let base_env = BaseEnv {
            path: std::env::var("PATH").unwrap_or_default(),
            home,
            lang: "C.UTF-8".into(),
        };
        let sandbox = Sandbox::new(SandboxOptions {
            root: root.path().join("sandbox"),
            base_env: base_env.clone(),
            git_timeout: Duration::from_secs(120),
            committer_name: "closer".into(),
            committer_email: "closer@localhost".into(),
        });
        Fixture {
            origin,
            _root: root,
            sandbox,
            base_env,
        }
    }

    /// The sandbox goal commands run in (bwrap where it works).
    fn confinement(&self) -> Confinement {
        crate::support::confinement(self._root.path(), &self._root.path().join("sandbox"))
    }

    /// Whether that sandbox is bwrap; says so loudly when it is not.
    fn has_bwrap(&self) -> bool {
        let bwrap = matches!(self.confinement().backend(), Backend::Bwrap { .. });
        if !bwrap {
            eprintln!("SKIPPED: a network of the goal's own needs bwrap (.ci/run installs it)");
        }
        bwrap
    }

    async fn worktree(&self, run: &str) -> Worktree {
        let source = RepoSource {
            url: self.origin.url.clone(),
            token: None,
            default_branch: None,
            repository_id: None,
        };
        self.sandbox
            .prepare(&source, 1, run, None)
            .await
            .expect("worktree")
    }

    async fn collect(&self, wt: &Worktree) -> Result<Collected, GitError> {
        artifacts::collect(self.sandbox.git(), wt).await
    }
}

fn lines_of<'a>(collected: &'a Collected, path: &str) -> Vec<&'a str> {
    collected
        .added_lines
        .iter()
        .filter(|l| l.path == path)
        .map(|l| l.text.as_str())
        .collect()
}

fn too_large(result: Result<Collected, GitError>) -> String {
    match result {
        Err(GitError::TooLarge(why)) => why,
        Err(e) => panic!("another error: {e}"),
        Ok(c) => panic!("read in full: {} untracked", c.artifacts.untracked.len()),
    }
}

#[tokio::test]
async fn a_symlink_to_a_file_outside_the_worktree_is_listed_not_followed() {
    let fx = Fixture::new();
    let wt = fx.worktree("symlink").await;
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.env");
    std::fs::write(&secret, format!("{MARKER}\n")).unwrap();
    std::os::unix::fs::symlink(&secret, wt.path.join("leak.env")).unwrap();
    // Control: the same content in a plain file is read.
    std::fs::write(wt.path.join("copy.env"), format!("{MARKER}\n")).unwrap();

    let collected = fx.collect(&wt).await.expect("collected");
    let listed: Vec<&str> = collected
        .artifacts
        .untracked
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(listed, ["copy.env", "leak.env"]);
    assert_eq!(lines_of(&collected, "copy.env"), [MARKER]);
    assert!(
        lines_of(&collected, "leak.env").is_empty(),
        "the link was followed"
    );
    assert!(
        collected.added_lines.iter().all(|l| l.path != "leak.env"),
        "nothing of the linked file was read"
    );
}

/// A daemon the run left behind swaps directories of the worktree for
/// links to a directory outside, over and over, while closer removes the
/// worktree: nothing outside is removed. git's own `worktree remove`
/// deletes by path after an `lstat`, and a swap between the two leads its
/// deletion outside (decision 230): it unlinks each entry by its full
/// path, through the link once the swap is made. The control, git's
/// removal first under the same swapping, lost files outside by the tenth
/// try in each of three runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removing_a_worktree_never_follows_a_directory_swapped_for_a_link() {
    const TRIES: usize = 20;
    const DIRS: usize = 8;
    const FILES: usize = 40;
    let fx = Fixture::new();
    let outside = tempfile::tempdir().unwrap();
    for f in 0..FILES {
        std::fs::write(outside.path().join(format!("f{f}")), "kept").unwrap();
    }
    for attempt in 0..TRIES {
        let run = format!("swap-{attempt}");
        let wt = fx.worktree(&run).await;
        for d in 0..DIRS {
            let dir = wt.path.join(format!("d{d}"));
            std::fs::create_dir(&dir).unwrap();
            for f in 0..FILES {
                std::fs::write(dir.join(format!("f{f}")), "agent").unwrap();
            }
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (root, target, stop) = (wt.path.clone(), outside.path().to_owned(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    for d in 0..DIRS {
                        let (dir, aside) = (root.join(format!("d{d}")), root.join(format!("a{d}")));
                        let _ = std::fs::rename(&dir, &aside);
                        let _ = std::os::unix::fs::symlink(&target, &dir);
                        std::thread::sleep(Duration::from_micros(200));
                        let _ = std::fs::remove_file(&dir);
                        let _ = std::fs::rename(&aside, &dir);
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            })
        };
        // Swapping meanwhile may make the removal fail, named: never remove
        // anything outside.
        let _ = fx.sandbox.remove(&wt, &run).await;
        stop.store(true, Ordering::Relaxed);
        swapper.join().unwrap();
        let left = std::fs::read_dir(outside.path()).unwrap().count();
        assert_eq!(left, FILES, "try {attempt}: files outside were removed");
    }
}

#[tokio::test]
async fn a_sparse_10_gb_file_is_listed_not_read() {
    let fx = Fixture::new();
    let wt = fx.worktree("sparse").await;
    let big = std::fs::File::create(wt.path.join("disk.img")).unwrap();
    big.set_len(10 * 1024 * 1024 * 1024).unwrap();
    drop(big);
    std::fs::write(wt.path.join("notes.txt"), "small\n").unwrap();

    let started = std::time::Instant::now();
    let collected = fx.collect(&wt).await.expect("collected");
    assert!(started.elapsed() < Duration::from_secs(30), "it was read");
    let disk = collected
        .artifacts
        .untracked
        .iter()
        .find(|f| f.path == "disk.img")
        .expect("listed");
    assert_eq!(disk.added, 0);
    assert_eq!(lines_of(&collected, "notes.txt"), ["small"]);
}

fn many_files(dir: &Path, n: usize) {
    let many = dir.join("many");
    std::fs::create_dir_all(&many).unwrap();
    for i in 0..n {
        std::fs::write(many.join(format!("f{i}.txt")), "x\n").unwrap();
    }
}

#[tokio::test]
async fn more_untracked_files_than_closer_reads_is_a_named_failure() {
    let fx = Fixture::new();
    let wt = fx.worktree("many").await;
    // Control: a thousand files are read.
    many_files(&wt.path, 1_000);
    let collected = fx.collect(&wt).await.expect("a thousand files are fine");
    assert_eq!(collected.artifacts.untracked.len(), 1_000);
    // Past ten thousand (a million fails the same way, after one listing).
    many_files(&wt.path, 10_001);
    let why = too_large(fx.collect(&wt).await);
    assert_eq!(why, "10001 untracked files (at most 10000 are read)");
}

#[tokio::test]
async fn a_file_of_newlines_and_too_many_untracked_bytes_are_named_failures() {
    let fx = Fixture::new();
    let wt = fx.worktree("lines").await;
    // 1 MiB of newlines: a million added lines, each a copy of its path.
    std::fs::write(wt.path.join("blank.txt"), vec![b'\n'; 1024 * 1024]).unwrap();
    let why = too_large(fx.collect(&wt).await);
    assert_eq!(why, "more than 200000 added lines");

    std::fs::remove_file(wt.path.join("blank.txt")).unwrap();
    // 40 files of 1 MiB on one line each: few lines, many bytes.
    let line = format!("{}\n", "a".repeat(1024 * 1024 - 1));
    for i in 0..40 {
        std::fs::write(wt.path.join(format!("wide{i:02}.txt")), &line).unwrap();
    }
    let why = too_large(fx.collect(&wt).await);
    assert_eq!(why, "untracked files over 32 MiB together");
    // Control: under the byte budget they are read.
    for i in 20..40 {
        std::fs::remove_file(wt.path.join(format!("wide{i:02}.txt"))).unwrap();
    }
    let collected = fx.collect(&wt).await.expect("20 MiB is read");
    assert_eq!(collected.added_lines.len(), 20);
}

#[tokio::test]
async fn a_diff_larger_than_closer_reads_is_a_named_failure() {
    let fx = Fixture::new();
    let wt = fx.worktree("diff").await;
    let text: String = (0..34 * 1024).map(|i| format!("{i:01023}\n")).collect();
    std::fs::write(wt.path.join("data.txt"), text).unwrap();
    git(&wt.path, &["add", "data.txt"]);
    git(
        &wt.path,
        &[
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@b",
            "commit",
            "-qm",
            "data",
        ],
    );
    let why = too_large(fx.collect(&wt).await);
    assert_eq!(why, "the diff against the base is over 32 MiB");
}

/// Evaluates `kind` as a required DoD goal in `wt`, a live goal's server on
/// the host's network.
async fn evaluate(fx: &Fixture, wt: &Worktree, kind: GoalKind) -> goals::GoalResult {
    evaluate_with(fx, wt, kind, None, Duration::from_secs(30)).await
}

/// [`evaluate`], a live goal's server probed from inside its sandbox by
/// `prober` (closer's binary) when that is given, each goal given `timeout`.
async fn evaluate_with(
    fx: &Fixture,
    wt: &Worktree,
    kind: GoalKind,
    prober: Option<&str>,
    timeout: Duration,
) -> goals::GoalResult {
    evaluate_in(fx, wt, kind, prober, timeout, fx.confinement()).await
}

/// [`evaluate_with`] in `confinement` instead of the tests' sandbox.
async fn evaluate_in(
    fx: &Fixture,
    wt: &Worktree,
    kind: GoalKind,
    prober: Option<&str>,
    timeout: Duration,
    confinement: Confinement,
) -> goals::GoalResult {
    let collected = fx.collect(wt).await.expect("collected");
    let settings = GoalSettings {
        base_env: fx.base_env.clone(),
        confinement,
        scratch: fx._root.path().join("goals"),
        default_timeout: timeout,
        max_output_bytes: 1024 * 1024,
        prober: prober.map(Into::into),
    };
    let ctx = GoalContext {
        worktree: &wt.path,
        mirror: Some(&wt.mirror),
        home: None,
        artifacts: &collected.artifacts,
        added_lines: &collected.added_lines,
        settings: &settings,
    };
    let spec = GoalSpec {
        kind,
        required: true,
        timeout_secs: None,
    };
    goals::evaluate(ctx, GoalLevel::Dod, &spec).await
}

/// A free port on 127.0.0.1.
/// The probers a live goal is tried with: none (the host's network), and
/// closer's binary when goals run under bwrap (a network of the server's
/// own, `closer goal-probe`).
fn both_paths(fx: &Fixture) -> Vec<Option<&'static str>> {
    let mut probers = vec![None];
    if matches!(fx.confinement().backend(), Backend::Bwrap { .. }) {
        probers.push(Some(env!("CARGO_BIN_EXE_closer")));
    }
    probers
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test]
async fn a_live_goal_reads_a_response_body_up_to_its_cap() {
    let fx = Fixture::new();
    let wt = fx.worktree("http").await;
    let port = free_port();
    // A server whose answer never ends.
    let server = format!(
        "exec python3 -c \"import http.server as h\n\
class E(h.BaseHTTPRequestHandler):\n \
def do_GET(s):\n  s.send_response(200); s.end_headers()\n  \
while True: s.wfile.write(b'needle ' * 8192)\n\
h.HTTPServer(('127.0.0.1', {port}), E).serve_forever()\""
    );
    let url = format!("http://127.0.0.1:{port}/");
    // On the host's network, and (under bwrap) through the goal's probe in
    // a network of the server's own: the probe reads no more either.
    for prober in both_paths(&fx) {
        let contains = GoalKind::ResponseContains {
            command: server.clone(),
            url: url.clone(),
            json_path: None,
            expected: None,
            contains: Some("needle".into()),
        };
        let result = evaluate_with(&fx, &wt, contains, prober, Duration::from_secs(30)).await;
        assert!(!result.passed, "{prober:?}");
        assert_eq!(result.evidence, "the response body is larger than 8 MiB");
        // Control: the status alone does not read the body, and passes.
        let status = GoalKind::EndpointResponds {
            command: server.clone(),
            url: url.clone(),
            status: None,
        };
        let result = evaluate_with(&fx, &wt, status, prober, Duration::from_secs(30)).await;
        assert!(result.passed, "{prober:?}: {}", result.evidence);
    }
}

/// A goal whose URL is an IPv6 address (`http://[::1]:…/`), on the host's
/// network and through the probe: its server is heard. Before, the port
/// was tried with the brackets the URL writes the address in, which no
/// resolver takes, and the goal always failed as "did not accept
/// connections".
#[tokio::test]
async fn a_live_goal_at_an_ipv6_address_hears_its_server() {
    let fx = Fixture::new();
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("SKIPPED: this machine has no IPv6 loopback");
        return;
    }
    let wt = fx.worktree("http-ipv6").await;
    for prober in both_paths(&fx) {
        let port = free_port();
        let own = GoalKind::EndpointResponds {
            command: format!("exec python3 -m http.server {port} --bind ::1"),
            url: format!("http://[::1]:{port}/"),
            status: None,
        };
        let result = evaluate_with(&fx, &wt, own, prober, Duration::from_secs(30)).await;
        assert!(result.passed, "{prober:?}: {}", result.evidence);
    }
}

/// A live goal's server that kills its reaper (where nothing stops it: no
/// sandbox, Landlock below ABI 6) while it answers the goal's request: the
/// answer came from a tree closer no longer holds, so the goal does not
/// pass on it, saying why. The control: the same server answering without
/// the kill passes. (A reaper killed before the request reads as the
/// command exiting before its server listened, and fails anyway.)
#[tokio::test]
async fn a_live_goal_whose_server_kills_its_reaper_does_not_pass() {
    let fx = Fixture::new();
    let wt = fx.worktree("http-escape").await;
    for kill in ["pass", "os.kill(int(os.environ['R']), 9)"] {
        let port = free_port();
        let server = format!(
            "R=$PPID exec python3 -c \"import http.server as h, os\n\
             class H(h.BaseHTTPRequestHandler):\n  \
             def do_GET(self):\n    {kill}\n    \
             self.send_response(200); self.end_headers()\n\
             h.HTTPServer(('127.0.0.1', {port}), H).serve_forever()\""
        );
        let goal = GoalKind::EndpointResponds {
            command: server,
            url: format!("http://127.0.0.1:{port}/"),
            status: None,
        };
        let unconfined = Confinement::unconfined();
        let result = evaluate_in(&fx, &wt, goal, None, Duration::from_secs(30), unconfined).await;
        match kill {
            "pass" => assert!(result.passed, "the control: {}", result.evidence),
            _ => {
                assert!(!result.passed, "{}", result.evidence);
                assert!(
                    result.evidence.contains("(its reaper)"),
                    "{}",
                    result.evidence
                );
            }
        }
    }
}

/// Something already answers at the goal's address (another run's server,
/// a hostile agent of another run: the host's network is shared). A goal
/// whose own command never starts a server must not pass on that answer.
/// Before, it connected, got the stranger's 200 and passed.
#[tokio::test]
async fn a_live_goal_does_not_pass_on_a_server_that_was_already_listening() {
    let fx = Fixture::new();
    let wt = fx.worktree("http-busy").await;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut stream in listener.incoming().flatten() {
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let goal = GoalKind::EndpointResponds {
        command: "false".into(),
        url: format!("http://127.0.0.1:{port}/health"),
        status: None,
    };
    let result = evaluate(&fx, &wt, goal).await;
    assert!(!result.passed, "{}", result.evidence);
    assert!(
        result
            .evidence
            .contains("already accepted connections before the command started"),
        "{}",
        result.evidence
    );
}

/// A stranger on the host listening at `127.0.0.1:<port>` and answering
/// every request with `body`; the port, and how many it answered.
fn stranger_answering(body: &'static str) -> (u16, Arc<AtomicUsize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let heard = Arc::new(AtomicUsize::new(0));
    let count = heard.clone();
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        for mut stream in listener.incoming().flatten() {
            count.fetch_add(1, Ordering::SeqCst);
            let mut request = [0u8; 1024];
            let _ = stream.read(&mut request);
            let answer = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes());
        }
    });
    (port, heard)
}

/// Under bwrap a live goal's server has a network of its own, probed by
/// closer's binary beside it (decision 197). A stranger on the host (a
/// hostile agent of another run, racing for the port) answers at the
/// goal's address with exactly what the goal looks for: a goal whose own
/// command never serves fails, and the stranger is never asked; the goal's
/// own server binds the very port the stranger holds on the host, and
/// answers. Before, the goal shared the host's network and only a check
/// before its command started stood between it and the stranger.
#[tokio::test]
async fn a_live_goal_hears_only_its_own_server_in_a_network_of_its_own() {
    let fx = Fixture::new();
    if !fx.has_bwrap() {
        return;
    }
    let prober = Some(env!("CARGO_BIN_EXE_closer"));
    let wt = fx.worktree("http-own-net").await;
    let (port, heard) = stranger_answering("the expected text");
    let url = format!("http://127.0.0.1:{port}/");
    let silent = GoalKind::ResponseContains {
        command: "sleep 30".into(),
        url: url.clone(),
        json_path: None,
        expected: None,
        contains: Some("the expected text".into()),
    };
    let result = evaluate_with(&fx, &wt, silent, prober, Duration::from_secs(3)).await;
    assert!(!result.passed, "{}", result.evidence);
    assert!(
        result.evidence.contains("did not accept connections"),
        "{}",
        result.evidence
    );
    assert_eq!(heard.load(Ordering::SeqCst), 0, "the stranger was asked");

    let own = GoalKind::ResponseContains {
        command: format!(
            "mkdir -p web && echo 'the expected text, served' > web/index.html && \
             exec python3 -m http.server {port} --bind 127.0.0.1 --directory web"
        ),
        url,
        json_path: None,
        expected: None,
        contains: Some("served".into()),
    };
    let result = evaluate_with(&fx, &wt, own, prober, Duration::from_secs(30)).await;
    assert!(result.passed, "{}", result.evidence);
    assert_eq!(heard.load(Ordering::SeqCst), 0, "the stranger was asked");
}

/// This machine spelt otherwise than `127.0.0.1` or `localhost`: as an
/// IPv4-mapped address, and by its host name when that resolves to a
/// loopback address. Each still gets a network of its own: the goal's own
/// server binds the port a stranger holds on the host, and is heard.
/// Before, such a URL kept the host's network, where the stranger's port
/// refused the goal (or, had it bound later, answered for it).
#[tokio::test]
async fn a_live_goal_on_this_machine_by_another_name_gets_a_network_of_its_own() {
    let fx = Fixture::new();
    if !fx.has_bwrap() {
        return;
    }
    let prober = Some(env!("CARGO_BIN_EXE_closer"));
    let wt = fx.worktree("http-other-name").await;
    let (port, heard) = stranger_answering("the stranger's text");
    let mut hosts = Vec::new();
    if std::net::TcpListener::bind("[::1]:0").is_ok() {
        hosts.push("[::ffff:127.0.0.1]".to_owned());
    } else {
        eprintln!("SKIPPED (in part): this machine has no IPv6");
    }
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name = name.trim();
    let found: Vec<std::net::SocketAddr> = std::net::ToSocketAddrs::to_socket_addrs(&(name, port))
        .map(Iterator::collect)
        .unwrap_or_default();
    if !found.is_empty() && found.iter().all(|a| a.ip().is_loopback()) {
        hosts.push(name.to_owned());
    } else {
        eprintln!("SKIPPED (in part): this machine's name {name:?} is not a loopback name");
    }
    for host in hosts {
        let own = GoalKind::ResponseContains {
            command: format!(
                "mkdir -p web && echo 'served by its own server' > web/index.html && \
                 exec python3 -m http.server {port} --bind 0.0.0.0 --directory web"
            ),
            url: format!("http://{host}:{port}/"),
            json_path: None,
            expected: None,
            contains: Some("its own server".into()),
        };
        let result = evaluate_with(&fx, &wt, own, prober, Duration::from_secs(30)).await;
        assert!(result.passed, "{host}: {}", result.evidence);
    }
    assert_eq!(heard.load(Ordering::SeqCst), 0, "the stranger was asked");
}

/// closer's binary sits in a directory the sandbox hides (beside its key,
/// say): the probe's sandbox shows the binary alone, and the goal runs.
#[tokio::test]
async fn a_live_goals_probe_runs_from_a_hidden_directory() {
    let fx = Fixture::new();
    if !fx.has_bwrap() {
        return;
    }
    // The fixture's confinement hides `<root>/sandbox`, closer's data: the
    // binary's directory is the hidden one itself.
    let hidden = fx._root.path().join("sandbox");
    std::fs::create_dir_all(&hidden).unwrap();
    std::fs::write(hidden.join("key.pem"), MARKER).unwrap();
    let prober = hidden.join("closer");
    if std::fs::hard_link(env!("CARGO_BIN_EXE_closer"), &prober).is_err() {
        crate::support::copy_executable(env!("CARGO_BIN_EXE_closer").as_ref(), &prober);
    }
    let wt = fx.worktree("http-hidden-prober").await;
    let port = free_port();
    // The server tries the key beside the binary on its way up.
    let own = GoalKind::EndpointResponds {
        command: format!(
            "cat {}/key.pem > leaked 2>&1; exec python3 -m http.server {port} --bind 127.0.0.1",
            hidden.display()
        ),
        url: format!("http://127.0.0.1:{port}/"),
        status: None,
    };
    let prober = prober.to_str();
    let result = evaluate_with(&fx, &wt, own, prober, Duration::from_secs(30)).await;
    assert!(result.passed, "{}", result.evidence);
    let leaked = std::fs::read_to_string(wt.path.join("leaked")).expect("the command ran");
    assert!(!leaked.contains(MARKER), "{leaked}");
}

/// The goal's command is the agent's code, run as the same user as the
/// probe that started it: it writes a forged answer into the probe's
/// output through `/proc`. The probe is not dumpable, so the write is
/// refused and the goal fails; the command cannot make it pass.
#[tokio::test]
async fn a_live_goals_command_cannot_answer_for_its_probe() {
    let fx = Fixture::new();
    if !fx.has_bwrap() {
        return;
    }
    let wt = fx.worktree("http-forged").await;
    // Through the probe (its parent), and through process 1 (bwrap's own,
    // which held the probe's output open: the review's attack).
    let forge = format!(
        "for p in $PPID 1; do printf '%s\\n%s' \
         '{{\"response\":{{\"status\":200,\"body_len\":6}}}}' forged > /proc/$p/fd/1; \
         echo \"forge $p exit $?\" >> {}/forged; done; sleep 30",
        wt.path.display()
    );
    let goal = GoalKind::ResponseContains {
        command: forge,
        url: format!("http://127.0.0.1:{}/", free_port()),
        json_path: None,
        expected: None,
        contains: Some("forged".into()),
    };
    let prober = Some(env!("CARGO_BIN_EXE_closer"));
    let result = evaluate_with(&fx, &wt, goal, prober, Duration::from_secs(3)).await;
    let tried = std::fs::read_to_string(wt.path.join("forged")).unwrap_or_default();
    assert!(!result.passed, "{} ({tried})", result.evidence);
    assert_eq!(tried.lines().count(), 2, "the command ran: {tried:?}");
}
