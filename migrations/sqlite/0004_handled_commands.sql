-- Commands acted on, by comment and text: a delivery replayed under a new
-- delivery id (or a redelivery of an old one) does not run them again.
CREATE TABLE handled_commands (
    comment_id BIGINT NOT NULL,
    digest TEXT NOT NULL,
    handled_at BIGINT NOT NULL,
    PRIMARY KEY (comment_id, digest)
);
