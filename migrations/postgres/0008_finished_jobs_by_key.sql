-- Reconciliation counts a run's steps that died since the last one that
-- completed (store/jobs.rs, `dead_in_a_row`), and retention keeps the
-- completed job that ends such a streak (`prune_done`): both look up the
-- finished jobs of one key. Not a partial index: SQLite uses one only when
-- the query repeats its condition word for word.
CREATE INDEX jobs_finished_key ON jobs (job_key, state, finished_at);
