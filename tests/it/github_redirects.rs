//! GitHub as it really is: a renamed repository answers its old name with a
//! redirect, which the client follows for reads and writes alike (the token
//! only to the API's own host); a 3xx it does not follow is an error, never
//! a success; and a list longer than a page is read page by page through
//! the `Link` header.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::HeaderMap;
use closer::clock;
use closer::github::types::{InstallationId, RepoName};
use closer::github::{GitHubApp, GitHubError, GitHubSettings, InstallationClient, RetrySettings};

use crate::support::fake_github::{FakeGitHub, Fault};

const INSTALLATION: i64 = 7;

struct World {
    fake: FakeGitHub,
    gh: Arc<InstallationClient>,
    repo: RepoName,
    _app: GitHubApp,
}

async fn world() -> World {
    let fake = FakeGitHub::start().await;
    fake.add_installation(INSTALLATION, "acme");
    let repo = fake.add_repo(INSTALLATION, "acme/widget");
    let settings = GitHubSettings {
        api_url: fake.url(),
        app_id: Some(fake.app_id()),
        private_key: Some(fake.private_key_pem()),
        retry: RetrySettings {
            base_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(5),
            ..RetrySettings::default()
        },
        ..GitHubSettings::default()
    };
    let app = GitHubApp::new(settings, clock::system(), None).expect("app");
    let gh = app
        .installation(InstallationId(INSTALLATION))
        .await
        .unwrap();
    World {
        fake,
        gh,
        repo,
        _app: app,
    }
}

#[tokio::test]
async fn a_renamed_repository_is_followed_for_reads_and_writes() {
    let w = world().await;
    let number = w.fake.open_issue(&w.repo, "alice", "Fix it", "Broken.");
    let renamed = w.fake.rename_repo(&w.repo, "acme/gizmo");

    // Everything addressed to the old name, as closer's stored runs do.
    let issue = w.gh.get_issue(&w.repo, number).await.expect("read");
    assert_eq!(issue.title, "Fix it");
    let comment =
        w.gh.create_comment(&w.repo, number, "closer was here")
            .await
            .expect("write");
    assert_eq!(comment.body, "closer was here");
    w.gh.add_labels(&w.repo, number, &["closer:working"])
        .await
        .expect("labels");

    let comments = w.fake.comments(&renamed, number);
    assert_eq!(comments.len(), 1, "one comment, on the renamed repository");
    assert_eq!(comments[0].body, "closer was here");
    assert_eq!(w.fake.labels(&renamed, number), ["closer:working"]);
    // Control: the old name was answered with redirects, and each write was
    // sent once to each address.
    let old = w.fake.requests_to("POST", "/repos/acme/widget/issues");
    let new = w.fake.requests_to("POST", "/repos/acme/gizmo/issues");
    assert_eq!((old.len(), new.len()), (2, 2), "{old:?} {new:?}");
    assert_eq!(
        w.fake.requests_to("GET", "/repos/acme/widget/issues").len(),
        1
    );
}

/// A server elsewhere that records the `Authorization` header it receives.
async fn elsewhere() -> (String, Arc<Mutex<Vec<Option<String>>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let app = axum::Router::new().fallback(move |headers: HeaderMap| {
        let record = record.clone();
        async move {
            let auth = headers
                .get("authorization")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            record.lock().unwrap().push(auth);
            (
                axum::http::StatusCode::NOT_FOUND,
                "{\"message\":\"Not Found\"}",
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (url, seen)
}

#[tokio::test]
async fn the_token_is_never_sent_to_another_host() {
    let w = world().await;
    let number = w.fake.open_issue(&w.repo, "alice", "Fix it", "Broken.");
    let (other, seen) = elsewhere().await;
    w.fake
        .redirect_repo_to(&w.repo, &format!("{other}/repos/acme/widget"));

    let result = w.gh.get_issue(&w.repo, number).await;
    assert!(matches!(result, Err(GitHubError::NotFound)), "{result:?}");
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, [None], "followed, without the token");

    // Control: a redirect on the API's own host keeps the token (the fake
    // answers nothing without it).
    let renamed = w.fake.rename_repo(&w.repo, "acme/gizmo");
    w.fake.redirect_repo_to(&w.repo, "/repos/acme/gizmo");
    let issue = w.gh.get_issue(&w.repo, number).await.expect("same host");
    assert_eq!(issue.title, "Fix it");
    assert_eq!(w.fake.issue(&renamed, number).title, "Fix it");
}

#[tokio::test]
async fn a_redirect_closer_does_not_follow_is_an_error_not_a_success() {
    let w = world().await;
    let number = w.fake.open_issue(&w.repo, "alice", "Fix it", "Broken.");
    for status in [300, 303, 304, 305] {
        w.fake.inject(Fault::Status(status).times(1).method("POST"));
        let result = w.gh.create_comment(&w.repo, number, "hello").await;
        assert!(
            matches!(&result, Err(GitHubError::Unexpected { status: s, .. }) if *s == status),
            "{status}: {result:?}"
        );
    }
    // A 301 without a Location cannot be followed either.
    w.fake.inject(Fault::Status(301).times(1).method("GET"));
    let result = w.gh.get_issue(&w.repo, number).await;
    assert!(
        matches!(&result, Err(GitHubError::Unexpected { status: 301, .. })),
        "{result:?}"
    );
    assert!(w.fake.comments(&w.repo, number).is_empty());
    // Control: without the faults the same calls succeed.
    w.gh.create_comment(&w.repo, number, "hello").await.unwrap();
    assert_eq!(w.fake.comments(&w.repo, number).len(), 1);
}

#[tokio::test]
async fn labels_are_read_page_by_page() {
    let w = world().await;
    for i in 0..250 {
        w.fake.add_repo_label(&w.repo, &format!("label-{i:03}"));
    }
    let labels = w.gh.list_repo_labels(&w.repo).await.unwrap();
    assert_eq!(labels.len(), 250);
    assert_eq!(labels[249].name, "label-249");
    // Control: GitHub answers at most 100 a page; three pages were read.
    assert_eq!(
        w.fake.requests_to("GET", "/repos/acme/widget/labels").len(),
        3
    );
    // Every page was read with a token for this one repository, though
    // GitHub's `Link` names the next page by repository id.
    for (_, token) in w.fake.issued_tokens() {
        let only = std::collections::BTreeSet::from(["widget".to_owned()]);
        assert_eq!(token.repositories, Some(only), "{token:?}");
    }
}
