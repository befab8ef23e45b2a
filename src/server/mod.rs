//! The HTTP face of closer: the webhook intake, health, readiness and metrics,
//! served by [`listen`], which bounds what a client can hold (connections,
//! time, memory). Handlers store and answer; they never do the work (workers
//! do, from the queue), so GitHub's 10-second delivery timeout is never at
//! risk.

pub mod health;
pub mod listen;
pub mod metrics;
pub mod signals;
pub mod webhook;

use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::routing::{get, post};
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::Sha256;
use tokio::sync::{Notify, Semaphore};

use crate::config::server::HttpLimits;
use crate::store::Store;
use crate::store::writer::IntakeWriter;
use crate::worker::WorkerHealth;

/// What the handlers share.
pub struct AppState {
    pub store: Store,
    /// `None` in a worker-only process: it answers health and metrics only.
    pub writer: Option<IntakeWriter>,
    /// HMAC keyed with the webhook secret, cloned per request.
    pub webhook_mac: Hmac<Sha256>,
    pub metrics: metrics_exporter_prometheus::PrometheusHandle,
    /// Woken when a delivery's job is enqueued, so local workers start at once.
    pub jobs_ready: Arc<Notify>,
    /// Attempts before a delivery job is dead-lettered.
    pub max_attempts: i64,
    /// The App's slug once closer has asked GitHub for it: triage then tells
    /// a mention of the App from any other mention.
    pub app_slug: Arc<OnceLock<String>>,
    /// Bytes of webhook bodies that may be held at once (one permit a byte).
    pub body_budget: Semaphore,
    /// This process's workers, for `/readyz`; `None` in an intake-only process.
    pub workers: Option<WorkerHealth>,
}

impl AppState {
    pub fn new(
        store: Store,
        writer: Option<IntakeWriter>,
        webhook_secret: &SecretString,
        jobs_ready: Arc<Notify>,
        max_attempts: i64,
    ) -> AppState {
        let webhook_mac = Hmac::<Sha256>::new_from_slice(webhook_secret.expose_secret().as_bytes())
            .expect("HMAC accepts keys of any length");
        AppState {
            store,
            writer,
            webhook_mac,
            metrics: metrics::handle(),
            jobs_ready,
            max_attempts,
            app_slug: Arc::new(OnceLock::new()),
            body_budget: Semaphore::new(HttpLimits::default().body_memory_bytes),
            workers: None,
        }
    }

    /// With the operator's HTTP limits (the webhook body budget).
    pub fn with_http_limits(mut self, limits: &HttpLimits) -> AppState {
        self.body_budget = Semaphore::new(limits.body_memory_bytes);
        self
    }

    /// With the workers `/readyz` reports on.
    pub fn with_workers(mut self, workers: WorkerHealth) -> AppState {
        self.workers = Some(workers);
        self
    }
}

/// The router; the webhook path is the operator's choice.
pub fn router(state: Arc<AppState>, webhook_path: &str) -> Router {
    let mut router = Router::new()
        .route("/healthz", get(health::healthz))
        .route("/readyz", get(health::readyz))
        .route("/metrics", get(metrics::render));
    if state.writer.is_some() {
        router = router.route(webhook_path, post(webhook::receive));
    }
    router.with_state(state)
}
