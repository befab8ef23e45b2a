//! The per-installation throttle on status-comment writes: at most one a
//! second per installation, shared by every run of the process, so a busy
//! installation cannot trip GitHub's secondary limit on content creation.
//!
//! It only spaces writes out; it must never drop a step's write, and never
//! hold its lock while waiting. A step's writer waits at most one gap for
//! its slot ([`EditThrottle::take`]): a slot further off sends the step
//! back to the queue until then (decision 194), so one installation's burst
//! of runs holds at most two workers and never the others' work.

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
    slots: Mutex<HashMap<InstallationId, Slots>>,
}

/// One installation's slots.
#[derive(Debug, Clone, Copy)]
struct Slots {
    /// The slot given out last.
    last: Instant,
    /// When the next writer sent away may come back: those sent away
    /// together come back a gap apart, not all at once.
    comeback: Instant,
}

/// A write that may not wait for its slot: come back at this instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ComeBack(pub Instant);

impl EditThrottle {
    /// A throttle giving each installation one slot per `gap`.
    pub fn new(gap: Duration) -> Self {
        Self {
            gap,
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// Takes the next slot of `installation` at or after `now` if it comes
    /// within `patience`, and returns it (the caller writes once it has
    /// come); else takes nothing and says when to come back: when the slot
    /// would be within `patience`, behind the writers already sent away.
    pub fn take(
        &self,
        installation: InstallationId,
        now: Instant,
        patience: Duration,
    ) -> Result<Instant, ComeBack> {
        let mut slots = match self.slots.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        let Some(known) = slots.get_mut(&installation) else {
            slots.insert(
                installation,
                Slots {
                    last: now,
                    comeback: now,
                },
            );
            return Ok(now);
        };
        let slot = (known.last + self.gap).max(now);
        if slot.saturating_duration_since(now) <= patience {
            known.last = slot;
            return Ok(slot);
        }
        let due = slot.checked_sub(patience).unwrap_or(slot);
        let back = due.max(known.comeback);
        known.comeback = back + self.gap;
        Err(ComeBack(back))
    }

    /// Reserves the next slot of `installation` at or after `now`, however
    /// far off, and returns it.
    pub fn reserve(&self, installation: InstallationId, now: Instant) -> Instant {
        match self.take(installation, now, Duration::MAX) {
            Ok(slot) | Err(ComeBack(slot)) => slot,
        }
    }

    /// Waits until `installation` may write again (and takes that slot),
    /// however long that is: for a write that must land now.
    pub async fn wait(&self, installation: InstallationId) {
        let slot = self.reserve(installation, Instant::now());
        tokio::time::sleep_until(slot).await;
    }

    /// Waits for the next slot of `installation` if it comes within one
    /// gap (and takes it); else takes nothing and says when to come back.
    pub async fn wait_briefly(&self, installation: InstallationId) -> Result<(), ComeBack> {
        let slot = self.take(installation, Instant::now(), self.gap)?;
        tokio::time::sleep_until(slot).await;
        Ok(())
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

    #[test]
    fn a_slot_beyond_the_patience_is_not_taken_and_those_sent_away_come_back_a_gap_apart() {
        let gap = Duration::from_secs(1);
        let throttle = EditThrottle::new(gap);
        let t0 = Instant::now();
        let a = InstallationId(1);
        assert_eq!(throttle.take(a, t0, gap), Ok(t0));
        // The next slot is a gap off: within the patience, taken.
        assert_eq!(throttle.take(a, t0, gap), Ok(t0 + gap));
        // The one after is two gaps off: not taken; come back when it is
        // one gap off. The next one sent away comes back a gap later.
        assert_eq!(throttle.take(a, t0, gap), Err(ComeBack(t0 + gap)));
        assert_eq!(throttle.take(a, t0, gap), Err(ComeBack(t0 + 2 * gap)));
        // Nothing was taken by those sent away: back at its time, the
        // first finds its slot within the patience.
        assert_eq!(throttle.take(a, t0 + gap, gap), Ok(t0 + 2 * gap));
        // Another installation is not held up.
        let b = InstallationId(2);
        assert_eq!(throttle.take(b, t0, gap), Ok(t0));
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
