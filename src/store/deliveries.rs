//! Webhook deliveries as received: the durable record behind every 2xx intake
//! answers. A delivery id is unique, so a re-delivery is recognised and not
//! stored twice. The payload of a delivery closer keeps (it has a job) is
//! stored zstd-compressed (about 8× smaller); one triage ignored at intake is
//! recorded without its payload (decision 103).

use std::cell::RefCell;

use sqlx::{AnyPool, Row};

use super::StoreError;
use crate::clock::Millis;
use crate::model::{DeliveryStatus, Named};

/// A verified delivery, ready to be written.
#[derive(Debug, Clone)]
pub struct NewDelivery {
    pub delivery_id: String,
    pub event: String,
    pub action: Option<String>,
    pub installation_id: Option<i64>,
    pub repository: Option<String>,
    /// The payload as it arrived. The writer stores it, compressed, only
    /// with a delivery it keeps ([`NewDelivery::stored_payload`]).
    pub body: Vec<u8>,
    pub received_at: Millis,
    /// `received` (a job processes it) or `ignored` (an event we do not handle).
    pub status: DeliveryStatus,
    /// The job that processes it, when there is one.
    pub job: Option<super::jobs::NewJob>,
    /// Set when the job is wanted only while closer has work on this issue
    /// or pull request (triage's "if open run"): the writer then checks, in
    /// the batch's transaction, and stores the delivery as `ignored` with
    /// [`IGNORED_NO_WORK`] and no job when there is none.
    pub only_with_work: Option<Thread>,
}

impl NewDelivery {
    /// The payload column and its encoding for this delivery: compressed
    /// when it is `kept` (it has a job), else nothing. The payload of a
    /// delivery that cannot matter was most of what intake wrote and
    /// compressed; its id, event, repository and triage outcome stay.
    pub fn stored_payload(&self, kept: bool) -> (Vec<u8>, PayloadEncoding) {
        match kept {
            true => encode_payload(&self.body),
            false => (Vec::new(), PayloadEncoding::NotKept),
        }
    }
}

/// An issue or pull request of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    /// `owner/name`.
    pub repository: String,
    pub number: i64,
}

/// The outcome of a delivery triage kept no job for.
pub const IGNORED_NO_WORK: &str =
    "ignored at intake: nothing to act on, no open run, no queued delivery";

/// How a payload is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadEncoding {
    Zstd,
    Identity,
    /// Not stored: the delivery was ignored at intake.
    NotKept,
}

impl PayloadEncoding {
    pub fn as_str(self) -> &'static str {
        match self {
            PayloadEncoding::Zstd => "zstd",
            PayloadEncoding::Identity => "identity",
            PayloadEncoding::NotKept => "none",
        }
    }

    fn parse(s: &str) -> Result<Self, StoreError> {
        match s {
            "zstd" => Ok(PayloadEncoding::Zstd),
            "identity" => Ok(PayloadEncoding::Identity),
            "none" => Ok(PayloadEncoding::NotKept),
            other => Err(StoreError::Payload(format!("unknown encoding {other:?}"))),
        }
    }
}

/// zstd's level for stored payloads: one of its fast levels. On webhook
/// JSON it compresses about 8× (level 1: 11×) at nearly twice level 1's
/// speed; compression was the intake's largest cost after the signature
/// check (docs/benchmarks.md, "Against Probot").
const PAYLOAD_LEVEL: i32 = -3;

/// Compresses a payload for storage (zstd at [`PAYLOAD_LEVEL`]; any level
/// decodes the same way). Each thread keeps its compression context:
/// creating one per payload cost more than compressing.
pub fn encode_payload(raw: &[u8]) -> (Vec<u8>, PayloadEncoding) {
    thread_local! {
        static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> =
            RefCell::new(zstd::bulk::Compressor::new(PAYLOAD_LEVEL).ok());
    }
    let compressed = COMPRESSOR.with(|cell| {
        cell.borrow_mut()
            .as_mut()
            .and_then(|compressor| compressor.compress(raw).ok())
    });
    match compressed {
        Some(compressed) => (compressed, PayloadEncoding::Zstd),
        None => (raw.to_vec(), PayloadEncoding::Identity),
    }
}

