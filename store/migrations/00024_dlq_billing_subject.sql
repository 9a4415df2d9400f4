-- The operator console's money page (doc/console.md) lists the stored dead
-- billing messages of one user that were not replayed, and whether each
-- holds balance-sync back (internal/service/reconcile, DeadBilling.Of). They are
-- found by the subject the DLQ consumer stored, the body's username;
-- (subject, replayed_at) finds them without reading the other users' rows
-- (InnoDB appends the id, the order they are read in).

-- +goose Up
ALTER TABLE agent_billing_dlq_log ADD KEY idx_agent_billing_dlq_log_subject (subject, replayed_at);

-- +goose Down
ALTER TABLE agent_billing_dlq_log DROP INDEX idx_agent_billing_dlq_log_subject;
