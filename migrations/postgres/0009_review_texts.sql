-- The words of review comments on closer's pull requests as a person
-- allowed to steer wrote them (or, in an edit, changed them), from their
-- webhooks, and closer's own thread replies as it posted them. A review thread's prompt uses these rather than the text GitHub
-- shows now, which anyone who can edit the comment (every writer) may have
-- changed since (store/review_texts.rs). `version` is the comment's
-- `updated_at` as GitHub sent it, so an older delivery never overwrites a
-- newer text.
CREATE TABLE review_texts (
    run_id       TEXT NOT NULL,
    comment_id   BIGINT NOT NULL,
    author       TEXT NOT NULL,
    body         TEXT NOT NULL,
    version      TEXT NOT NULL,
    kept_at      BIGINT NOT NULL,
    PRIMARY KEY (run_id, comment_id)
);
