//! The production GitHub client against the fake GitHub over real HTTP:
//! token exchange and refresh, ETags, every retry rule, the rate-limit
//! metric, dry run, and a round trip of every typed operation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use closer::clock::{ManualClock, SharedClock};
use closer::github::types::{InstallationId, IssueNumber, Permission, RepoName};
use closer::github::{
    FileFetch, GitHubApp, GitHubError, GitHubSettings, InstallationClient, IssueEdit, IssueState,
    Label, LabelCreated, MemoryRecorder, NewPullRequest, PullEdit, PullState, Reaction,
    RetrySettings, StateReason, WriteRecorder,
};

use crate::support::fake_github::{FakeGitHub, FakeUser, Fault, ReactionSubject};

const INSTALLATION: i64 = 7;
/// 2025-06-15T16:53:20Z: any fixed instant works, the fake shares the clock.
const START: i64 = 1_750_006_400_000;
/// The request timeout of the tests where the fake hangs on purpose.
const HANG_TIMEOUT: Duration = Duration::from_secs(1);

struct World {
    fake: FakeGitHub,
    clock: Arc<ManualClock>,
    app: GitHubApp,
    gh: Arc<InstallationClient>,
    repo: RepoName,
}

/// Short backoff so retries finish fast; rate-limit waits up to 3 s are slept.
fn settings(fake: &FakeGitHub) -> GitHubSettings {
    GitHubSettings {
        api_url: fake.url(),
        app_id: Some(fake.app_id()),
        private_key: Some(fake.private_key_pem()),
        retry: RetrySettings {
            max_attempts: 5,
            base_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            max_wait: Duration::from_secs(3),
            secondary_rate_limit_wait: Duration::from_secs(60),
        },
        // Generous: a busy CI machine must not turn a slow answer into a
        // timeout. The hang tests shorten it.
        request_timeout: Duration::from_secs(10),
        jitter_seed: Some(1),
        ..GitHubSettings::default()
    }
}

async fn world_with(tweak: impl FnOnce(&mut GitHubSettings)) -> World {
    let clock = Arc::new(ManualClock::new(START));
    let shared: SharedClock = clock.clone();
    let fake = FakeGitHub::start_with_clock(shared.clone()).await;
    fake.add_installation(INSTALLATION, "acme");
    let repo = fake.add_repo(INSTALLATION, "acme/widget");
    let mut s = settings(&fake);
    tweak(&mut s);
    let app = GitHubApp::new(s, shared, None).expect("app");
    let gh = app
        .installation(InstallationId(INSTALLATION))
        .await
        .unwrap();
    World {
        fake,
        clock,
        app,
        gh,
        repo,
    }
}

async fn world() -> World {
    world_with(|_| {}).await
}

impl World {
    fn issue(&self) -> IssueNumber {
        self.fake
            .open_issue(&self.repo, "alice", "Fix the widget", "It is broken.")
    }

    fn issue_path(&self, n: IssueNumber) -> String {
        format!("/repos/acme/widget/issues/{n}")
    }
}

// ---------------------------------------------------------------- tokens

#[tokio::test]
async fn token_is_reused_while_fresh_and_refreshed_with_five_minutes_left() {
    let w = world().await;
    let n = w.issue();
    w.gh.get_issue(&w.repo, n).await.unwrap();
    w.gh.get_issue(&w.repo, n).await.unwrap();
    assert_eq!(w.fake.token_exchanges(), 1);

    // The fake's tokens live an hour: 6 minutes left → still reused.
    w.clock.advance(Duration::from_secs(54 * 60));
    w.gh.get_issue(&w.repo, n).await.unwrap();
    assert_eq!(w.fake.token_exchanges(), 1);

    // 5 minutes left → refreshed before use.
    w.clock.advance(Duration::from_secs(60));
    w.gh.get_issue(&w.repo, n).await.unwrap();
    assert_eq!(w.fake.token_exchanges(), 2);
}

#[tokio::test]
async fn concurrent_callers_share_one_client_and_one_exchange() {
    let w = world().await;
    let n = w.issue();
    let again = w
        .app
        .installation(InstallationId(INSTALLATION))
        .await
        .unwrap();
    assert!(Arc::ptr_eq(&w.gh, &again), "one client per installation");

    let calls = (0..8).map(|_| {
        let gh = w.gh.clone();
        let repo = w.repo.clone();
        async move { gh.get_issue(&repo, n).await }
    });
    for result in futures_join_all(calls).await {
        result.unwrap();
    }
    assert_eq!(w.fake.token_exchanges(), 1);
}

