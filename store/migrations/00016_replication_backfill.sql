-- replication-backfill (doc/outbox.md "Backfill") looks for the tasks whose
-- message is presumably lost: pending or failed, not updated for a while,
-- with attempts left. (status, updated_at, attempts) holds them in two
-- ranges of the index, one per status, and lets the attempts filter run on
-- the index entries: tasks that used up their retries (left to the DLQ)
-- stay failed and old for good, and are skipped without reading their rows.
-- The ids come from the index too (InnoDB appends the primary key), so the
-- query sorts only the ids of the matching tasks and reads the rows of the
-- batch it returns. It replaces (status, updated_at), its prefix, which no
-- other query used.

-- +goose Up
ALTER TABLE object_replication_task
  DROP INDEX idx_object_replication_task_status,
  ADD KEY idx_object_replication_task_stuck (status, updated_at, attempts);

-- +goose Down
ALTER TABLE object_replication_task
  DROP INDEX idx_object_replication_task_stuck,
  ADD KEY idx_object_replication_task_status (status, updated_at);
