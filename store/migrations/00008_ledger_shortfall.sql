-- Two additions to the ledger (doc/money.md):
--
-- shortfall_fen: a deduction the MySQL balance could not cover in full (money
-- spent twice after a Redis loss) keeps the amount actually taken and the
-- shortfall, so reported = taken + shortfall for every deduction.
--
-- seq: a per-user sequence of ledger entries, assigned under the account's
-- row lock, so it follows commit order per user (auto-increment ids do not:
-- they are handed out at insert). A Redis balance initialised from MySQL
-- records the sequence it read; an entry with a higher one is not in it.

-- +goose Up
ALTER TABLE agent_ledger
  ADD COLUMN shortfall_fen DECIMAL(20,8) NOT NULL DEFAULT 0 AFTER amount_fen,
  ADD COLUMN seq BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER entry_id;
ALTER TABLE user_account ADD COLUMN ledger_seq BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER balance_fen;

-- +goose Down
ALTER TABLE user_account DROP COLUMN ledger_seq;
ALTER TABLE agent_ledger DROP COLUMN seq, DROP COLUMN shortfall_fen;
