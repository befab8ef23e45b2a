//! The durable queue's vocabulary: which handler runs a job, where a job is
//! in its life, and the keys that keep one job per run or thread at a time.

use super::{Named, RunId};

/// Which handler runs a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobKind {
    /// Type a stored webhook delivery and act on it.
    Delivery,
    /// One step of a run.
    Run,
}

impl Named for JobKind {
    const ALL: &'static [JobKind] = &[JobKind::Delivery, JobKind::Run];

    fn as_str(self) -> &'static str {
        match self {
            JobKind::Delivery => "delivery",
            JobKind::Run => "run",
        }
    }
}

/// Where a job is in its life: `queued → leased → done`, or `dead` after
/// its last attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum JobState {
    Queued,
    Leased,
    Done,
    Dead,
}

impl Named for JobState {
    const ALL: &'static [JobState] = &[
        JobState::Queued,
        JobState::Leased,
        JobState::Done,
        JobState::Dead,
    ];

    fn as_str(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Leased => "leased",
            JobState::Done => "done",
            JobState::Dead => "dead",
        }
    }
}

/// The key of a run's step jobs: one step of a run at a time.
pub fn run_job_key(run: &RunId) -> String {
    format!("run:{run}")
}
