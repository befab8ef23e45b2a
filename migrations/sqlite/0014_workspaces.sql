-- The data directories (workspaces) of live closer processes with workers:
-- each process says so every 20 s, in a row of its own (processes may
-- share a data directory). A run's steps go to the workspace holding its
-- worktree while that one is alive (decision 254).
CREATE TABLE workspaces (
    id TEXT NOT NULL,
    process TEXT NOT NULL,
    seen_at BIGINT NOT NULL,
    PRIMARY KEY (id, process)
);
