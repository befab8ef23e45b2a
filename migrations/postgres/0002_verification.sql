-- Verification evidence per run and iteration: artifacts, goal results,
-- fingerprinted failures, convergence decisions and the run's diagnostic
-- artifacts. Keyed by run_id (TEXT) and iteration; the runs table comes in a
-- later migration, so there is no foreign key to it. Times are BIGINT ms,
-- JSON is TEXT, booleans are 0/1 BIGINT (the Any driver's common ground).

CREATE TABLE iteration_artifacts (
    run_id       TEXT NOT NULL,
    iteration    BIGINT NOT NULL,
    base_commit  TEXT NOT NULL,
    head         TEXT NOT NULL,
    branch       TEXT,
    diff_hash    TEXT NOT NULL,
    data         TEXT NOT NULL,              -- JSON: commits, changed and untracked files
    missing      TEXT NOT NULL,              -- JSON array of missing artifact kinds
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (run_id, iteration)
);

CREATE TABLE goal_results (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       TEXT NOT NULL,
    iteration    BIGINT NOT NULL,            -- 0 = the baseline
    position     BIGINT NOT NULL,
    level        TEXT NOT NULL,              -- dod | task_type | acceptance
    goal_type    TEXT NOT NULL,
    target       TEXT NOT NULL,
    passed       BIGINT NOT NULL,
    required     BIGINT NOT NULL,
    not_runnable BIGINT NOT NULL,
    baseline_only BIGINT NOT NULL,           -- failed only with failures the baseline had
    duration_ms  BIGINT NOT NULL,
    evidence     TEXT NOT NULL,
    created_at   BIGINT NOT NULL
);
CREATE UNIQUE INDEX goal_results_run_iteration ON goal_results (run_id, iteration, position);

CREATE TABLE failures (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       TEXT NOT NULL,
    iteration    BIGINT NOT NULL,            -- 0 = the baseline
    fingerprint  TEXT NOT NULL,
    runner       TEXT NOT NULL,
    command      TEXT NOT NULL,
    test_name    TEXT,
    location     TEXT,
    error        TEXT NOT NULL,
    is_new       BIGINT NOT NULL,            -- not in the baseline
    created_at   BIGINT NOT NULL
);
CREATE UNIQUE INDEX failures_run_iteration_fp ON failures (run_id, iteration, fingerprint);
CREATE INDEX failures_fingerprint ON failures (run_id, fingerprint);

CREATE TABLE convergence_decisions (
    run_id       TEXT NOT NULL,
    iteration    BIGINT NOT NULL,
    check_id     TEXT NOT NULL UNIQUE,
    decision     TEXT NOT NULL,              -- complete | incomplete | failed
    stage        BIGINT NOT NULL,            -- 1 | 2 | 3
    data         TEXT NOT NULL,              -- JSON: the whole decision
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (run_id, iteration)
);

CREATE TABLE run_diagnostics (
    run_id       TEXT NOT NULL,
    kind         TEXT NOT NULL,              -- baseline_failures | current_failures | fingerprint_history | completion_reasons | convergence_state
    data         TEXT NOT NULL,              -- JSON
    updated_at   BIGINT NOT NULL,
    PRIMARY KEY (run_id, kind)
);
