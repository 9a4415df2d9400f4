-- One outbox design for the two tables the relay drains (doc/outbox.md):
-- object_outbox (an object to replicate: the relay makes its
-- object_replication_task, then publishes ObjectReplicationMessage) and
-- outbox (a whole message written in a business transaction, published as
-- it is). They keep their own message columns and get the same claim
-- columns, in the same order, with the same index, so one claim statement
-- (a table name apart) and one Go type, store.OutboxClaim, serve both.
--
-- Two tables rather than object rows in outbox: an object's message carries
-- the id of the replication task the relay creates when it publishes, one
-- per outbox row (uk_object_replication_task_outbox), as the customer's
-- object-replication flow has it, so an object row holds no message yet.
-- Putting object rows in outbox would move the task into the object's
-- transaction and drop that key, and gain nothing for the claim, which the
-- two tables now share.
--
-- The claim: a row is to publish while published_at is NULL, and may be
-- claimed once available_at has passed. A claim sets claimed_by, counts an
-- attempt and moves available_at to the end of its lease; a failed publish
-- moves it by the backoff; a relay that dies leaves the lease to run out.
-- So the rows due are one range of (published_at, available_at, id), read
-- in order: a short READ COMMITTED transaction with SELECT ... FOR UPDATE
-- SKIP LOCKED reads and locks only the rows it takes. status and
-- lease_until said the same as these columns, and their index
-- (status, lease_until, id) held the rows due in two ranges, out of order:
-- a claim of 100 either walked the primary key past every published row or
-- locked every pending row before sorting them (doc/outbox.md has the
-- figures). Nothing wrote either table before this migration; a published
-- row, should there be one, stays published.

-- +goose Up
UPDATE outbox SET published_at = COALESCE(published_at, created_at) WHERE status = 'published';
ALTER TABLE outbox DROP CONSTRAINT ck_outbox_status;
ALTER TABLE outbox
  DROP INDEX idx_outbox_claim,
  DROP COLUMN status,
  DROP COLUMN lease_until,
  ADD COLUMN available_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) AFTER claimed_by,
  ADD KEY idx_outbox_claim (published_at, available_at, id);

UPDATE object_outbox SET published_at = COALESCE(published_at, created_at) WHERE status = 'published';
ALTER TABLE object_outbox DROP CONSTRAINT ck_object_outbox_status;
ALTER TABLE object_outbox
  DROP INDEX idx_object_outbox_claim,
  DROP COLUMN status,
  DROP COLUMN lease_until,
  ADD COLUMN available_at DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) AFTER claimed_by,
  ADD KEY idx_object_outbox_claim (published_at, available_at, id);

-- +goose Down
ALTER TABLE object_outbox
  DROP INDEX idx_object_outbox_claim,
  DROP COLUMN available_at,
  ADD COLUMN status VARCHAR(16) NOT NULL DEFAULT 'pending' AFTER trace_id,
  ADD COLUMN lease_until DATETIME(6) NULL AFTER claimed_by,
  ADD KEY idx_object_outbox_claim (status, lease_until, id);
UPDATE object_outbox SET status = 'published' WHERE published_at IS NOT NULL;
ALTER TABLE object_outbox ADD CONSTRAINT ck_object_outbox_status CHECK (status IN ('pending', 'publishing', 'published'));

ALTER TABLE outbox
  DROP INDEX idx_outbox_claim,
  DROP COLUMN available_at,
  ADD COLUMN status VARCHAR(16) NOT NULL DEFAULT 'pending' AFTER trace_id,
  ADD COLUMN lease_until DATETIME(6) NULL AFTER claimed_by,
  ADD KEY idx_outbox_claim (status, lease_until, id);
UPDATE outbox SET status = 'published' WHERE published_at IS NOT NULL;
ALTER TABLE outbox ADD CONSTRAINT ck_outbox_status CHECK (status IN ('pending', 'publishing', 'published'));
