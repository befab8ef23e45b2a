//! How many jobs a process works at once, and jobs stepping aside while
//! they only wait.
//!
//! A pool of `workers` runs that many jobs at a time: each job holds one of
//! the pool's permits. A job that must wait for something that is not work
//! of its own — its installation's next slot for a status-comment write,
//! a second or more away when many runs of one installation write at once —
//! steps aside ([`aside`]): it gives its permit back for the wait, so
//! another worker claims and runs another job (another installation's,
//! another issue's), and it takes a permit again, in turn, before it goes
//! on. The pool starts [`ASIDE_PER_WORKER`] more worker tasks per permit,
//! so that many jobs can step aside at once; past that, a waiting job
//! holds its worker as before. Idle, those extra tasks look at the queue
//! [`ASIDE_POLL_SLOWER`] times less often than the pool's own (an idle
//! look is a claim, a write statement on SQLite); jobs the intake stores
//! wake a task at once either way.
//!
//! The permit travels with the job's task (a task-local): a wait in a task
//! of the job's own spawning (a live progress edit) holds nothing and steps
//! nowhere.

use std::future::Future;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Worker tasks the pool starts per permit beyond the permit's own: the
/// jobs that may wait aside at once (eight per worker: a maintainer
/// labelling thirty issues at once on a four-worker process).
pub const ASIDE_PER_WORKER: usize = 8;

/// How much slower than the pool's own pace the extra tasks look at the
/// queue when idle (the pool's `workers` tasks keep its pace).
pub const ASIDE_POLL_SLOWER: u32 = 10;

tokio::task_local! {
    static SLOT: Arc<Slot>;
}

/// The permit a job's task holds, if it holds one now.
pub struct Slot {
    permits: Arc<Semaphore>,
    held: Mutex<Option<OwnedSemaphorePermit>>,
}

impl Slot {
    /// A slot holding `permit`, taken from `permits`.
    pub fn holding(permits: Arc<Semaphore>, permit: OwnedSemaphorePermit) -> Arc<Slot> {
        Arc::new(Slot {
            permits,
            held: Mutex::new(Some(permit)),
        })
    }

    fn give_back(&self) {
        drop(self.lock().take());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<OwnedSemaphorePermit>> {
        match self.held.lock() {
            Ok(guard) => guard,
            Err(poisoned) => poisoned.into_inner(),
        }
    }
}

/// Runs `job` (a worker's claim, run and settling of one job) with `slot`
/// as its task's permit.
pub async fn holding<F: Future>(slot: Arc<Slot>, job: F) -> F::Output {
    SLOT.scope(slot, job).await
}

/// Awaits `wait` without holding the job's permit, and takes one again
/// before returning. Outside a worker's job it only awaits `wait`.
pub async fn aside<F: Future>(wait: F) -> F::Output {
    let Ok(slot) = SLOT.try_with(Arc::clone) else {
        return wait.await;
    };
    slot.give_back();
    let out = wait.await;
    // The pool never closes its semaphore; were it closed, the job goes on
    // without a permit rather than fail.
    if let Ok(permit) = slot.permits.clone().acquire_owned().await {
        *slot.lock() = Some(permit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_job_waiting_aside_lends_its_permit_and_takes_one_back() {
        let permits = Arc::new(Semaphore::new(1));
        let permit = permits.clone().acquire_owned().await.unwrap();
        let slot = Slot::holding(permits.clone(), permit);
        let seen = holding(slot.clone(), async {
            aside(async { permits.available_permits() }).await
        })
        .await;
        assert_eq!(seen, 1, "the permit is free while the job waits aside");
        assert_eq!(permits.available_permits(), 0, "and held again after");
        drop(slot);
        assert_eq!(permits.available_permits(), 1);
    }

    #[tokio::test]
    async fn outside_a_job_a_wait_is_only_a_wait() {
        assert_eq!(aside(async { 7 }).await, 7);
    }
}
