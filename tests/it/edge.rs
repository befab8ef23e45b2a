//! The HTTP edge under hostile clients: requests refused before their body
//! is read, a body over the cap refused while it streams, connections over
//! the cap shed, slow connections that do not stop `/healthz`, a shutdown
//! no connection can hold past its grace, and `/readyz` saying when a
//! worker has died and been restarted. Raw TCP, so the tests control exactly
//! what the server has been sent when it answers.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use closer::config::server::HttpLimits;
use closer::model::JobKind;
use closer::server::{self, AppState};
use closer::store::jobs::{self, LeasedJob, NewJob};
use closer::store::writer::IntakeWriter;
use closer::worker::{JobError, JobFuture, JobRunner, WorkerPool, WorkerSettings};
use secrecy::SecretString;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Notify, watch};

use crate::support::app::SECRET;
use crate::support::db::TestDb;
use crate::support::{fixture, sign};

/// closer's router behind closer's listener, with these limits.
struct Edge {
    addr: String,
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
    _db: TestDb,
}

impl Edge {
    async fn start(name: &str, limits: HttpLimits) -> Edge {
        Self::start_with(name, limits, |state| state).await
    }

    async fn start_with(
        name: &str,
        limits: HttpLimits,
        wire: impl FnOnce(AppState) -> AppState,
    ) -> Edge {
        let db = TestDb::new(name).await;
        let store = db.store().await;
        let (writer, _task) = IntakeWriter::spawn(store.clone(), 64).expect("intake writer");
        let state = AppState::new(
            store,
            Some(writer),
            &SecretString::from(SECRET),
            Arc::new(Notify::new()),
            5,
        )
        .with_http_limits(&limits);
        let app = server::router(Arc::new(wire(state)), "/webhooks");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (stop, mut stop_rx) = watch::channel(false);
        let stopped = async move {
            let _ = stop_rx.changed().await;
        };
        let server = tokio::spawn(server::listen::serve(listener, app, limits, stopped));
        Edge {
            addr,
            stop,
            server,
            _db: db,
        }
    }

    async fn connect(&self) -> TcpStream {
        TcpStream::connect(&self.addr).await.expect("connect")
    }

    /// `GET path` on a new connection: the status line and how long it took.
    async fn get(&self, path: &str) -> (String, Duration) {
        let started = Instant::now();
        let mut conn = self.connect().await;
        let request = format!("GET {path} HTTP/1.1\r\nHost: closer\r\nConnection: close\r\n\r\n");
        conn.write_all(request.as_bytes()).await.unwrap();
        let answer = read_answer(&mut conn, Duration::from_secs(5)).await;
        (status_line(&answer.unwrap_or_default()), started.elapsed())
    }
}

/// What the server sent before closing or before `wait` passed; `None` when
/// it sent nothing in that time and kept the connection open.
async fn read_answer(conn: &mut TcpStream, wait: Duration) -> Option<String> {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                got.extend_from_slice(&buf[..n]);
                if got.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Err(_) if got.is_empty() => return None,
            Err(_) => break,
        }
    }
    Some(String::from_utf8_lossy(&got).into_owned())
}

fn status_line(answer: &str) -> String {
    answer.lines().next().unwrap_or_default().to_owned()
}

