-- Triage at intake asks, for a delivery that matters only while closer has
-- work on its issue or pull request, whether a delivery about it is still
-- queued or a run on it is open (store/open_work.rs). These indexes keep
-- that one lookup per delivery cheap.
CREATE INDEX jobs_pending_key ON jobs (job_key) WHERE state IN ('queued', 'leased');
CREATE INDEX runs_pull_request ON runs (repository, pull_request);
