//! The intake tester: closer's real router, intake writer and workers running
//! in-process on 127.0.0.1, fed signed webhooks over real HTTP. Tests wait on
//! the workers' "settled" signals, never on sleeps.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use closer::config::server::HttpLimits;
use closer::model::JobKind;
use closer::server::{self, AppState};
use closer::store::Store;
use closer::store::writer::IntakeWriter;
use closer::worker::delivery::DeliveryRunner;
use closer::worker::{JobRunner, JobSettled, WorkerPool, WorkerSettings};
use reqwest::StatusCode;
use secrecy::SecretString;
use tokio::sync::{Notify, broadcast, watch};

use super::db::TestDb;

pub const SECRET: &str = "it's a secret to everybody";

pub struct TestApp {
    pub url: String,
    pub store: Store,
    pub client: reqwest::Client,
    settled: broadcast::Receiver<JobSettled>,
    shutdown: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
    /// Kept so a SQLite temp dir outlives the app.
    pub db: TestDb,
    /// The App slug intake's triage knows (unset until a test sets it).
    pub app_slug: Arc<OnceLock<String>>,
}

impl TestApp {
    /// Starts intake and two workers on a fresh database.
    pub async fn start(db: TestDb) -> TestApp {
        let store = db.store().await;
        let (shutdown, shutdown_rx) = watch::channel(false);
        let ready = Arc::new(Notify::new());
        let (writer, _writer_task) =
            IntakeWriter::spawn(store.clone(), 1024).expect("intake writer");
        let mut runners: HashMap<JobKind, Arc<dyn JobRunner>> = HashMap::new();
        runners.insert(
            JobKind::Delivery,
            Arc::new(DeliveryRunner::new(store.clone())),
        );
        let settings = WorkerSettings {
            poll_interval: Duration::from_millis(50),
            ..WorkerSettings::default()
        };
        let pool = WorkerPool::new(store.clone(), runners, settings, ready.clone());
        let settled = pool.subscribe();
        pool.spawn(2, "test", shutdown_rx.clone());
        let state = Arc::new(
            AppState::new(
                store.clone(),
                Some(writer),
                &SecretString::from(SECRET),
                ready,
                5,
            )
            .with_workers(pool.health()),
        );
        let app_slug = state.app_slug.clone();
        let app = server::router(state, "/webhooks");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let mut stop = shutdown_rx;
        let server = tokio::spawn(async move {
            let stopped = async move {
                let _ = stop.changed().await;
            };
            server::listen::serve(listener, app, HttpLimits::default(), stopped).await;
        });
        TestApp {
            url,
            store,
            client: crate::support::client(),
            settled,
            shutdown,
            server,
            db,
            app_slug,
        }
    }

    /// Posts a correctly signed delivery.
    pub async fn deliver(&self, event: &str, delivery_id: &str, body: &[u8]) -> StatusCode {
        self.post(
            &[
                ("x-github-event", event),
                ("x-github-delivery", delivery_id),
                ("x-hub-signature-256", &super::sign(SECRET, body)),
            ],
            body.to_vec(),
        )
        .await
    }

    /// Posts with exactly these headers.
    pub async fn post(&self, headers: &[(&str, &str)], body: Vec<u8>) -> StatusCode {
        let mut request = self
            .client
            .post(format!("{}/webhooks", self.url))
            .header("content-type", "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.expect("request sent").status()
    }

    pub async fn get(&self, path: &str) -> (StatusCode, String) {
        let response = self
            .client
            .get(format!("{}{path}", self.url))
            .send()
            .await
            .expect("request sent");
        let status = response.status();
        (status, response.text().await.unwrap_or_default())
    }

    /// Waits until the workers have settled `n` more jobs; returns them.
    pub async fn settled(&mut self, n: usize) -> Vec<JobSettled> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            match tokio::time::timeout(Duration::from_secs(20), self.settled.recv()).await {
                Ok(Ok(job)) => out.push(job),
                Ok(Err(e)) => panic!("settled channel: {e}"),
                Err(_) => panic!("only {} of {n} jobs settled within 20 s", out.len()),
            }
        }
        out
    }

    pub async fn count(&self, table: &str) -> i64 {
        use sqlx::Row;
        let sql = format!("SELECT COUNT(*) AS n FROM {table}");
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_one(self.store.pool())
            .await
            .unwrap()
            .get::<i64, _>("n")
    }

    pub async fn stop(self) {
        let _ = self.shutdown.send(true);
        let _ = self.server.await;
    }
}
