-- Issue events that start a run (an assignment to the App), by a key a
-- replay of the same delivery shares and a new event does not: a signed
-- delivery replayed under a new delivery id does not act again.
CREATE TABLE handled_events (
    event_key TEXT PRIMARY KEY,
    handled_at BIGINT NOT NULL
);
