//! Whether closer has work on an issue or pull request: an open run on it
//! (as the run's issue or its pull request), or a delivery about it still
//! waiting in the queue (it may be the one that starts a run). The intake
//! asks this, in its batch's transaction, for a delivery triage keeps only
//! while there is work (`engine::triage`); one statement reads both tables,
//! so a run committed by a worker meanwhile is seen either as its queued
//! delivery or as the run, never as neither.

use crate::model::{JobState, Named, RunState};

/// The SQL, with `{p1}` … `{p3}` for the job key, the repository and the
/// number (each backend numbers its placeholders its own way).
fn template() -> String {
    let pending = [JobState::Queued, JobState::Leased]
        .map(|s| format!("'{}'", s.as_str()))
        .join(", ");
    let ended = RunState::ALL
        .iter()
        .filter(|s| s.is_final())
        .map(|s| format!("'{}'", s.as_str()))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "EXISTS (SELECT 1 FROM jobs WHERE job_key = {{p1}} AND state IN ({pending})) \
         OR EXISTS (SELECT 1 FROM runs WHERE repository = {{p2}} AND issue_number = {{p3}} \
         AND state NOT IN ({ended})) \
         OR EXISTS (SELECT 1 FROM runs WHERE repository = {{p2}} AND pull_request = {{p3}} \
         AND state NOT IN ({ended}))"
    )
}

/// The condition with the three given placeholders.
pub(crate) fn condition(key: &str, repository: &str, number: &str) -> String {
    template()
        .replace("{p1}", key)
        .replace("{p2}", repository)
        .replace("{p3}", number)
}

#[cfg(test)]
mod tests {
    use super::condition;

    #[test]
    fn pending_jobs_and_unfinished_runs_count() {
        let sql = condition("?1", "?2", "?3");
        assert!(
            sql.contains("job_key = ?1 AND state IN ('queued', 'leased')"),
            "{sql}"
        );
        assert!(
            sql.contains("state NOT IN ('done', 'failed', 'stopped')"),
            "{sql}"
        );
        assert!(sql.contains("pull_request = ?3"), "{sql}");
    }
}