#[tokio::test]
async fn token_for_git_push_is_the_cached_one() {
    let w = world().await;
    let t1 = w.gh.token().await.unwrap();
    let t2 = w.gh.token().await.unwrap();
    use secrecy::ExposeSecret;
    assert!(t1.expose_secret().starts_with("ghs_"));
    assert_eq!(t1.expose_secret(), t2.expose_secret());
    assert!(
        !format!("{:?}", w.gh).contains("ghs_"),
        "Debug never shows a token"
    );
    assert!(!format!("{t1:?}").contains("ghs_"));
}

#[tokio::test]
async fn revoked_token_gives_401_once_then_a_new_exchange() {
    let w = world().await;
    let n = w.issue();
    w.gh.get_issue(&w.repo, n).await.unwrap();
    w.fake.revoke_tokens();
    w.fake.clear_requests();

    let err = w.gh.get_issue(&w.repo, n).await.unwrap_err();
    assert_eq!(err, GitHubError::Unauthorized);
    assert_eq!(w.fake.requests().len(), 1, "401 is not retried");

    w.gh.get_issue(&w.repo, n).await.unwrap();
    assert_eq!(w.fake.token_exchanges(), 2);
}

#[tokio::test]
async fn short_lived_tokens_are_refreshed_and_expired_ones_refused() {
    let w = world().await;
    w.fake.set_token_ttl(Duration::from_secs(10 * 60));
    let n = w.issue();
    use secrecy::ExposeSecret;
    let first = w.gh.token().await.unwrap().expose_secret().to_owned();

    // 4 minutes left: under the 5-minute margin, so the client refreshes.
    w.clock.advance(Duration::from_secs(6 * 60));
    w.gh.get_issue(&w.repo, n).await.unwrap();
    assert_eq!(w.fake.token_exchanges(), 2);

    // The fake itself refuses the old token once it has expired.
    w.clock.advance(Duration::from_secs(5 * 60));
    let answer = raw_get(&w.fake.url(), "/repos/acme/widget", &first).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
}

/// A plain HTTP/1.1 GET over TCP, bypassing closer's client.
async fn raw_get(base: &str, path: &str, token: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}

#[tokio::test]
async fn app_info_reads_slug_and_bot_login_with_the_jwt() {
    let w = world().await;
    let info = w.app.app_info().await.unwrap();
    assert_eq!(info.id, w.fake.app_id() as i64);
    assert_eq!(info.slug, "closer-test");
    assert_eq!(info.bot_login, w.fake.bot_login());
}

#[tokio::test]
async fn a_jwt_from_a_skewed_clock_is_rejected_by_the_fake() {
    // The client's clock is 20 minutes behind GitHub's: its JWT is expired.
    let clock = Arc::new(ManualClock::new(START));
    let fake = FakeGitHub::start_with_clock(clock.clone()).await;
    fake.add_installation(INSTALLATION, "acme");
    let behind: SharedClock = Arc::new(ManualClock::new(START - 20 * 60 * 1000));
    let app = GitHubApp::new(settings(&fake), behind, None).unwrap();
    assert_eq!(app.app_info().await.unwrap_err(), GitHubError::Unauthorized);
}

#[tokio::test]
async fn bad_credentials_fail_at_start() {
    let fake = FakeGitHub::start().await;
    let mut s = settings(&fake);
    s.private_key =
        Some("-----BEGIN RSA PRIVATE KEY-----\nnope\n-----END RSA PRIVATE KEY-----".into());
    let err = GitHubApp::new(s, closer::clock::system(), None).unwrap_err();
    assert!(matches!(err, GitHubError::Config(_)), "{err}");

    let mut s = settings(&fake);
    s.private_key = None;
    s.app_id = None;
    let err = GitHubApp::new(s, closer::clock::system(), None).unwrap_err();
    assert_eq!(
        err,
        GitHubError::NoCredentials,
        "only a dry run may lack credentials"
    );
}

#[tokio::test]
async fn enterprise_server_api_path_is_kept() {
    let w = world_with(|s| s.api_url = format!("{}/api/v3", s.api_url)).await;
    let repo = w.gh.get_repository(&w.repo).await.unwrap();
    assert_eq!(repo.full_name, w.repo);
    let paths: Vec<String> = w.fake.requests().into_iter().map(|r| r.path).collect();
    assert!(paths.iter().all(|p| p.starts_with("/api/v3/")), "{paths:?}");
}

// ---------------------------------------------------------------- files

