//! Time, injected. Leases, backoff, token expiry and timeouts read the time
//! through [`Clock`], so tests can move it forward instead of sleeping and the
//! shipped code has no test-only branches.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch; what the database stores.
pub type Millis = i64;

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Now, in milliseconds since the Unix epoch.
    fn now_ms(&self) -> Millis;
}

/// The wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as Millis)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to; for tests and `closer replay`.
#[derive(Debug, Default)]
pub struct ManualClock {
    now: AtomicI64,
}

impl ManualClock {
    pub fn new(start: Millis) -> Self {
        Self {
            now: AtomicI64::new(start),
        }
    }

    pub fn advance(&self, by: std::time::Duration) {
        self.now
            .fetch_add(by.as_millis() as Millis, Ordering::SeqCst);
    }

    pub fn set(&self, to: Millis) {
        self.now.store(to, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        self.now.load(Ordering::SeqCst)
    }
}

/// The clock most code holds.
pub type SharedClock = Arc<dyn Clock>;

/// The system clock as a [`SharedClock`].
pub fn system() -> SharedClock {
    Arc::new(SystemClock)
}
