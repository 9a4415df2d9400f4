-- Outbox rows that can never be published as they are (doc/outbox.md,
-- "Rows that cannot be published"): a domain the topology does not have,
-- headers that are not a JSON object, an object that is gone. The relay
-- parks such a row instead of backing it off for ever: parked_at is set,
-- last_error says why, and available_at moves to the end of time, so the
-- row leaves the claim's range of (published_at, available_at, id) without
-- another index. A row is kept parked until an operator replays it
-- (islectl outbox replay, or the console), which clears parked_at and
-- makes it due at once. Added to both outbox tables, after published_at:
-- their claim columns stay the same.

-- +goose Up
ALTER TABLE outbox ADD COLUMN parked_at DATETIME(6) NULL AFTER published_at;
ALTER TABLE object_outbox ADD COLUMN parked_at DATETIME(6) NULL AFTER published_at;

-- +goose Down
ALTER TABLE object_outbox DROP COLUMN parked_at;
ALTER TABLE outbox DROP COLUMN parked_at;
