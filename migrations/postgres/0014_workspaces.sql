-- The data directories (workspaces) of live closer processes with workers:
-- each says so every 20 s. A run's steps go to the workspace holding its
-- worktree while that one is alive (decision 254).
CREATE TABLE workspaces (
    id TEXT PRIMARY KEY,
    seen_at BIGINT NOT NULL
);
