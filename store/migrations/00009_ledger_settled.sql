-- settled_at: when the Redis balance was made to reflect the entry (doc/money.md).
-- The record lives in MySQL, not only in an expiring Redis marker, so an
-- entry is settled once however late it is redelivered or re-credited, and
-- balance-sync settles the entries a crash left unsettled before it compares.
-- Entries that need no settling (an adjustment, an opening balance, a
-- deduction a foreign producer took) are settled when written.
--
-- agent_usage_event.request_id grows to hold "username:requestId".

-- +goose Up
ALTER TABLE agent_ledger
  ADD COLUMN settled_at DATETIME(6) NULL AFTER occurred_at,
  ADD KEY idx_agent_ledger_unsettled (settled_at, created_at);
UPDATE agent_ledger SET settled_at = created_at;
ALTER TABLE agent_usage_event MODIFY request_id VARCHAR(255) NOT NULL;

-- +goose Down
ALTER TABLE agent_usage_event MODIFY request_id VARCHAR(128) NOT NULL;
ALTER TABLE agent_ledger DROP KEY idx_agent_ledger_unsettled, DROP COLUMN settled_at;
