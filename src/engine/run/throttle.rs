//! The per-installation throttle on status-comment writes: at most one a
//! second per installation, shared by every run of the process, so a busy
//! installation cannot trip GitHub's secondary limit on content creation.
//!
//! It only spaces writes out; it must never give one slot to two writes,
//! and never hold its lock while waiting. A step's writer waits at most a
//! gap for a fresh slot, or [`RETURN_LEAD`] more for one booked for it
//! ([`EditThrottle::take`]): a slot further off is booked for its run and
//! the step goes back to the queue until shortly before it (decision 194),
//! so one installation's burst of runs holds a few workers for a few
//! seconds, never the other installations' work. A write that must land
//! (a stopped run's status restored) still waits however long.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::github::types::InstallationId;

/// The least time between two status-comment writes of one installation.
pub const STATUS_EDIT_GAP: Duration = Duration::from_secs(1);

/// How long before its booked slot a writer sent away comes back: long
/// enough to be claimed from the queue (idle workers look every half
/// second) and to redo its step up to the write.
pub const RETURN_LEAD: Duration = Duration::from_secs(2);

/// Installations kept before those with nothing booked are forgotten.
const KEEP_INSTALLATIONS: usize = 64;

/// Hands out write slots per installation, `gap` apart.
#[derive(Debug)]
pub struct EditThrottle {
    gap: Duration,
    slots: Mutex<HashMap<InstallationId, Slots>>,
}

/// One installation's slots.
#[derive(Debug, Default)]
struct Slots {
    /// The slot given out or booked last.
    last: Option<Instant>,
    /// Slots booked for writers sent away, by their key (the run).
    booked: HashMap<String, Instant>,
}

impl Slots {
    /// The slot after the last one, at or after `now`, taken.
    fn next(&mut self, now: Instant, gap: Duration) -> Instant {
        let slot = self.last.map_or(now, |last| (last + gap).max(now));
        self.last = Some(slot);
        slot
    }
}

