-- With what standing a reply was let in (store/runs.rs, `Standing`):
-- 'author' (the issue's author answering closer's question) or 'steering'
-- (a user with the permission to steer). The prompt shows the reply with
-- it. Decided when the reply is stored, by the event that brought it: a
-- login compared later can have changed hands (the author renamed, or a
-- stranger took the freed name). NULL: stored before this column.
ALTER TABLE messages ADD COLUMN standing TEXT;
