-- The foundation: installations, deliveries and the job queue.
-- Times are milliseconds since the Unix epoch (BIGINT), JSON is TEXT: the
-- same queries run on SQLite and PostgreSQL through sqlx's Any driver.

CREATE TABLE installations (
    id              BIGINT PRIMARY KEY,          -- GitHub's installation id
    account_login   TEXT NOT NULL,
    account_type    TEXT NOT NULL,               -- User | Organization
    suspended_at    BIGINT,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL
);

CREATE TABLE installation_repositories (
    installation_id BIGINT NOT NULL REFERENCES installations (id) ON DELETE CASCADE,
    repository      TEXT NOT NULL,               -- owner/name
    PRIMARY KEY (installation_id, repository)
);

CREATE TABLE deliveries (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id      TEXT NOT NULL UNIQUE,       -- X-GitHub-Delivery
    event            TEXT NOT NULL,              -- X-GitHub-Event
    action           TEXT,
    installation_id  BIGINT,
    repository       TEXT,
    payload          BLOB NOT NULL,
    payload_encoding TEXT NOT NULL,              -- zstd | identity
    received_at      BIGINT NOT NULL,
    status           TEXT NOT NULL,              -- received | processed | ignored | failed
    outcome          TEXT,
    processed_at     BIGINT
);
CREATE INDEX deliveries_status_received ON deliveries (status, received_at);

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT NOT NULL,
    job_key          TEXT NOT NULL,              -- at most one leased job per key
    payload          TEXT NOT NULL,              -- JSON
    state            TEXT NOT NULL,              -- queued | leased | done | dead
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    run_at           BIGINT NOT NULL,
    lease_owner      TEXT,
    lease_expires_at BIGINT,
    last_error       TEXT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    finished_at      BIGINT
);
CREATE INDEX jobs_claimable ON jobs (state, run_at, id);
CREATE UNIQUE INDEX jobs_one_leased_per_key ON jobs (job_key) WHERE state = 'leased';

-- Writes that `closer serve --dry-run` recorded instead of sending.
CREATE TABLE dry_run_writes (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    recorded_at BIGINT NOT NULL,
    method      TEXT NOT NULL,
    path        TEXT NOT NULL,
    body        TEXT
);