/// A write that may not wait for its slot: come back at this instant (the
/// slot is booked for its key until it has passed).
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

    /// Runs `f` on the installation's slots, bookings already passed
    /// dropped (their writers did not come back in time).
    fn with<T>(
        &self,
        installation: InstallationId,
        now: Instant,
        f: impl FnOnce(&mut Slots) -> T,
    ) -> T {
        let mut all = match self.slots.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        };
        if all.len() > KEEP_INSTALLATIONS {
            let gap = self.gap;
            all.retain(|_, s| {
                s.booked.retain(|_, at| *at >= now);
                !s.booked.is_empty() || s.last.is_some_and(|l| l + gap > now)
            });
        }
        let slots = all.entry(installation).or_default();
        slots.booked.retain(|_, at| *at >= now);
        f(slots)
    }

    /// The slot for `key`'s write, if it comes within `patience` of `now`
    /// (the caller writes once it has come): the installation's next, or
    /// the one booked for `key`, which the caller comes back for and waits
    /// up to `RETURN_LEAD` more for. A slot further off is booked for
    /// `key`, and the caller comes back `RETURN_LEAD` before it: the time
    /// a job has to be claimed again and reach its write.
    pub fn take(
        &self,
        installation: InstallationId,
        key: &str,
        now: Instant,
        patience: Duration,
    ) -> Result<Instant, ComeBack> {
        let gap = self.gap;
        let lead = RETURN_LEAD;
        self.with(installation, now, |slots| {
            let (slot, waits) = match slots.booked.remove(key) {
                Some(booked) => (booked, patience.saturating_add(lead)),
                None => (slots.next(now, gap), patience),
            };
            if slot.saturating_duration_since(now) <= waits {
                return Ok(slot);
            }
            slots.booked.insert(key.to_owned(), slot);
            Err(ComeBack(slot.checked_sub(lead).unwrap_or(slot)))
        })
    }

    /// The installation's next slot if it comes within `patience` of `now`
    /// (taken); else nothing is taken or booked.
    pub fn take_if_within(
        &self,
        installation: InstallationId,
        now: Instant,
        patience: Duration,
    ) -> Option<Instant> {
        let gap = self.gap;
        self.with(installation, now, |slots| {
            let slot = slots.last.map_or(now, |last| (last + gap).max(now));
            (slot.saturating_duration_since(now) <= patience).then(|| slots.next(now, gap))
        })
    }

    /// Waits for `key`'s slot ([`Self::take`]) if it comes within one gap;
    /// else books it and says when to come back.
    pub async fn wait_for_turn(
        &self,
        installation: InstallationId,
        key: &str,
    ) -> Result<(), ComeBack> {
        let slot = self.take(installation, key, Instant::now(), self.gap)?;
        tokio::time::sleep_until(slot).await;
        Ok(())
    }

    /// Waits for `key`'s booked slot, else the installation's next, however
    /// far off (and takes it): for a caller that cannot be sent back, or a
    /// write that must land (a stopped run's status restored).
    pub async fn wait_however_long(&self, installation: InstallationId, key: &str) {
        let slot = match self.take(installation, key, Instant::now(), Duration::MAX) {
            Ok(slot) | Err(ComeBack(slot)) => slot,
        };
        tokio::time::sleep_until(slot).await;
    }

    /// Waits for the installation's next slot if it comes within one gap
    /// (and takes it); `false`, nothing taken, when it is further off.
    pub async fn wait_if_soon(&self, installation: InstallationId) -> bool {
        match self.take_if_within(installation, Instant::now(), self.gap) {
            Some(slot) => {
                tokio::time::sleep_until(slot).await;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The slot `key`'s writer takes at `now`, however far off (a writer
    /// that waits for it).
    fn slot(throttle: &EditThrottle, a: InstallationId, key: &str, now: Instant) -> Instant {
        match throttle.take(a, key, now, Duration::MAX) {
            Ok(slot) | Err(ComeBack(slot)) => slot,
        }
    }

    #[test]
    fn writes_of_one_installation_are_a_gap_apart_others_are_not_held_up() {
        let throttle = EditThrottle::new(Duration::from_secs(1));
        let t0 = Instant::now();
        let a = InstallationId(1);
        let b = InstallationId(2);
        assert_eq!(slot(&throttle, a, "r1", t0), t0);
        // Two more writes at once: queued one second apart each.
        assert_eq!(slot(&throttle, a, "r2", t0), t0 + Duration::from_secs(1));
        assert_eq!(
            slot(&throttle, a, "r3", t0 + Duration::from_millis(200)),
            t0 + Duration::from_secs(2)
        );
        // Another installation is not held up.
        assert_eq!(slot(&throttle, b, "r4", t0), t0);
        // After a quiet spell, a write goes at once.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(slot(&throttle, a, "r1", later), later);
    }

    /// A throttle a second apart, now, and an installation.
    fn one_installation() -> (EditThrottle, Instant, InstallationId, Duration) {
        let gap = Duration::from_secs(1);
        (
            EditThrottle::new(gap),
            Instant::now(),
            InstallationId(1),
            gap,
        )
    }

    #[test]
    fn a_slot_beyond_the_patience_is_booked_for_its_writer_who_comes_back_for_it() {
        let (throttle, t0, a, gap) = one_installation();
        assert_eq!(throttle.take(a, "r1", t0, gap), Ok(t0));
        // The next slot is a gap off: within the patience, taken.
        assert_eq!(throttle.take(a, "r2", t0, gap), Ok(t0 + gap));
        // The next ones are further off: booked; come back two seconds
        // (RETURN_LEAD) before them. Each newcomer gets the slot after the
        // booked ones.
        assert_eq!(RETURN_LEAD, 2 * gap);
        assert_eq!(throttle.take(a, "r3", t0, gap), Err(ComeBack(t0)));
        assert_eq!(throttle.take(a, "r4", t0, gap), Err(ComeBack(t0 + gap)));
        assert_eq!(throttle.take(a, "r5", t0, gap), Err(ComeBack(t0 + 2 * gap)));
        // Back at its time, r3 finds its slot two gaps off and waits for it;
        // back too early, r5 is sent away again for the same slot.
        assert_eq!(throttle.take(a, "r3", t0, gap), Ok(t0 + 2 * gap));
        assert_eq!(throttle.take(a, "r5", t0, gap), Err(ComeBack(t0 + 2 * gap)));
        assert_eq!(throttle.take(a, "r5", t0 + 2 * gap, gap), Ok(t0 + 4 * gap));
        // Another installation is not held up.
        let b = InstallationId(2);
        assert_eq!(throttle.take(b, "r9", t0, gap), Ok(t0));
    }

    #[test]
    fn a_booking_passed_is_dropped_and_its_writer_gets_a_new_slot() {
        let (throttle, t0, a, gap) = one_installation();
        assert_eq!(throttle.take(a, "r1", t0, gap), Ok(t0));
        assert_eq!(throttle.take(a, "r2", t0, gap), Ok(t0 + gap));
        assert_eq!(throttle.take(a, "r3", t0, gap), Err(ComeBack(t0)));
        // r3 comes back after its slot (t0 + 2 gaps) passed: a new slot.
        let late = t0 + 5 * gap;
        assert_eq!(throttle.take(a, "r3", late, gap), Ok(late));
    }

    #[test]
    fn a_live_line_takes_a_slot_only_when_it_is_near_and_books_nothing() {
        let (throttle, t0, a, gap) = one_installation();
        assert_eq!(throttle.take_if_within(a, t0, gap), Some(t0));
        assert_eq!(throttle.take_if_within(a, t0, gap), Some(t0 + gap));
        assert_eq!(throttle.take_if_within(a, t0, gap), None);
        // Nothing was booked: the next writer gets the slot after t0 + gap.
        assert_eq!(slot(&throttle, a, "r1", t0), t0 + 2 * gap);
    }

    #[tokio::test]
    async fn a_write_that_waits_goes_at_once_first_and_a_gap_later_next() {
        let throttle = EditThrottle::new(Duration::from_millis(100));
        let a = InstallationId(7);
        let start = Instant::now();
        throttle.wait_however_long(a, "r1").await;
        assert!(start.elapsed() < Duration::from_millis(100));
        throttle.wait_however_long(a, "r2").await;
        assert!(start.elapsed() >= Duration::from_millis(100));
    }
}