#[tokio::test]
async fn file_fetch_uses_etags_and_sees_changes() {
    let w = world().await;
    w.fake
        .set_file(&w.repo, "main", ".github/closer.yml", "agent: default\n");

    let first =
        w.gh.get_file(&w.repo, ".github/closer.yml", "main", None)
            .await
            .unwrap();
    let FileFetch::Found { content, etag, sha } = first else {
        panic!("expected the file, got {first:?}");
    };
    assert_eq!(content, b"agent: default\n");
    assert!(!sha.is_empty());
    let etag = etag.expect("GitHub sends an ETag");

    let again =
        w.gh.get_file(&w.repo, ".github/closer.yml", "main", Some(&etag))
            .await;
    assert_eq!(again.unwrap(), FileFetch::NotModified);

    w.fake
        .set_file(&w.repo, "main", ".github/closer.yml", "agent: other\n");
    let changed =
        w.gh.get_file(&w.repo, ".github/closer.yml", "main", Some(&etag))
            .await;
    assert!(
        matches!(changed.unwrap(), FileFetch::Found { content, .. } if content == b"agent: other\n")
    );

    let missing =
        w.gh.get_file(&w.repo, ".github/closer.yml", "other-branch", None)
            .await;
    assert_eq!(missing.unwrap(), FileFetch::NotFound);
}

// ---------------------------------------------------------------- retry rules

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let w = world().await;
    let n = w.issue();
    w.gh.token().await.unwrap();
    w.fake.inject(Fault::Status(502).times(2).method("GET"));
    w.fake.clear_requests();

    let issue = w.gh.get_issue(&w.repo, n).await.unwrap();
    assert_eq!(issue.number, n);
    assert_eq!(w.fake.requests_to("GET", &w.issue_path(n)).len(), 3);
}

/// An answer is read up to a cap as it streams: one past it is an error
/// naming the cap, not closer holding it all. The control: the same call,
/// answered normally, works.
#[tokio::test]
async fn an_answer_past_the_cap_is_an_error_not_held() {
    let w = world().await;
    let n = w.issue();
    w.gh.token().await.unwrap();
    let cap = closer::github::MAX_ANSWER_BYTES;
    w.fake
        .inject(Fault::HugeBody(cap + (1 << 20)).times(100).method("GET"));
    let err = w.gh.get_issue(&w.repo, n).await.unwrap_err();
    assert!(err.to_string().contains("larger than 32 MiB"), "{err}");
    w.fake.clear_faults();
    assert_eq!(w.gh.get_issue(&w.repo, n).await.unwrap().number, n);
}

#[tokio::test]
async fn server_errors_give_up_after_the_attempt_cap() {
    let w = world().await;
    let n = w.issue();
    w.gh.token().await.unwrap();
    w.fake.inject(Fault::Status(500).times(100).method("GET"));
    let err = w.gh.get_issue(&w.repo, n).await.unwrap_err();
    assert_eq!(err, GitHubError::Server { status: 500 });
    assert_eq!(w.fake.requests_to("GET", &w.issue_path(n)).len(), 5);
}

/// GitHub's front end answers 5xx for requests the API behind it may still
/// complete (probot/probot#921 posted one comment four times): a POST
/// answered so is not repeated; it is `MaybeApplied`, and the caller checks.
#[tokio::test]
async fn a_post_answered_with_a_server_error_is_maybe_applied_not_repeated() {
    let w = world().await;
    let n = w.issue();
    let comments = format!("{}/comments", w.issue_path(n));
    w.fake.inject(
        Fault::AfterApplying(502)
            .times(1)
            .method("POST")
            .path(&comments),
    );

    let err = w.gh.create_comment(&w.repo, n, "hello").await.unwrap_err();
    assert!(
        matches!(
            err,
            GitHubError::MaybeApplied {
                status: Some(502),
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("answer: 502"), "{err}");
    assert_eq!(
        w.fake.requests_to("POST", &comments).len(),
        1,
        "not repeated"
    );
    assert_eq!(w.fake.comments(&w.repo, n).len(), 1, "posted exactly once");
}

/// Adding labels is harmless to repeat, so a 502 on it is retried.
#[tokio::test]
async fn adding_labels_answered_with_502_is_repeated_because_that_is_harmless() {
    let w = world().await;
    let n = w.issue();
    let labels = format!("{}/labels", w.issue_path(n));
    w.fake.inject(
        Fault::AfterApplying(502)
            .times(1)
            .method("POST")
            .path(&labels),
    );

    w.gh.add_labels(&w.repo, n, &["phase:plan"]).await.unwrap();
    assert_eq!(w.fake.requests_to("POST", &labels).len(), 2);
    assert_eq!(w.fake.labels(&w.repo, n), vec!["phase:plan".to_owned()]);
}

#[tokio::test]
async fn secondary_rate_limit_retry_after_is_honoured() {
    let w = world().await;
    let n = w.issue();
    w.gh.token().await.unwrap();
    w.fake.inject(
        Fault::SecondaryRateLimit {
            retry_after_secs: 1,
        }
        .times(1)
        .method("GET"),
    );

    let started = Instant::now();
    w.gh.get_issue(&w.repo, n).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited {:?}",
        started.elapsed()
    );
    assert_eq!(w.fake.requests_to("GET", &w.issue_path(n)).len(), 2);
}

#[tokio::test]
async fn too_many_requests_is_retried() {
    let w = world().await;
    let n = w.issue();
    let comments = format!("{}/comments", w.issue_path(n));
    w.fake.inject(
        Fault::TooManyRequests {
            retry_after_secs: 0,
        }
        .times(2)
        .method("POST")
        .path(&comments),
    );

    w.gh.create_comment(&w.repo, n, "hello").await.unwrap();
    assert_eq!(w.fake.requests_to("POST", &comments).len(), 3);
    assert_eq!(w.fake.comments(&w.repo, n).len(), 1);
}

#[tokio::test]
async fn exhausted_primary_limit_waits_until_reset() {
    let w = world().await;
    let n = w.issue();
    w.gh.token().await.unwrap();
    let reset = (START / 1000 + 1) as u64; // one second after the shared clock's now
    w.fake.inject(
        Fault::PrimaryRateLimit {
            reset_epoch_secs: reset,
        }
        .times(1)
        .method("GET"),
    );

    let started = Instant::now();
    w.gh.get_issue(&w.repo, n).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "waited {:?}",
        started.elapsed()
    );
    assert_eq!(w.fake.requests_to("GET", &w.issue_path(n)).len(), 2);
}

