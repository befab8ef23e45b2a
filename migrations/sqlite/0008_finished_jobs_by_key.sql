-- Reconciliation counts a run's steps that died since the last one that
-- completed (store/jobs.rs, `dead_in_a_row`), and retention keeps the
-- completed job that ends such a streak (`prune_done`): both look up the
-- finished jobs of one key.
CREATE INDEX jobs_finished_key ON jobs (job_key, state, finished_at)
    WHERE state IN ('done', 'dead');
