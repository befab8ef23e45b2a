//! The per-installation throttle on status-comment writes: at most one a
//! second per installation, shared by every run of the process, so a busy
//! installation cannot trip GitHub's secondary limit on content creation.
//!
//! It only spaces writes out (a caller waits for its slot); it must never
//! drop one, and never hold its lock while waiting.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::github::types::InstallationId;

/// The least time between two status-comment writes of one installation.
pub const STATUS_EDIT_GAP: Duration = Duration::from_secs(1);

/// Hands out write slots per installation, `gap` apart.
#[derive(Debug)]
pub struct EditThrottle {
    gap: Duration,
    /// Per installation, the slot given out last.
    last: Mutex<HashMap<InstallationId, Instant>>,
}

impl EditThrottle {
    /// A throttle giving each installation one slot per `gap`.
    pub fn new(gap: Duration) -> Self {
        Self {
            gap,
            last: Mutex::new(HashMap::new()),
        }
    }

    /// Reserves the next slot of `installation` at or after `now` and
    /// returns it; the caller writes once that instant has come.
    pub fn reserve(&self, installation: InstallationId, now: Instant) -> Instant {
        let mut last = match self.last.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let slot = match last.get(&installation) {
            Some(previous) => (*previous + self.gap).max(now),
            None => now,
        };
        last.insert(installation, slot);
        slot
    }

    /// Waits until `installation` may write again (and takes that slot).
    pub async fn wait(&self, installation: InstallationId) {
        let slot = self.reserve(installation, Instant::now());
        tokio::time::sleep_until(slot).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_of_one_installation_are_a_gap_apart_others_are_not_held_up() {
        let throttle = EditThrottle::new(Duration::from_secs(1));
        let t0 = Instant::now();
        let a = InstallationId(1);
        let b = InstallationId(2);
        assert_eq!(throttle.reserve(a, t0), t0);
        // Two more writes at once: queued one second apart each.
        assert_eq!(throttle.reserve(a, t0), t0 + Duration::from_secs(1));
        assert_eq!(
            throttle.reserve(a, t0 + Duration::from_millis(200)),
            t0 + Duration::from_secs(2)
        );
        // Another installation is not held up.
        assert_eq!(throttle.reserve(b, t0), t0);
        // After a quiet spell, a write goes at once.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(throttle.reserve(a, later), later);
    }

    #[tokio::test]
    async fn wait_returns_at_once_for_the_first_write_and_a_gap_later_for_the_next() {
        let throttle = EditThrottle::new(Duration::from_millis(100));
        let a = InstallationId(7);
        let start = Instant::now();
        throttle.wait(a).await;
        assert!(start.elapsed() < Duration::from_millis(100));
        throttle.wait(a).await;
        assert!(start.elapsed() >= Duration::from_millis(100));
    }
}