#[tokio::test]
async fn long_rate_limits_are_handed_back_not_slept() {
    let w = world().await;
    let n = w.issue();
    w.gh.token().await.unwrap();

    w.fake.inject(
        Fault::TooManyRequests {
            retry_after_secs: 3600,
        }
        .times(1)
        .method("GET"),
    );
    let err = w.gh.get_issue(&w.repo, n).await.unwrap_err();
    assert_eq!(
        err,
        GitHubError::RateLimited {
            until: START + 3_600_000
        }
    );

    // A secondary limit that names no time waits at least 60 s: beyond max_wait here.
    w.fake
        .inject(Fault::SecondaryRateLimitNoHeader.times(1).method("GET"));
    let err = w.gh.get_issue(&w.repo, n).await.unwrap_err();
    assert_eq!(
        err,
        GitHubError::RateLimited {
            until: START + 60_000
        }
    );
    assert_eq!(
        w.fake.requests_to("GET", &w.issue_path(n)).len(),
        2,
        "one request each"
    );
}

#[tokio::test]
async fn validation_422_is_sent_exactly_once() {
    let w = world().await;
    let n = w.issue();
    let comments = format!("{}/comments", w.issue_path(n));
    let err = w.gh.create_comment(&w.repo, n, "").await.unwrap_err();
    assert!(
        matches!(err, GitHubError::Validation { status: 422, .. }),
        "{err}"
    );
    assert!(err.has_code("missing_field"));
    assert_eq!(w.fake.requests_to("POST", &comments).len(), 1);
}

#[tokio::test]
async fn not_found_and_bad_request_are_not_retried() {
    let w = world().await;
    let err = w.gh.get_issue(&w.repo, IssueNumber(999)).await.unwrap_err();
    assert_eq!(err, GitHubError::NotFound);
    assert_eq!(
        w.fake
            .requests_to("GET", "/repos/acme/widget/issues/999")
            .len(),
        1
    );

    let n = w.issue();
    w.fake.inject(Fault::Status(400).times(3).method("GET"));
    let err = w.gh.get_issue(&w.repo, n).await.unwrap_err();
    assert!(
        matches!(err, GitHubError::Validation { status: 400, .. }),
        "{err}"
    );
    assert_eq!(w.fake.requests_to("GET", &w.issue_path(n)).len(), 1);
}

#[tokio::test]
async fn a_post_whose_answer_never_comes_is_maybe_applied_not_repeated() {
    let w = world_with(|s| s.request_timeout = HANG_TIMEOUT).await;
    let n = w.issue();
    let comments = format!("{}/comments", w.issue_path(n));
    w.gh.token().await.unwrap();
    // The fake receives the POST and then answers nothing for longer than the
    // client's request timeout.
    w.fake.inject(
        Fault::Hang(Duration::from_secs(60))
            .times(1)
            .method("POST")
            .path(&comments),
    );

    let err = w.gh.create_comment(&w.repo, n, "hello").await.unwrap_err();
    assert!(matches!(err, GitHubError::MaybeApplied { .. }), "{err}");
    assert_eq!(
        w.fake.requests_to("POST", &comments).len(),
        1,
        "not repeated"
    );
}

