-- hot_entries counts a user's ledger entries that are written unsettled, to
-- be settled into the Redis balance (doc/money.md): the deductions Isle took in
-- Redis and the recharges. It moves in the transaction that inserts such an
-- entry. Redis keeps its own count, agent:balance-entries:{username}: the
-- number its balance reflects, set by an initialisation to what it read here
-- and raised by each settle. A Redis that comes back from an older snapshot
-- brings back an older count as well, and the gap stays whatever happens
-- after it; balance-sync, finding Redis's count below MySQL's for a quiet
-- user, rebuilds Redis from MySQL instead of taking Redis's balance for the
-- truth. Both counts only compare with each other, so existing accounts
-- start at 0.

-- +goose Up
ALTER TABLE user_account ADD COLUMN hot_entries BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER ledger_seq;

-- +goose Down
ALTER TABLE user_account DROP COLUMN hot_entries;
