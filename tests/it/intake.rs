//! Webhook intake stories: what is accepted, what is refused, and that a
//! delivery is stored exactly once.

use closer::model::DeliveryStatus;
use closer::store::{Backend, deliveries, installations};
use closer::worker::Settled;
use reqwest::StatusCode;

use crate::support::app::{SECRET, TestApp};
use crate::support::db::TestDb;
use crate::support::{fixture, fixture_for_installation, sign, unique};

async fn app(name: &str) -> TestApp {
    TestApp::start(TestDb::new(name).await).await
}

#[tokio::test]
async fn a_signed_delivery_is_stored_with_its_job_then_processed() {
    let mut app = app("signed").await;
    let body = fixture_for_installation("issues.opened.json", 42);
    let status = app.deliver("issues", "d-signed", &body).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let settled = app.settled(1).await;
    assert_eq!(settled[0].outcome, Settled::Done);
    assert_eq!(settled[0].key, "thread:Codertocat/Hello-World#1");

    let stored = deliveries::get(app.store.pool(), "d-signed")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.event, "issues");
    assert_eq!(stored.action.as_deref(), Some("opened"));
    assert_eq!(stored.installation_id, Some(42));
    assert_eq!(stored.repository.as_deref(), Some("Codertocat/Hello-World"));
    assert_eq!(
        stored.payload.as_deref(),
        Some(body.as_slice()),
        "the payload round-trips through compression"
    );
    assert_eq!(stored.status, DeliveryStatus::Processed);
    assert_eq!(app.count("jobs").await, 1);
    app.stop().await;
}

