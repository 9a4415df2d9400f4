-- Two columns that let a deduction be told apart from another charge of
-- the same request id (doc/money.md):
--
-- pending_ref: the nonce of the hot-balance charge the row records (the
-- API draws one per charge; deduct.lua keeps it in the pending record and
-- the idempotency marker; the message carries it). A pending record found
-- later with another ref is a second charge of the id, taken after Redis
-- forgot the first: it is refunded. One with the same ref is the row's own,
-- back from an older Redis snapshot: it is only cleared.
--
-- request_hash: a hash of the request's body (model and token counts), so
-- the same id sent with another body is answered 409 even after Redis lost
-- the idempotency marker (markers are restored from the ledger).
--
-- Both are NULL for rows written before them and for foreign producers.

-- +goose Up
ALTER TABLE agent_ledger
  ADD COLUMN pending_ref VARCHAR(32) CHARACTER SET ascii NULL AFTER entry_id,
  ADD COLUMN request_hash VARCHAR(32) CHARACTER SET ascii NULL AFTER pending_ref;

-- +goose Down
ALTER TABLE agent_ledger DROP COLUMN request_hash, DROP COLUMN pending_ref;
