-- The claim holds a queued delivery back while an older one of its key is
-- queued (store/jobs.rs, `claim_sql!`): for each candidate it looks for a
-- queued job of the same key with a smaller id. Without this index that
-- read every queued job of the key (the older index has `finished_at`
-- between the key and the id), and a key with thousands queued (one
-- installation's events) made every claim slow. Partial, and the claim
-- repeats `state = 'queued'` word for word, so SQLite uses it.
CREATE INDEX jobs_queued_by_key ON jobs (job_key, id) WHERE state = 'queued';
