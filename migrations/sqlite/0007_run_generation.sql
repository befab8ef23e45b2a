-- Each restart of a run (`/closer retry`, `/closer run`, an assignment)
-- starts a new generation; a step's save only lands on the generation it
-- loaded, so a step of a run's earlier life never writes over a restart.
ALTER TABLE runs ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