#[tokio::test]
async fn a_get_whose_answer_never_comes_is_retried() {
    let w = world_with(|s| s.request_timeout = HANG_TIMEOUT).await;
    let n = w.issue();
    w.gh.token().await.unwrap();
    w.fake
        .inject(Fault::Hang(Duration::from_secs(60)).times(1).method("GET"));

    w.gh.get_issue(&w.repo, n).await.unwrap();
    assert_eq!(w.fake.requests_to("GET", &w.issue_path(n)).len(), 2);
}

#[tokio::test]
async fn a_refused_connection_is_retried_even_for_a_post() {
    // Nothing listens on this port: the request is never sent.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let fake = FakeGitHub::start().await;
    let mut s = settings(&fake);
    s.api_url = format!("http://127.0.0.1:{port}");
    let app = GitHubApp::new(s, closer::clock::system(), None).unwrap();
    let gh = app.installation(InstallationId(1)).await.unwrap();
    let repo = RepoName::new("acme", "widget");
    // The token exchange is a POST: a refused connection is retried (5 attempts), then Network.
    // Had the transport taken it for "maybe sent", the exchange would report
    // itself as interrupted after the first attempt instead.
    let err = gh
        .create_comment(&repo, IssueNumber(1), "x")
        .await
        .unwrap_err();
    assert!(matches!(err, GitHubError::Network(_)), "{err}");
    assert!(!err.to_string().contains("interrupted"), "{err}");
}

// ---------------------------------------------------------------- metrics