#[tokio::test]
async fn bad_signatures_are_refused_and_nothing_is_stored() {
    let app = app("badsig").await;
    let body = fixture("issues.opened.json");
    let good = sign(SECRET, &body);
    let other_body = sign(SECRET, b"{\"something\":\"else\"}");
    let wrong_key = sign("not the secret", &body);
    let no_prefix = good.trim_start_matches("sha256=").to_owned();
    let sha1_prefix = format!("sha1={no_prefix}");
    let not_hex = "sha256=zzzz".to_owned();
    let cases: Vec<(&str, Option<&str>)> = vec![
        ("missing", None),
        ("over another body", Some(&other_body)),
        ("wrong key", Some(&wrong_key)),
        ("no prefix", Some(&no_prefix)),
        ("wrong prefix", Some(&sha1_prefix)),
        ("not hex", Some(&not_hex)),
        ("empty", Some("")),
    ];
    for (case, signature) in cases {
        let mut headers = vec![("x-github-event", "issues"), ("x-github-delivery", "d-bad")];
        if let Some(signature) = signature {
            headers.push(("x-hub-signature-256", signature));
        }
        let status = app.post(&headers, body.clone()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{case}");
    }
    assert_eq!(app.count("deliveries").await, 0);
    assert_eq!(app.count("jobs").await, 0);
    let (_, metrics) = app.get("/metrics").await;
    for reason in ["missing_signature", "bad_signature", "malformed_signature"] {
        assert!(
            metrics.contains(&format!(
                "closer_webhook_rejections_total{{reason=\"{reason}\"}}"
            )),
            "{reason} not counted in:\n{metrics}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn missing_headers_and_malformed_json_are_bad_requests() {
    let app = app("badreq").await;
    let body = fixture("issues.opened.json");
    let signature = sign(SECRET, &body);
    let no_event = app
        .post(
            &[
                ("x-github-delivery", "d1"),
                ("x-hub-signature-256", &signature),
            ],
            body.clone(),
        )
        .await;
    assert_eq!(no_event, StatusCode::BAD_REQUEST);
    let no_delivery = app
        .post(
            &[
                ("x-github-event", "issues"),
                ("x-hub-signature-256", &signature),
            ],
            body.clone(),
        )
        .await;
    assert_eq!(no_delivery, StatusCode::BAD_REQUEST);
    for bad in [
        &b"{not json"[..],
        b"",
        b"[1,2,3]",
        b"\"a string\"",
        b"{\"action\": 7}",
    ] {
        let status = app.deliver("issues", "d-json", bad).await;
        assert_eq!(
            status,
            StatusCode::BAD_REQUEST,
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    assert_eq!(app.count("deliveries").await, 0);
    app.stop().await;
}

#[tokio::test]
async fn a_body_over_25_mb_is_refused_with_413() {
    let app = app("toolarge").await;
    let mut body = b"{\"pad\":\"".to_vec();
    body.resize(25 * 1024 * 1024 + 1 - 2, b'a');
    body.extend_from_slice(b"\"}");
    assert_eq!(body.len(), 25 * 1024 * 1024 + 1);
    let status = app.deliver("issues", "d-large", &body).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(app.count("deliveries").await, 0);
    app.stop().await;
}

#[tokio::test]
async fn the_same_delivery_twice_in_a_row_is_stored_once() {
    let mut app = app("dup-seq").await;
    let body = fixture("issues.labeled.json");
    assert_eq!(
        app.deliver("issues", "d-dup", &body).await,
        StatusCode::ACCEPTED
    );
    assert_eq!(app.deliver("issues", "d-dup", &body).await, StatusCode::OK);
    app.settled(1).await;
    assert_eq!(app.deliver("issues", "d-dup", &body).await, StatusCode::OK);
    assert_eq!(app.count("deliveries").await, 1);
    assert_eq!(app.count("jobs").await, 1);
    app.stop().await;
}

#[tokio::test]
async fn the_same_delivery_posted_concurrently_is_stored_once() {
    let app = app("dup-conc").await;
    let body = fixture("issues.labeled.json");
    let posts = (0..24).map(|_| app.deliver("issues", "d-race", &body));
    let statuses = futures_util::future::join_all(posts).await;
    assert!(statuses.iter().all(|s| s.is_success()), "{statuses:?}");
    let accepted = statuses
        .iter()
        .filter(|s| **s == StatusCode::ACCEPTED)
        .count();
    assert_eq!(accepted, 1, "exactly one request stores it: {statuses:?}");
    assert_eq!(app.count("deliveries").await, 1);
    assert_eq!(app.count("jobs").await, 1);
    app.stop().await;
}

/// A delivery the database refuses is answered 503 and leaves nothing behind,
/// and it does not take the deliveries batched with it down too: they are
/// stored. Once the database takes it again, GitHub's redelivery is stored.
#[tokio::test]
async fn a_delivery_the_database_refuses_fails_alone_and_is_stored_on_redelivery() {
    let mut app = app("refused").await;
    let pool = app.store.pool();
    let refuse: &[&str] = match app.store.backend() {
        Backend::Sqlite => &["CREATE TRIGGER refuse_poison BEFORE INSERT ON deliveries \
             WHEN NEW.delivery_id = 'd-poison' \
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"],
        Backend::Postgres => &[
            "CREATE FUNCTION refuse_poison() RETURNS trigger AS $$ BEGIN \
             IF NEW.delivery_id = 'd-poison' THEN RAISE EXCEPTION 'refused by the test'; \
             END IF; RETURN NEW; END $$ LANGUAGE plpgsql",
            "CREATE TRIGGER refuse_poison BEFORE INSERT ON deliveries \
             FOR EACH ROW EXECUTE FUNCTION refuse_poison()",
        ],
    };
    for sql in refuse {
        sqlx::raw_sql(sqlx::AssertSqlSafe(*sql))
            .execute(pool)
            .await
            .unwrap();
    }
    let body = fixture("issues.labeled.json");
    let ids: Vec<String> = (0..12)
        .map(|i| match i {
            5 => "d-poison".to_owned(),
            _ => format!("d-ok-{i}"),
        })
        .collect();
    // Hold the write lock while the deliveries arrive, so they queue up and
    // the writer takes the poisoned one in a batch with others.
    let mut blocker = pool.acquire().await.unwrap();
    let lock = match app.store.backend() {
        Backend::Sqlite => "BEGIN IMMEDIATE",
        Backend::Postgres => "BEGIN; LOCK TABLE deliveries IN EXCLUSIVE MODE",
    };
    sqlx::raw_sql(lock).execute(&mut *blocker).await.unwrap();
    let posts = ids.iter().map(|id| app.deliver("issues", id, &body));
    let release = async {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        sqlx::raw_sql("COMMIT")
            .execute(&mut *blocker)
            .await
            .unwrap();
    };
    let (statuses, ()) = tokio::join!(futures_util::future::join_all(posts), release);
    drop(blocker);
    for (id, status) in ids.iter().zip(&statuses) {
        let expected = match id.as_str() {
            "d-poison" => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::ACCEPTED,
        };
        assert_eq!(*status, expected, "{id}: {statuses:?}");
    }
    assert_eq!(app.count("deliveries").await, 11);
    assert_eq!(app.count("jobs").await, 11, "no job without its delivery");
    assert!(
        deliveries::get(pool, "d-poison").await.unwrap().is_none(),
        "the refused delivery left nothing behind"
    );

    let allow = match app.store.backend() {
        Backend::Sqlite => "DROP TRIGGER refuse_poison",
        Backend::Postgres => "DROP TRIGGER refuse_poison ON deliveries",
    };
    sqlx::raw_sql(allow).execute(pool).await.unwrap();
    assert_eq!(
        app.deliver("issues", "d-poison", &body).await,
        StatusCode::ACCEPTED,
        "redelivered once the database takes it"
    );
    app.settled(12).await;
    assert_eq!(app.count("deliveries").await, 12);
    assert_eq!(app.count("jobs").await, 12);
    app.stop().await;
}

#[tokio::test]
async fn unsubscribed_events_are_recorded_as_ignored_without_a_job() {
    let app = app("ignored").await;
    let status = app
        .deliver("star", "d-star", b"{\"action\":\"created\"}")
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let stored = deliveries::get(app.store.pool(), "d-star")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, DeliveryStatus::Ignored);
    assert_eq!(
        stored.payload, None,
        "the payload of an ignored delivery is not kept"
    );
    assert_eq!(app.count("jobs").await, 0);
    app.stop().await;
}

#[tokio::test]
async fn ping_is_answered_and_recorded() {
    let mut app = app("ping").await;
    let status = app.deliver("ping", "d-ping", &fixture("ping.json")).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    app.settled(1).await;
    let stored = deliveries::get(app.store.pool(), "d-ping")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, DeliveryStatus::Processed);
    assert!(stored.outcome.unwrap().starts_with("ping"));
    app.stop().await;
}

#[tokio::test]
async fn installation_events_keep_the_installation_and_its_repositories() {
    let mut app = app("installation").await;
    let created = fixture("installation.created.json");
    let id: i64 =
        serde_json::from_slice::<serde_json::Value>(&created).unwrap()["installation"]["id"]
            .as_i64()
            .unwrap();
    app.deliver("installation", &unique("inst"), &created).await;
    app.settled(1).await;
    let installation = installations::get(app.store.pool(), id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(installation.account_login, "Codertocat");
    assert_eq!(installation.suspended_at, None);
    assert!(
        !installations::repositories(app.store.pool(), id)
            .await
            .unwrap()
            .is_empty()
    );

    let mut suspend: serde_json::Value =
        serde_json::from_slice(&fixture("installation.suspend.json")).unwrap();
    suspend["installation"]["id"] = id.into();
    app.deliver(
        "installation",
        &unique("inst"),
        suspend.to_string().as_bytes(),
    )
    .await;
    app.settled(1).await;
    let installation = installations::get(app.store.pool(), id)
        .await
        .unwrap()
        .unwrap();
    assert!(installation.suspended_at.is_some());

    let mut deleted: serde_json::Value =
        serde_json::from_slice(&fixture("installation.deleted.json")).unwrap();
    deleted["installation"]["id"] = id.into();
    app.deliver(
        "installation",
        &unique("inst"),
        deleted.to_string().as_bytes(),
    )
    .await;
    app.settled(1).await;
    assert!(
        installations::get(app.store.pool(), id)
            .await
            .unwrap()
            .is_none()
    );
    app.stop().await;
}

#[tokio::test]
async fn every_fixture_is_accepted_and_processed_or_triaged_away() {
    let mut app = app("fixtures").await;
    let dir = format!(
        "{}/tests/fixtures/github-webhooks",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    // Sorted, the comments and edits of issue #1 come before the deliveries
    // that would queue work on it; the pull requests (#2, branch `changes`)
    // are not closer's. Those are triaged away; the rest is processed.
    let triaged_away = |name: &str| {
        name.starts_with("issue_comment.")
            || name.starts_with("issues.edited")
            || name.starts_with("pull_request")
    };
    let mut expected = std::collections::BTreeMap::new();
    for name in &names {
        let event = name.split('.').next().unwrap();
        let id = unique(name);
        let status = app.deliver(event, &id, &fixture(name)).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{name}");
        let status = match triaged_away(name) {
            true => DeliveryStatus::Ignored,
            false => DeliveryStatus::Processed,
        };
        expected.insert(id, (name.clone(), status));
    }
    let processed = expected
        .values()
        .filter(|(_, s)| *s == DeliveryStatus::Processed)
        .count();
    assert_eq!(
        processed, 24,
        "installation, ping, labeled, opened and repository fixtures"
    );
    let settled = app.settled(processed).await;
    assert!(
        settled.iter().all(|s| s.outcome == Settled::Done),
        "{settled:?}"
    );
    for (id, (name, status)) in &expected {
        let stored = deliveries::get(app.store.pool(), id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(stored.status, *status, "{name}");
    }
    assert_eq!(app.count("jobs").await, processed as i64);
    app.stop().await;
}

#[tokio::test]
async fn a_malformed_but_signed_payload_is_kept_as_failed_not_retried() {
    let mut app = app("failedparse").await;
    // Valid JSON, valid signature, but an `issues` event without an issue.
    let status = app
        .deliver(
            "issues",
            "d-noissue",
            b"{\"action\":\"opened\",\"sender\":{\"login\":\"a\",\"id\":1}}",
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let settled = app.settled(1).await;
    assert_eq!(settled[0].outcome, Settled::Done);
    let stored = deliveries::get(app.store.pool(), "d-noissue")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.status, DeliveryStatus::Failed);
    assert!(stored.outcome.unwrap().contains("missing `repository`"));
    app.stop().await;
}

#[tokio::test]
async fn health_and_readiness_answer() {
    let app = app("health").await;
    assert_eq!(app.get("/healthz").await.0, StatusCode::OK);
    assert_eq!(
        app.get("/readyz").await,
        (StatusCode::OK, "ready\n".to_owned())
    );
    let (status, metrics) = app.get("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        metrics.contains("closer_jobs{state=\"queued\"}"),
        "{metrics}"
    );
    app.stop().await;
}
