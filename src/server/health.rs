//! `/healthz` (the process answers) and `/readyz` (the database answers, its
//! schema is current, and every worker this process was asked to run is
//! running: a dead worker waiting for its restart makes it unready). Neither
//! reveals error details: they are logged.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;

use super::AppState;

pub async fn healthz() -> &'static str {
    "ok\n"
}

pub async fn readyz(State(state): State<Arc<AppState>>) -> (StatusCode, &'static str) {
    if let Some(workers) = &state.workers
        && !workers.all_running()
    {
        tracing::warn!(
            live = workers.live(),
            configured = workers.configured(),
            "not ready: fewer workers run than configured"
        );
        return (StatusCode::SERVICE_UNAVAILABLE, "not ready: workers\n");
    }
    match state.store.ready().await {
        Ok(()) => (StatusCode::OK, "ready\n"),
        Err(e) => {
            tracing::warn!(error = %e, "not ready");
            (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
        }
    }
}
