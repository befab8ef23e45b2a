//! Prometheus metrics. The recorder is process-global (the `metrics` crate's
//! model); it is installed once, and `/metrics` renders it after refreshing
//! the gauges that are read from the database (queue depth by state).
//!
//! A histogram keeps every sample recorded until the recorder's upkeep
//! folds them into its buckets; `/metrics` does that too, but a closer
//! nobody scrapes would hold every sample forever (8 bytes per job, per
//! intake batch). A thread of the recorder's own runs the upkeep every
//! [`UPKEEP_EVERY`].

use std::sync::{Arc, OnceLock};

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use super::AppState;
use crate::model::{JobState, Named};
use crate::store::jobs;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// How often recorded histogram samples are folded into their buckets.
pub const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// Buckets for every `*_seconds` histogram: 0.5 ms to 10 min.
const SECONDS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0, 600.0,
];

/// The process's recorder handle, installing the recorder on first use.
pub fn handle() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".to_owned()), SECONDS_BUCKETS)
                .expect("buckets are non-empty")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed (a host program's);
            // then ours still renders whatever it was given.
            if metrics::set_global_recorder(recorder).is_ok() {
                spawn_upkeep(handle.clone());
            }
            handle
        })
        .clone()
}

/// The recorder's upkeep, for the life of the process (the recorder is
/// process-global too).
fn spawn_upkeep(handle: PrometheusHandle) {
    let started = std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || {
            loop {
                std::thread::sleep(UPKEEP_EVERY);
                handle.run_upkeep();
            }
        });
    if let Err(e) = started {
        tracing::warn!(error = %e, "metrics upkeep not started; /metrics scrapes still drain histograms");
    }
}

pub async fn render(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    match jobs::depth_by_state(state.store.pool()).await {
        Ok(depths) => {
            for &job_state in JobState::ALL {
                let n = depths
                    .iter()
                    .find(|(s, _)| *s == job_state)
                    .map_or(0, |(_, n)| *n);
                metrics::gauge!("closer_jobs", "state" => job_state.as_str()).set(n as f64);
            }
        }
        Err(e) => tracing::warn!(error = %e, "queue depth unavailable for /metrics"),
    }
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}