/// The stored payload back as it arrived; `None` when it was not kept.
pub fn decode_payload(
    stored: Vec<u8>,
    encoding: PayloadEncoding,
) -> Result<Option<Vec<u8>>, StoreError> {
    match encoding {
        PayloadEncoding::Identity => Ok(Some(stored)),
        PayloadEncoding::Zstd => zstd::stream::decode_all(stored.as_slice())
            .map(Some)
            .map_err(|e| StoreError::Payload(e.to_string())),
        PayloadEncoding::NotKept => Ok(None),
    }
}

/// A stored delivery, payload decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredDelivery {
    pub delivery_id: String,
    pub event: String,
    pub action: Option<String>,
    pub installation_id: Option<i64>,
    pub repository: Option<String>,
    /// `None` for a delivery triage ignored at intake (decision 103).
    pub payload: Option<Vec<u8>>,
    pub received_at: Millis,
    pub status: DeliveryStatus,
    pub outcome: Option<String>,
}

pub async fn get(pool: &AnyPool, delivery_id: &str) -> Result<Option<StoredDelivery>, StoreError> {
    let row = sqlx::query(
        "SELECT delivery_id, event, action, installation_id, repository, payload, \
         payload_encoding, received_at, status, outcome FROM deliveries WHERE delivery_id = $1",
    )
    .bind(delivery_id)
    .fetch_optional(pool)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let encoding = PayloadEncoding::parse(row.try_get::<&str, _>("payload_encoding")?)?;
    Ok(Some(StoredDelivery {
        delivery_id: row.try_get("delivery_id")?,
        event: row.try_get("event")?,
        action: row.try_get("action")?,
        installation_id: row.try_get("installation_id")?,
        repository: row.try_get("repository")?,
        payload: decode_payload(row.try_get("payload")?, encoding)?,
        received_at: row.try_get("received_at")?,
        status: DeliveryStatus::read("deliveries.status", &row.try_get::<String, _>("status")?)?,
        outcome: row.try_get("outcome")?,
    }))
}

/// Records what processing made of a delivery.
pub async fn mark(
    pool: &AnyPool,
    delivery_id: &str,
    status: DeliveryStatus,
    outcome: &str,
    now: Millis,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE deliveries SET status = $1, outcome = $2, processed_at = $3 WHERE delivery_id = $4",
    )
    .bind(status.as_str())
    .bind(outcome)
    .bind(now)
    .bind(delivery_id)
    .execute(pool)
    .await?;
    Ok(())
}

pub async fn count(pool: &AnyPool) -> Result<i64, StoreError> {
    let row = sqlx::query("SELECT COUNT(*) AS n FROM deliveries")
        .fetch_one(pool)
        .await?;
    Ok(row.try_get("n")?)
}

/// Deletes deliveries that were handled (processed, ignored or failed) before
/// `before`. Deliveries still waiting for their job are kept whatever their age.
pub async fn prune(pool: &AnyPool, before: Millis) -> Result<u64, StoreError> {
    let done =
        sqlx::query("DELETE FROM deliveries WHERE status <> 'received' AND received_at < $1")
            .bind(before)
            .execute(pool)
            .await?;
    Ok(done.rows_affected())
}

/// Deletes deliveries received before `before` that are still `received`
/// but have no job left to handle them (it died and was pruned, or was
/// never made): nothing will ever mark them handled. A dead job not yet
/// pruned keeps its delivery: an operator may requeue it, and it reads the
/// delivery (a job may die days after the delivery came).
pub async fn prune_orphaned(pool: &AnyPool, before: Millis) -> Result<u64, StoreError> {
    let done = sqlx::query(
        "DELETE FROM deliveries WHERE status = 'received' AND received_at < $1 \
         AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.kind = 'delivery' \
         AND jobs.state IN ('queued', 'leased', 'dead') \
         AND jobs.payload = '{\"delivery_id\":\"' || deliveries.delivery_id || '\"}')",
    )
    .bind(before)
    .execute(pool)
    .await?;
    Ok(done.rows_affected())
}
