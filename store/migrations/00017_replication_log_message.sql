-- replication-backfill skips the tasks whose message is dead and not yet
-- replayed, found in object_replication_log by message id: an index on it
-- keeps that lookup off a scan of every dead message.

-- +goose Up
ALTER TABLE object_replication_log ADD KEY idx_object_replication_log_message (message_id);

-- +goose Down
ALTER TABLE object_replication_log DROP INDEX idx_object_replication_log_message;
