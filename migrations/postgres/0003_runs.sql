-- Runs and iterations: one run per (repository, issue), a sequence of
-- iterations, and the maintainer's replies fed to the next prompt. Times are
-- BIGINT ms, JSON is TEXT; the verification evidence of each iteration is in
-- the tables of migration 2, keyed by the same run_id and iteration.

CREATE TABLE runs (
    id                 TEXT PRIMARY KEY,
    installation_id    BIGINT NOT NULL,
    repository         TEXT NOT NULL,            -- owner/name
    issue_number       BIGINT NOT NULL,
    state              TEXT NOT NULL,            -- queued | running | awaiting_response | verifying | done | failed | stopped
    phase              TEXT NOT NULL,            -- preparation | processing | review | complete
    completion_type    TEXT NOT NULL,
    task_type          TEXT,
    stage              BIGINT NOT NULL,          -- convergence stage 1 | 2 | 3
    iteration          BIGINT NOT NULL,          -- iterations started so far
    max_iterations     BIGINT NOT NULL,
    branch             TEXT NOT NULL,
    base_commit        TEXT,
    clone_url          TEXT,
    default_branch     TEXT,
    pull_request       BIGINT,
    status_comment_id  BIGINT,
    tokens_used        BIGINT NOT NULL DEFAULT 0,
    cost_usd           DOUBLE PRECISION NOT NULL DEFAULT 0,
    outcome            TEXT,                     -- why it ended (failed/stopped/done)
    data               TEXT NOT NULL DEFAULT '{}', -- JSON: config snapshot, labels applied, project sync notes
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL
);
CREATE UNIQUE INDEX runs_issue ON runs (repository, issue_number);
CREATE INDEX runs_state ON runs (state);

CREATE TABLE iterations (
    run_id       TEXT NOT NULL,
    number       BIGINT NOT NULL,
    prompt       TEXT NOT NULL,
    agent        TEXT,                           -- JSON: the agent result
    judgment     TEXT,                           -- JSON: closer, question detection, handler
    decision     TEXT,                           -- complete | awaiting_response | incomplete | failed | error
    started_at   BIGINT NOT NULL,
    finished_at  BIGINT,
    PRIMARY KEY (run_id, number)
);

CREATE TABLE messages (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       TEXT NOT NULL,
    comment_id   BIGINT NOT NULL,
    author       TEXT NOT NULL,
    body         TEXT NOT NULL,
    used_in      BIGINT,                         -- the iteration whose prompt carried it
    created_at   BIGINT NOT NULL
);
CREATE UNIQUE INDEX messages_comment ON messages (run_id, comment_id);