/// A webhook request head declaring a body of `length` bytes.
fn webhook_head(length: usize, extra: &[(&str, &str)]) -> String {
    let mut head = format!(
        "POST /webhooks HTTP/1.1\r\nHost: closer\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n"
    );
    for (name, value) in extra {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head
}

/// Request headers, by name and value.
type Headers<'a> = Vec<(&'a str, &'a str)>;

#[tokio::test]
async fn requests_without_signature_or_event_are_refused_before_their_body_is_sent() {
    let edge = Edge::start("edge_headers", HttpLimits::default()).await;
    let body = fixture("issues.opened.json");
    let signature = sign(SECRET, &body);
    let delivery = ("X-GitHub-Delivery", "d-edge");
    let cases: [(&str, Headers, &str); 3] = [
        (
            "no signature",
            vec![("X-GitHub-Event", "issues"), delivery],
            "401",
        ),
        (
            "no event",
            vec![("X-Hub-Signature-256", &signature), delivery],
            "400",
        ),
        (
            "signature not hex",
            vec![
                ("X-Hub-Signature-256", "sha256=zz"),
                ("X-GitHub-Event", "issues"),
                delivery,
            ],
            "401",
        ),
    ];
    for (case, headers, status) in cases {
        let mut conn = edge.connect().await;
        // The head announces 20 MB; not a byte of it is sent.
        let head = webhook_head(20_000_000, &headers);
        conn.write_all(head.as_bytes()).await.unwrap();
        let answer = read_answer(&mut conn, Duration::from_secs(5)).await;
        let answer = answer.unwrap_or_else(|| panic!("{case}: no answer without the body"));
        assert!(status_line(&answer).contains(status), "{case}: {answer}");
    }

    // Control: a request whose head passes gets no answer until its body
    // comes; the refusals above were made on the head alone.
    let mut conn = edge.connect().await;
    let head = webhook_head(
        body.len(),
        &[
            ("X-Hub-Signature-256", &signature),
            ("X-GitHub-Event", "issues"),
            delivery,
        ],
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let early = read_answer(&mut conn, Duration::from_millis(500)).await;
    assert_eq!(
        early, None,
        "the server waits for the body of a signed request"
    );
    conn.write_all(&body).await.unwrap();
    let answer = read_answer(&mut conn, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(status_line(&answer).contains("202"), "{answer}");
    edge.stop().await;
}

#[tokio::test]
async fn a_body_over_the_cap_is_refused_while_it_streams() {
    let edge = Edge::start("edge_cap", HttpLimits::default()).await;
    let mut conn = edge.connect().await;
    let head = "POST /webhooks HTTP/1.1\r\nHost: closer\r\nTransfer-Encoding: chunked\r\n\
                X-Hub-Signature-256: sha256=00000000000000000000000000000000000000000000000000000000000000ff\r\n\
                X-GitHub-Event: issues\r\nX-GitHub-Delivery: d-big\r\n\r\n";
    conn.write_all(head.as_bytes()).await.unwrap();
    let chunk = vec![b' '; 1024 * 1024];
    let mut sent = 0;
    // 24 MiB, under the 25 MiB cap: the server keeps reading.
    for _ in 0..24 {
        send_chunk(&mut conn, &chunk).await.expect("under the cap");
        sent += 1;
    }
    let early = read_answer(&mut conn, Duration::from_millis(300)).await;
    assert_eq!(early, None, "control: under the cap the body is still read");
    // Two more MiB pass the cap; the stream is never terminated.
    while sent < 26 && send_chunk(&mut conn, &chunk).await.is_ok() {
        sent += 1;
    }
    let answer = read_answer(&mut conn, Duration::from_secs(5)).await;
    let answer = answer.expect("an answer before the body's end");
    assert!(status_line(&answer).contains("413"), "{answer}");
    edge.stop().await;
}

async fn send_chunk(conn: &mut TcpStream, chunk: &[u8]) -> std::io::Result<()> {
    conn.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
        .await?;
    conn.write_all(chunk).await?;
    conn.write_all(b"\r\n").await
}

#[tokio::test]
async fn shutdown_ends_within_its_grace_whatever_the_connections_do() {
    let limits = HttpLimits {
        header_read_timeout: Duration::from_secs(60),
        shutdown_grace: Duration::from_secs(1),
        ..HttpLimits::default()
    };
    let edge = Edge::start("edge_shutdown", limits).await;
    // An idle keep-alive connection, after one answered request.
    let mut idle = edge.connect().await;
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: closer\r\n\r\n")
        .await
        .unwrap();
    let answer = read_answer(&mut idle, Duration::from_secs(5))
        .await
        .unwrap();
    assert!(status_line(&answer).contains("200"), "{answer}");
    // A request whose head never finishes.
    let mut half = edge.connect().await;
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: clo")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    let signalled = Instant::now();
    let _ = edge.stop.send(true);
    // The idle connection is closed at once.
    let closed = read_answer(&mut idle, Duration::from_millis(500)).await;
    assert_eq!(closed.as_deref(), Some(""), "the idle connection is closed");
    // Control: the half-sent request holds its connection open past the
    // signal (a graceful close alone would wait for it, for up to the
    // 60 s header timeout)...
    let held = read_answer(&mut half, Duration::from_millis(300)).await;
    assert_eq!(
        held, None,
        "the half-sent request is still being waited for"
    );
    // ...and yet the server is gone within the grace.
    tokio::time::timeout(Duration::from_secs(3), edge.server)
        .await
        .expect("the server stopped within its grace")
        .expect("the server task ended cleanly");
    let took = signalled.elapsed();
    assert!(took < Duration::from_secs(3), "took {took:?}");
    assert!(
        took >= Duration::from_millis(900),
        "took {took:?}: no grace given"
    );
}

#[tokio::test]
async fn slow_connections_do_not_stop_healthz_and_over_the_cap_are_shed() {
    let limits = HttpLimits {
        header_read_timeout: Duration::from_secs(2),
        max_connections: 220,
        ..HttpLimits::default()
    };
    let edge = Edge::start("edge_slow", limits).await;
    // 200 connections that send half a request head and stop.
    let mut slow = Vec::new();
    for _ in 0..200 {
        let mut conn = edge.connect().await;
        conn.write_all(b"POST /webhooks HTTP/1.1\r\nHost: c")
            .await
            .unwrap();
        slow.push(conn);
    }
    let (status, took) = edge.get("/healthz").await;
    assert!(status.contains("200"), "{status}");
    assert!(took < Duration::from_secs(1), "/healthz took {took:?}");

    // Fill the cap; the next connection is closed without an answer.
    let mut filler = Vec::new();
    for _ in 0..20 {
        filler.push(edge.connect().await);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut over = edge.connect().await;
    let _ = over
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: c\r\n\r\n")
        .await;
    let shed = read_answer(&mut over, Duration::from_secs(1)).await;
    assert_eq!(shed.as_deref(), Some(""), "over the cap: closed unanswered");

    // The header timeout frees the slots the slow clients held.
    let started = Instant::now();
    let mut freed = read_answer(&mut slow[0], Duration::from_secs(5)).await;
    assert!(
        freed.is_some(),
        "a slow connection is closed by the header timeout"
    );
    freed.take();
    assert!(started.elapsed() < Duration::from_secs(4));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, _) = edge.get("/healthz").await;
    assert!(status.contains("200"), "{status}");
    edge.stop().await;
}

/// A signed `issues.opened` delivery, whole: what the server answered.
async fn deliver_signed(edge: &Edge, id: &str) -> Option<String> {
    let body = fixture("issues.opened.json");
    let signature = sign(SECRET, &body);
    let head = webhook_head(
        body.len(),
        &[
            ("X-Hub-Signature-256", &signature),
            ("X-GitHub-Event", "issues"),
            ("X-GitHub-Delivery", id),
        ],
    );
    let mut conn = edge.connect().await;
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&body).await.unwrap();
    read_answer(&mut conn, Duration::from_secs(2)).await
}

#[tokio::test]
async fn a_declared_length_holds_no_body_budget_until_its_bytes_arrive() {
    // A 32 MiB budget (the default) and requests that declare 20 MiB each.
    let edge = Edge::start("edge_budget", HttpLimits::default()).await;
    let stalled_head = |id: &str| {
        webhook_head(
            20 * 1024 * 1024,
            &[
                ("X-Hub-Signature-256", &format!("sha256={}", "0".repeat(64))),
                ("X-GitHub-Event", "issues"),
                ("X-GitHub-Delivery", id),
            ],
        )
    };
    // The control: two requests that did send 16 MiB each and stalled hold
    // the whole budget; a delivery waits behind them.
    let mut sent = Vec::new();
    for id in ["sent-1", "sent-2"] {
        let mut conn = edge.connect().await;
        conn.write_all(stalled_head(id).as_bytes()).await.unwrap();
        conn.write_all(&vec![b' '; 16 * 1024 * 1024]).await.unwrap();
        sent.push(conn);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        deliver_signed(&edge, "behind-sent").await,
        None,
        "bytes sent hold the budget"
    );
    drop(sent);
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Five that only declared 20 MiB hold 64 KiB each: a delivery goes by.
    let mut declared = Vec::new();
    for i in 0..5 {
        let mut conn = edge.connect().await;
        let head = stalled_head(&format!("declared-{i}"));
        conn.write_all(head.as_bytes()).await.unwrap();
        declared.push(conn);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let answer = deliver_signed(&edge, "beside-declared").await;
    let answer = answer.expect("an answer while the stalled requests wait");
    assert!(status_line(&answer).contains("202"), "{answer}");
    edge.stop().await;
}

impl Edge {
    async fn stop(self) {
        let _ = self.stop.send(true);
        let _ = tokio::time::timeout(Duration::from_secs(30), self.server).await;
    }
}

/// A runner whose job future panics when it is dropped, after the job's
/// panic guard: the one panic that ends a worker.
struct PanicsOnDrop;

struct Bomb;

impl Drop for Bomb {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("dropped a bomb");
        }
    }
}

/// A job future that finishes at once and keeps its bomb until dropped.
struct Armed(#[allow(dead_code)] Option<Bomb>);

impl std::future::Future for Armed {
    type Output = Result<(), JobError>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::task::Poll::Ready(Ok(()))
    }
}

impl JobRunner for PanicsOnDrop {
    fn run<'a>(&'a self, job: &'a LeasedJob) -> JobFuture<'a> {
        Box::pin(Armed((job.payload == "bomb").then_some(Bomb)))
    }
}

#[tokio::test]
async fn a_dead_worker_makes_readyz_unready_until_it_is_restarted() {
    let db = TestDb::new("edge_workers").await;
    let store = db.store().await;
    let runners: HashMap<JobKind, Arc<dyn JobRunner>> =
        HashMap::from([(JobKind::Run, Arc::new(PanicsOnDrop) as Arc<dyn JobRunner>)]);
    let settings = WorkerSettings {
        poll_interval: Duration::from_millis(20),
        restart_delay: Duration::from_millis(1500),
        ..WorkerSettings::default()
    };
    let ready = Arc::new(Notify::new());
    let pool = WorkerPool::new(store.clone(), runners, settings, ready);
    let (stop, stop_rx) = watch::channel(false);
    let workers = pool.spawn(2, "edge", stop_rx);
    let health = pool.health();
    let edge = Edge::start_with("edge_workers_http", HttpLimits::default(), |state| {
        state.with_workers(health.clone())
    })
    .await;
    let (status, _) = edge.get("/readyz").await;
    assert!(status.contains("200"), "both workers run: {status}");

    let now = store.now_ms();
    let bomb = NewJob {
        kind: JobKind::Run,
        key: "k-bomb".into(),
        payload: "bomb".into(),
        max_attempts: 1,
        run_at: now,
    };
    jobs::enqueue(store.pool(), &bomb, now).await.unwrap();
    let unready = wait_for_status(&edge, "503").await;
    assert!(unready, "/readyz turned unready when a worker died");
    assert_eq!(pool.health().live(), 1);
    let ready_again = wait_for_status(&edge, "200").await;
    assert!(ready_again, "/readyz is ready again after the restart");
    assert_eq!(pool.health().live(), 2);

    let _ = stop.send(true);
    for worker in workers {
        worker.await.expect("the supervisors end normally");
    }
    edge.stop().await;
}

/// Polls `/readyz` until its status line holds `status` (10 s at most).
async fn wait_for_status(edge: &Edge, status: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let (line, _) = edge.get("/readyz").await;
        if line.contains(status) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn a_request_head_over_64_kib_is_refused() {
    let edge = Edge::start("edge_head", HttpLimits::default()).await;
    let mut conn = edge.connect().await;
    let filler = "a".repeat(100 * 1024);
    let head = format!("GET /healthz HTTP/1.1\r\nHost: closer\r\nX-Filler: {filler}\r\n\r\n");
    let _ = conn.write_all(head.as_bytes()).await;
    let answer = read_answer(&mut conn, Duration::from_secs(5)).await;
    let answer = answer.unwrap_or_default();
    assert!(status_line(&answer).contains("431"), "{answer:?}");
    // Control: the same request with a small header is answered.
    let (status, _) = edge.get("/healthz").await;
    assert!(status.contains("200"), "{status}");
    edge.stop().await;
}
