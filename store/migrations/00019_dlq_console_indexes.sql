-- The operator console (doc/console.md) lists dead messages newest first,
-- those not replayed by default, and shows each one's earlier deaths by its
-- message id. (replayed_at, dead_at) serves the default listing and the
-- count of messages waiting for a replay without reading the rows (InnoDB
-- appends the id, the order's tie-break); the listing of every row uses the
-- dead_at index there is. message_id finds a message's rows, one per death
-- (object_replication_log has that index since 00017). With 10,000 dead
-- messages stored, a page of 50 reads about 50 index entries.

-- +goose Up
ALTER TABLE email_dispatch_dlq_log
  ADD KEY idx_email_dispatch_dlq_log_replayed (replayed_at, dead_at),
  ADD KEY idx_email_dispatch_dlq_log_message (message_id);
ALTER TABLE payment_dlq_log
  ADD KEY idx_payment_dlq_log_replayed (replayed_at, dead_at),
  ADD KEY idx_payment_dlq_log_message (message_id);
ALTER TABLE agent_billing_dlq_log
  ADD KEY idx_agent_billing_dlq_log_replayed (replayed_at, dead_at),
  ADD KEY idx_agent_billing_dlq_log_message (message_id);
ALTER TABLE mini_game_score_dlq_log
  ADD KEY idx_mini_game_score_dlq_log_replayed (replayed_at, dead_at),
  ADD KEY idx_mini_game_score_dlq_log_message (message_id);
ALTER TABLE identity_material_dlq_log
  ADD KEY idx_identity_material_dlq_log_replayed (replayed_at, dead_at),
  ADD KEY idx_identity_material_dlq_log_message (message_id);
ALTER TABLE object_replication_log
  ADD KEY idx_object_replication_log_replayed (replayed_at, dead_at);

-- +goose Down
ALTER TABLE object_replication_log DROP INDEX idx_object_replication_log_replayed;
ALTER TABLE identity_material_dlq_log
  DROP INDEX idx_identity_material_dlq_log_message,
  DROP INDEX idx_identity_material_dlq_log_replayed;
ALTER TABLE mini_game_score_dlq_log
  DROP INDEX idx_mini_game_score_dlq_log_message,
  DROP INDEX idx_mini_game_score_dlq_log_replayed;
ALTER TABLE agent_billing_dlq_log
  DROP INDEX idx_agent_billing_dlq_log_message,
  DROP INDEX idx_agent_billing_dlq_log_replayed;
ALTER TABLE payment_dlq_log
  DROP INDEX idx_payment_dlq_log_message,
  DROP INDEX idx_payment_dlq_log_replayed;
ALTER TABLE email_dispatch_dlq_log
  DROP INDEX idx_email_dispatch_dlq_log_message,
  DROP INDEX idx_email_dispatch_dlq_log_replayed;
