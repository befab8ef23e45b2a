//! `/healthz` (the process answers) and `/readyz` (the database answers and
//! its schema is current). Neither reveals error details: they are logged.

use std::sync::Arc;

use axum::extract::State;
use axum::http::StatusCode;

use super::AppState;

pub async fn healthz() -> &'static str {
    "ok\n"
}

pub async fn readyz(State(state): State<Arc<AppState>>) -> (StatusCode, &'static str) {
    match state.store.ready().await {
        Ok(()) => (StatusCode::OK, "ready\n"),
        Err(e) => {
            tracing::warn!(error = %e, "not ready");
            (StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
        }
    }
}
