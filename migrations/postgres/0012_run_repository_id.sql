-- GitHub's id of a run's repository (engine/run/replaced.rs): a name can
-- pass to another repository (the owner renamed or deleted, the name taken
-- again, perhaps by somebody else); the id stays with the repository. An
-- event under a name whose runs hold another id sets those runs aside
-- instead of handing them, their worktrees and their history to the new
-- holder of the name. NULL: stored before this column (adopted by the next
-- start or restart).
ALTER TABLE runs ADD COLUMN repository_id BIGINT;