#[test]
fn rate_limit_remaining_and_calls_are_recorded_as_metrics() {
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    // A current-thread runtime keeps every task on this thread, where the
    // local recorder is installed.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    metrics::with_local_recorder(&recorder, || {
        rt.block_on(async {
            let w = world().await;
            let n = w.issue();
            w.fake.set_rate_limit_remaining(1235);
            w.gh.get_issue(&w.repo, n).await.unwrap();
        })
    });
    let text = handle.render();
    // The exchange left 1234, the GET 1233: the gauge holds the latest.
    assert!(
        text.contains(r#"closer_github_rate_limit_remaining{installation="7"} 1233"#),
        "{text}"
    );
    assert!(
        text.contains(r#"closer_github_api_calls_total{method="GET",status="200"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(r#"closer_github_api_calls_total{method="POST",status="201"} 1"#),
        "{text}"
    );
}

/// Collects everything a tracing subscriber writes.
#[derive(Clone, Default)]
struct LogBuffer(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The probe below, run alone.
const LOG_PROBE: &str = "github_client::log_probe";

#[test]
fn tokens_and_jwts_never_reach_the_logs() {
    // tracing caches, per callsite and process-wide, whether anyone
    // listens; another test's thread meeting the retry's callsite while no
    // subscriber of its own listened could leave it silent here (seen in
    // CI: the retry's line missing, so the absence of tokens proved
    // nothing). A process of its own has no other test's threads.
    crate::support::alone::run(LOG_PROBE, &[]);
}

/// Runs only in the child started above (it returns at once elsewhere).
#[test]
fn log_probe() {
    if !crate::support::alone::is_the_child_for(LOG_PROBE) {
        return;
    }
    let logs = LogBuffer::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let token = tracing::subscriber::with_default(subscriber, || {
        rt.block_on(async {
            let w = world().await;
            let n = w.issue();
            w.fake.inject(Fault::Status(502).times(1).method("GET"));
            w.gh.get_issue(&w.repo, n).await.unwrap();
            w.gh.create_comment(&w.repo, n, "hello").await.unwrap();
            w.fake.revoke_tokens();
            let _ = w.gh.get_issue(&w.repo, n).await;
            w.app.app_info().await.unwrap();
            use secrecy::ExposeSecret;
            w.gh.token().await.unwrap().expose_secret().to_owned()
        })
    });
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(
        text.contains("retrying GitHub call"),
        "the retry was logged:\n{text}"
    );
    assert!(!text.contains(&token), "a token was logged:\n{text}");
    assert!(!text.contains("ghs_"), "a token was logged:\n{text}");
    assert!(
        !text.contains("Bearer"),
        "an Authorization header was logged:\n{text}"
    );
    assert!(!text.contains("eyJ"), "a JWT was logged:\n{text}");
    crate::support::alone::finished(LOG_PROBE);
}

// ---------------------------------------------------------------- dry run

#[tokio::test]
async fn dry_run_records_writes_and_sends_none() {
    let recorder = Arc::new(MemoryRecorder::new());
    let clock = Arc::new(ManualClock::new(START));
    let fake = FakeGitHub::start_with_clock(clock.clone()).await;
    fake.add_installation(INSTALLATION, "acme");
    let repo = fake.add_repo(INSTALLATION, "acme/widget");
    let n = fake.open_issue(&repo, "alice", "t", "b");
    let mut s = settings(&fake);
    s.dry_run = true;
    let dyn_recorder: Arc<dyn WriteRecorder> = recorder.clone();
    let app = GitHubApp::new(s, clock, Some(dyn_recorder)).unwrap();
    let gh = app
        .installation(InstallationId(INSTALLATION))
        .await
        .unwrap();
    assert!(gh.is_dry_run());

    // Reads are real.
    assert_eq!(gh.get_issue(&repo, n).await.unwrap().title, "t");
    // Writes are recorded, answered with synthetic values, and not sent.
    let comment = gh.create_comment(&repo, n, "status").await.unwrap();
    assert_eq!(comment.id.0, 0);
    assert_eq!(comment.body, "status");
    gh.add_labels(&repo, n, &["phase:processing"])
        .await
        .unwrap();
    gh.close_issue(&repo, n, StateReason::Completed)
        .await
        .unwrap();
    let pr = NewPullRequest {
        title: "Fix".into(),
        body: "Closes #1".into(),
        head: "closer/issue-1".into(),
        base: "main".into(),
    };
    assert_eq!(
        gh.create_pull(&repo, &pr).await.unwrap().number,
        IssueNumber(0)
    );

    assert!(
        fake.writes().is_empty(),
        "the fake saw a write: {:?}",
        fake.writes()
    );
    assert!(fake.comments(&repo, n).is_empty());
    assert_eq!(fake.issue(&repo, n).state, "open");
    let writes = recorder.writes();
    let summary: Vec<(String, String)> = writes
        .iter()
        .map(|w| (w.method.clone(), w.path.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("POST".into(), "/repos/acme/widget/issues/1/comments".into()),
            ("POST".into(), "/repos/acme/widget/issues/1/labels".into()),
            ("PATCH".into(), "/repos/acme/widget/issues/1".into()),
            ("POST".into(), "/repos/acme/widget/pulls".into()),
        ]
    );
    assert_eq!(writes[0].body.as_deref(), Some(r#"{"body":"status"}"#));
    assert!(
        writes[2]
            .body
            .as_deref()
            .unwrap()
            .contains(r#""state_reason":"completed""#)
    );
}

#[tokio::test]
async fn dry_run_without_credentials_records_writes_and_refuses_reads() {
    let fake = FakeGitHub::start().await;
    let recorder = Arc::new(MemoryRecorder::new());
    let s = GitHubSettings {
        api_url: fake.url(),
        dry_run: true,
        ..GitHubSettings::default()
    };
    let dyn_recorder: Arc<dyn WriteRecorder> = recorder.clone();
    let app = GitHubApp::new(s, closer::clock::system(), Some(dyn_recorder)).unwrap();
    let gh = app.installation(InstallationId(1)).await.unwrap();
    let repo = RepoName::new("acme", "widget");

    assert_eq!(
        gh.get_issue(&repo, IssueNumber(1)).await.unwrap_err(),
        GitHubError::NoCredentials
    );
    assert_eq!(
        app.app_info().await.unwrap_err(),
        GitHubError::NoCredentials
    );
    gh.create_comment(&repo, IssueNumber(1), "hi")
        .await
        .unwrap();
    assert_eq!(recorder.writes().len(), 1);
    assert!(fake.requests().is_empty(), "nothing reaches GitHub");
}

// ---------------------------------------------------------------- typed operations

#[tokio::test]
async fn repository_and_permissions_round_trip() {
    let w = world().await;
    w.fake.set_default_branch(&w.repo, "trunk");
    w.fake.set_clone_url(&w.repo, "file:///srv/widget.git");
    w.fake.set_private(&w.repo, true);
    let repo = w.gh.get_repository(&w.repo).await.unwrap();
    assert_eq!(repo.full_name, w.repo);
    assert_eq!(repo.default_branch, "trunk");
    assert_eq!(repo.clone_url, "file:///srv/widget.git");
    assert!(repo.private);

    w.fake.set_permission(&w.repo, "maya", "maintain");
    w.fake.set_permission(&w.repo, "tom", "triage");
    assert_eq!(
        w.gh.collaborator_permission(&w.repo, "maya").await.unwrap(),
        Permission::Maintain
    );
    assert_eq!(
        w.gh.collaborator_permission(&w.repo, "tom").await.unwrap(),
        Permission::Triage
    );
    assert_eq!(
        w.gh.collaborator_permission(&w.repo, "stranger")
            .await
            .unwrap(),
        Permission::None
    );
    // An organisation's custom role: `role_name` is its own name, GitHub
    // gives its base in `permission`, and that is what counts.
    w.fake
        .set_permission(&w.repo, "audrey", "security-auditor/write");
    w.fake.set_permission(&w.repo, "rob", "docs-helper/read");
    assert_eq!(
        w.gh.collaborator_permission(&w.repo, "audrey")
            .await
            .unwrap(),
        Permission::Write
    );
    assert_eq!(
        w.gh.collaborator_permission(&w.repo, "rob").await.unwrap(),
        Permission::Read
    );

    let other = RepoName::new("someone", "else");
    assert_eq!(
        w.gh.get_repository(&other).await.unwrap_err(),
        GitHubError::NotFound
    );
}

#[tokio::test]
async fn issues_round_trip_and_close_with_a_reason() {
    let w = world().await;
    let n = w.issue();
    w.fake.label_issue(&w.repo, n, "closer");
    let issue = w.gh.get_issue(&w.repo, n).await.unwrap();
    assert_eq!(issue.title, "Fix the widget");
    assert_eq!(issue.body, "It is broken.");
    assert_eq!(issue.state, IssueState::Open);
    assert_eq!(issue.labels, vec!["closer".to_owned()]);
    assert_eq!(issue.author.login, "alice");
    assert!(!issue.author.is_bot);
    assert!(!issue.is_pull_request);

    let edit = IssueEdit {
        title: Some("Fix the widget (verified)".into()),
        body: Some("Done.".into()),
        ..IssueEdit::default()
    };
    w.gh.edit_issue(&w.repo, n, &edit).await.unwrap();
    w.gh.close_issue(&w.repo, n, StateReason::NotPlanned)
        .await
        .unwrap();
    let stored = w.fake.issue(&w.repo, n);
    assert_eq!(stored.title, "Fix the widget (verified)");
    assert_eq!(stored.state, "closed");
    assert_eq!(stored.state_reason.as_deref(), Some("not_planned"));

    let issue = w.gh.get_issue(&w.repo, n).await.unwrap();
    assert_eq!(issue.state, IssueState::Closed);
    assert_eq!(issue.state_reason, Some(StateReason::NotPlanned));
}

#[tokio::test]
async fn comments_round_trip_with_authorship() {
    let w = world().await;
    let n = w.issue();
    w.fake
        .comment_as(&w.repo, n, FakeUser::user("alice"), "/closer run");
    w.fake
        .comment_as(&w.repo, n, FakeUser::bot("dependabot[bot]"), "bump");
    let mine =
        w.gh.create_comment(&w.repo, n, "<!-- closer:run=1 -->\nWorking")
            .await
            .unwrap();
    assert_eq!(mine.author, w.fake.bot_login());
    assert!(mine.author_is_bot);
    assert_eq!(mine.performed_via_app_id, Some(w.fake.app_id() as i64));

    let edited =
        w.gh.edit_comment(&w.repo, mine.id, "<!-- closer:run=1 -->\nDone")
            .await
            .unwrap();
    assert_eq!(edited.id, mine.id);

    let all = w.gh.list_comments(&w.repo, n).await.unwrap();
    let view: Vec<(&str, bool, Option<i64>)> = all
        .iter()
        .map(|c| (c.author.as_str(), c.author_is_bot, c.performed_via_app_id))
        .collect();
    assert_eq!(
        view,
        vec![
            ("alice", false, None),
            ("dependabot[bot]", true, None),
            ("closer-test[bot]", true, Some(w.fake.app_id() as i64)),
        ]
    );
    assert_eq!(all[2].body, "<!-- closer:run=1 -->\nDone");
    assert_eq!(
        w.fake.comments(&w.repo, n)[2].body,
        "<!-- closer:run=1 -->\nDone"
    );

    w.gh.add_comment_reaction(&w.repo, all[0].id, Reaction::Eyes)
        .await
        .unwrap();
    w.gh.add_issue_reaction(&w.repo, n, Reaction::Rocket)
        .await
        .unwrap();
    let reactions = w.fake.reactions(&w.repo);
    assert_eq!(reactions.len(), 2);
    assert_eq!(reactions[0].subject, ReactionSubject::Comment(all[0].id.0));
    assert_eq!(reactions[0].content, "eyes");
    assert_eq!(reactions[1].subject, ReactionSubject::Issue(n.0));
    assert_eq!(reactions[1].content, "rocket");
}

#[tokio::test]
async fn comments_are_listed_across_pages() {
    let w = world().await;
    let n = w.issue();
    for i in 0..150 {
        w.fake
            .comment_as(&w.repo, n, FakeUser::user("alice"), &format!("c{i}"));
    }
    let all = w.gh.list_comments(&w.repo, n).await.unwrap();
    assert_eq!(all.len(), 150);
    assert_eq!(all[149].body, "c149");
    assert_eq!(
        w.fake
            .requests_to("GET", &format!("{}/comments", w.issue_path(n)))
            .len(),
        2
    );
}

#[tokio::test]
async fn labels_round_trip() {
    let w = world().await;
    let n = w.issue();
    let phase = Label {
        name: "phase:review".into(),
        color: "#0e8a16".into(),
        description: Some("closer: in review".into()),
    };
    let created = w.gh.create_label(&w.repo, &phase).await.unwrap();
    assert!(
        matches!(created, LabelCreated::Created(ref l) if l.color == "0e8a16"),
        "{created:?}"
    );
    assert_eq!(
        w.gh.create_label(&w.repo, &phase).await.unwrap(),
        LabelCreated::AlreadyExists
    );
    assert_eq!(
        w.fake
            .requests_to("POST", "/repos/acme/widget/labels")
            .len(),
        2
    );
    let stored = w.fake.repo_labels(&w.repo);
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].color, "0e8a16");
    assert_eq!(stored[0].description.as_deref(), Some("closer: in review"));
    assert_eq!(
        w.gh.list_repo_labels(&w.repo).await.unwrap()[0].name,
        "phase:review"
    );

    w.gh.add_labels(&w.repo, n, &["phase:review", "closer"])
        .await
        .unwrap();
    assert_eq!(w.fake.labels(&w.repo, n), vec!["phase:review", "closer"]);
    w.gh.remove_label(&w.repo, n, "phase:review").await.unwrap();
    assert_eq!(w.fake.labels(&w.repo, n), vec!["closer"]);
    // Removing a label that is not there is not an error.
    w.gh.remove_label(&w.repo, n, "phase:review").await.unwrap();
}

#[tokio::test]
async fn pull_requests_round_trip() {
    let w = world().await;
    assert_eq!(
        w.gh.find_pull_by_head(&w.repo, "closer/issue-1")
            .await
            .unwrap(),
        None
    );
    let new = NewPullRequest {
        title: "Fix the widget".into(),
        body: "Closes #1".into(),
        head: "closer/issue-1".into(),
        base: "main".into(),
    };
    let pr = w.gh.create_pull(&w.repo, &new).await.unwrap();
    assert_eq!(pr.head_ref, "closer/issue-1");
    assert_eq!(pr.base_ref, "main");
    assert_eq!(pr.state, PullState::Open);
    assert!(!pr.merged);

    // A second one for the same head is refused by GitHub (422, sent once).
    let err = w.gh.create_pull(&w.repo, &new).await.unwrap_err();
    assert!(
        matches!(err, GitHubError::Validation { status: 422, .. }),
        "{err}"
    );
    assert_eq!(
        w.fake.requests_to("POST", "/repos/acme/widget/pulls").len(),
        2
    );

    let found =
        w.gh.find_pull_by_head(&w.repo, "closer/issue-1")
            .await
            .unwrap();
    assert_eq!(found.as_ref().map(|p| p.number), Some(pr.number));
    assert_eq!(
        w.gh.find_pull_by_head(&w.repo, "closer/issue-2")
            .await
            .unwrap(),
        None
    );

    let edit = PullEdit {
        body: Some("Closes #1\n\nUpdated".into()),
        ..PullEdit::default()
    };
    w.gh.update_pull(&w.repo, pr.number, &edit).await.unwrap();
    assert_eq!(
        w.fake.pulls(&w.repo)[0].body.as_deref(),
        Some("Closes #1\n\nUpdated")
    );

    w.fake.merge_pull(&w.repo, pr.number);
    let merged =
        w.gh.find_pull_by_head(&w.repo, "closer/issue-1")
            .await
            .unwrap()
            .unwrap();
    assert!(merged.merged);
    assert_eq!(merged.state, PullState::Closed);
    assert!(w.gh.get_pull(&w.repo, pr.number).await.unwrap().merged);
}

/// Runs futures concurrently as tasks and collects their results in order.
async fn futures_join_all<F>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send,
{
    let handles: Vec<_> = futures.into_iter().map(tokio::spawn).collect();
    let mut out = Vec::new();
    for h in handles {
        out.push(h.await.expect("task"));
    }
    out
}
