//! Where a stored webhook delivery is: waiting for its job, done with, or
//! refused.

use super::Named;

/// A delivery's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeliveryStatus {
    /// Stored with a job that will process it.
    Received,
    /// Its job acted on it.
    Processed,
    /// Stored for the record; nothing acts on it.
    Ignored,
    /// Its payload could not be typed; not retried.
    Failed,
}

impl Named for DeliveryStatus {
    const ALL: &'static [DeliveryStatus] = &[
        DeliveryStatus::Received,
        DeliveryStatus::Processed,
        DeliveryStatus::Ignored,
        DeliveryStatus::Failed,
    ];

    fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Received => "received",
            DeliveryStatus::Processed => "processed",
            DeliveryStatus::Ignored => "ignored",
            DeliveryStatus::Failed => "failed",
        }
    }
}
