-- Issue and pull request conversation comments GitHub said were deleted:
-- a `created` handled after its `deleted` (deliveries are not ordered, and
-- a failed one is sent again later) stores no reply of it.
CREATE TABLE deleted_comments (
    comment_id BIGINT PRIMARY KEY,
    deleted_at BIGINT NOT NULL
);
