//! `POST` on the webhook path (`/webhooks` unless `webhook_path` says
//! otherwise): verify, then parse, then store, then answer.
//!
//! [`SignedDelivery`] is an extractor: a handler only ever sees a delivery
//! whose `X-Hub-Signature-256` matched the raw body (HMAC-SHA256, compared in
//! constant time) and whose event and delivery headers are present. Those
//! headers are checked before the body is read; the body is read under the
//! 25 MB cap as it streams and under a budget shared by all requests, so
//! unsigned or oversized requests cost no memory. Nothing is parsed before
//! the signature is checked, nothing rejected is stored, and the body never
//! appears in a log line. The answer (202) is sent only after the delivery
//! and its job are committed. Triage (`engine::triage`) decides here, from
//! the parsed envelope, whether the delivery gets a job at all; one that
//! cannot matter is stored as `ignored` in the same batch.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use hmac::Mac;
use http_body_util::BodyExt;

use super::AppState;
use crate::engine::triage::{Verdict, triage};
use crate::events::EventKind;
use crate::events::envelope::Envelope;
use crate::model::{DeliveryStatus, JobKind};
use crate::store::deliveries::{NewDelivery, Thread};
use crate::store::jobs::NewJob;
use crate::store::writer::WriteOutcome;

/// GitHub caps webhook payloads at 25 MB.
pub const MAX_BODY_BYTES: usize = 25 * 1024 * 1024;

/// Why a request was refused before anything was stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    MissingSignature,
    MalformedSignature,
    BadSignature,
    MissingEvent,
    MissingDeliveryId,
    BodyTooLarge,
    UnreadableBody,
    MalformedJson,
}

impl Rejection {
    fn reason(self) -> &'static str {
        match self {
            Rejection::MissingSignature => "missing_signature",
            Rejection::MalformedSignature => "malformed_signature",
            Rejection::BadSignature => "bad_signature",
            Rejection::MissingEvent => "missing_event",
            Rejection::MissingDeliveryId => "missing_delivery_id",
            Rejection::BodyTooLarge => "body_too_large",
            Rejection::UnreadableBody => "unreadable_body",
            Rejection::MalformedJson => "malformed_json",
        }
    }

    fn status(self) -> StatusCode {
        match self {
            Rejection::MissingSignature
            | Rejection::MalformedSignature
            | Rejection::BadSignature => StatusCode::UNAUTHORIZED,
            Rejection::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Rejection::MissingEvent
            | Rejection::MissingDeliveryId
            | Rejection::UnreadableBody
            | Rejection::MalformedJson => StatusCode::BAD_REQUEST,
        }
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        metrics::counter!("closer_webhook_rejections_total", "reason" => self.reason())
            .increment(1);
        tracing::warn!(reason = self.reason(), "webhook delivery rejected");
        (self.status(), format!("{}\n", self.reason())).into_response()
    }
}

/// A delivery whose signature has been verified.
#[derive(Debug)]
pub struct SignedDelivery {
    pub event: String,
    pub delivery_id: String,
    pub body: Bytes,
}

impl FromRequest<Arc<AppState>> for SignedDelivery {
    type Rejection = Rejection;

    /// The headers are checked before a byte of the body is read: a request
    /// without a well-formed signature, an event or a delivery id costs
    /// nothing but its head.
    async fn from_request(req: Request, state: &Arc<AppState>) -> Result<Self, Rejection> {
        let (parts, body) = req.into_parts();
        let expected = signature(&parts.headers)?;
        let event = header(&parts.headers, "x-github-event").ok_or(Rejection::MissingEvent)?;
        let delivery_id =
            header(&parts.headers, "x-github-delivery").ok_or(Rejection::MissingDeliveryId)?;
        if delivery_id.len() > 128 {
            return Err(Rejection::MissingDeliveryId);
        }
        let body = read_body(state, &parts.headers, body).await?;
        let mut mac = state.webhook_mac.clone();
        mac.update(&body);
        mac.verify_slice(&expected)
            .map_err(|_| Rejection::BadSignature)?;
        Ok(SignedDelivery {
            event,
            delivery_id,
            body,
        })
    }
}

/// Reads the body while it streams in, refusing it as soon as it passes
/// [`MAX_BODY_BYTES`] or its declared length. The bytes held at once by all
/// webhook requests together are bounded by the state's body budget. A
/// request takes its share as its bytes arrive, not as it declares them:
/// [`FIRST_SHARE`] before the first, then twice what it holds each time it
/// needs more (waiting for it under the request timeout), so a request
/// that declares 25 MB and sends nothing holds 64 KiB, not 25 MB.
async fn read_body(state: &AppState, headers: &HeaderMap, body: Body) -> Result<Bytes, Rejection> {
    let declared = header(headers, "content-length").and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES) {
        return Err(Rejection::BodyTooLarge);
    }
    let share = declared.unwrap_or(MAX_BODY_BYTES);
    let take = |bytes: usize| {
        let budget = &state.body_budget;
        async move {
            let permits = u32::try_from(bytes).unwrap_or(u32::MAX);
            (budget.acquire_many(permits).await).map_err(|_| Rejection::UnreadableBody)
        }
    };
    let mut held = take(share.min(FIRST_SHARE)).await?;
    let mut buffer = Vec::with_capacity(share.min(FIRST_SHARE));
    let mut body = body;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|_| Rejection::UnreadableBody)?;
        let Some(data) = frame.data_ref() else {
            continue;
        };
        let needed = buffer.len() + data.len();
        if needed > share {
            return Err(Rejection::BodyTooLarge);
        }
        let holding = held.num_permits();
        if needed > holding {
            let want = needed.max(holding.saturating_mul(2)).min(share);
            held.merge(take(want - holding).await?);
            // The buffer holds what the budget counts, not what doubling
            // on its own would round it up to.
            buffer.reserve_exact(want - buffer.len());
        }
        buffer.extend_from_slice(data);
    }
    Ok(Bytes::from(buffer))
}

/// The body budget a webhook request takes before its first byte: most
/// deliveries fit in it whole.
const FIRST_SHARE: usize = 64 * 1024;

/// The digest from `X-Hub-Signature-256: sha256=<hex>`.
fn signature(headers: &HeaderMap) -> Result<Vec<u8>, Rejection> {
    let signature = headers
        .get("x-hub-signature-256")
        .ok_or(Rejection::MissingSignature)?;
    let hex_digest = signature
        .to_str()
        .ok()
        .and_then(|s| s.strip_prefix("sha256="))
        .ok_or(Rejection::MalformedSignature)?;
    match hex::decode(hex_digest) {
        Ok(digest) if digest.len() == 32 => Ok(digest),
        _ => Err(Rejection::MalformedSignature),
    }
}

fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_owned)
}

/// The handler: triage, store the verified delivery (and its job, when it
/// can matter), then answer.
pub async fn receive(State(state): State<Arc<AppState>>, delivery: SignedDelivery) -> Response {
    let envelope = match Envelope::parse(&delivery.body) {
        Ok(envelope) => envelope,
        Err(_) => return Rejection::MalformedJson.into_response(),
    };
    let Some(writer) = &state.writer else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let kind = EventKind::from_header(&delivery.event);
    let delivery_id = delivery.delivery_id.clone();
    let new = new_delivery(&state, delivery, &envelope, kind);
    let event_label = kind.map_or("other", EventKind::as_str);
    match writer.submit(new).await {
        Ok(outcome @ (WriteOutcome::Stored | WriteOutcome::Ignored)) => {
            let queued = kind.is_some() && outcome == WriteOutcome::Stored;
            let outcome = if queued { "stored" } else { "ignored" };
            count(event_label, outcome);
            if queued {
                state.jobs_ready.notify_waiters();
            }
            tracing::debug!(delivery = %delivery_id, event = event_label, outcome, "delivery stored");
            (StatusCode::ACCEPTED, "accepted\n").into_response()
        }
        Ok(WriteOutcome::Duplicate) => {
            count(event_label, "duplicate");
            tracing::info!(delivery = %delivery_id, "duplicate delivery acknowledged");
            (StatusCode::OK, "duplicate\n").into_response()
        }
        Err(e) => {
            count(event_label, "error");
            tracing::error!(delivery = %delivery_id, error = %e, "delivery not stored");
            (StatusCode::SERVICE_UNAVAILABLE, "not stored, try again\n").into_response()
        }
    }
}

/// The row to write: the delivery, its job for an event closer handles, and
/// triage's condition on that job (`engine::triage`). A payload whose
/// triage facts cannot be read keeps its job: the worker records why.
fn new_delivery(
    state: &AppState,
    delivery: SignedDelivery,
    envelope: &Envelope,
    kind: Option<EventKind>,
) -> NewDelivery {
    let verdict = kind
        .and_then(|kind| envelope.signals(kind))
        .map(|signals| triage(&signals, state.app_slug.get().map(String::as_str)));
    let kind = kind.filter(|_| verdict != Some(Verdict::Never));
    let job = kind.map(|kind| NewJob {
        kind: JobKind::Delivery,
        key: envelope.job_key(kind, &delivery.delivery_id),
        payload: serde_json::json!({ "delivery_id": delivery.delivery_id }).to_string(),
        max_attempts: state.max_attempts,
        run_at: state.store.now_ms(),
    });
    let only_with_work = match (verdict, envelope.thread()) {
        (Some(Verdict::IfOpenRun), Some((repository, number))) => Some(Thread {
            repository: repository.to_owned(),
            number: i64::try_from(number).unwrap_or(i64::MAX),
        }),
        _ => None,
    };
    NewDelivery {
        delivery_id: delivery.delivery_id,
        event: delivery.event,
        action: envelope.action.clone(),
        installation_id: envelope.installation_id(),
        repository: envelope.repository().map(str::to_owned),
        body: delivery.body.into(),
        received_at: state.store.now_ms(),
        status: if job.is_some() {
            DeliveryStatus::Received
        } else {
            DeliveryStatus::Ignored
        },
        job,
        only_with_work,
    }
}

fn count(event: &'static str, outcome: &'static str) {
    metrics::counter!("closer_webhook_deliveries_total", "event" => event, "outcome" => outcome)
        .increment(1);
}
