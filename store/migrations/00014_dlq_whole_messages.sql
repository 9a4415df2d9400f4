-- Dead messages are kept whole (doc/messaging.md, "Dead messages").
-- INSERT IGNORE had turned "data too long" into a warning: a 70 KB header was
-- stored cut to the 64 KB of the TEXT column, and a body larger than the
-- server's max_allowed_packet could not be stored at all. Now a body or
-- headers value larger than its row may hold (256 KiB for a body, 64 KB for
-- the headers) is written to dlq_log_part in pieces of at most 256 KiB, in the
-- row's transaction, and the row's own column is left empty. No statement
-- then carries more than about 800 KiB, so a server whose max_allowed_packet
-- is 1 MiB or more (every default since MySQL 5.5) keeps a message as large
-- as RabbitMQ delivers (128 MiB by default), in any sql_mode.
-- body_bytes and headers_bytes are the whole sizes and parts the number of
-- pieces, so a reader can tell a whole message from a damaged one.
-- message_id and trace_id widen to 255, what an AMQP message_id or
-- correlation_id can hold, so a replay sends the ids it received.
--
-- Down drops the pieces, and with them the bodies and headers of large
-- messages (their rows stay, with empty columns); narrowing the ids fails
-- (strict sql_mode) or cuts them (otherwise) if a longer one was stored.

-- +goose Up
-- The pieces of values too large for their dead-letter row: log_table and
-- log_id name the row, field the column (body or headers), seq the order.
CREATE TABLE dlq_log_part (
  log_table VARCHAR(64)     NOT NULL,
  log_id    BIGINT UNSIGNED NOT NULL,
  field     VARCHAR(16)     NOT NULL,
  seq       INT UNSIGNED    NOT NULL,
  data      MEDIUMBLOB      NOT NULL,
  PRIMARY KEY (log_table, log_id, field, seq)
) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin;

ALTER TABLE email_dispatch_dlq_log
  MODIFY message_id VARCHAR(255) NOT NULL DEFAULT '',
  MODIFY trace_id   VARCHAR(255) NOT NULL DEFAULT '',
  ADD COLUMN body_bytes    BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER headers,
  ADD COLUMN headers_bytes BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER body_bytes,
  ADD COLUMN parts         INT UNSIGNED    NOT NULL DEFAULT 0 AFTER headers_bytes;
UPDATE email_dispatch_dlq_log SET body_bytes = LENGTH(body), headers_bytes = LENGTH(headers);

ALTER TABLE payment_dlq_log
  MODIFY message_id VARCHAR(255) NOT NULL DEFAULT '',
  MODIFY trace_id   VARCHAR(255) NOT NULL DEFAULT '',
  ADD COLUMN body_bytes    BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER headers,
  ADD COLUMN headers_bytes BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER body_bytes,
  ADD COLUMN parts         INT UNSIGNED    NOT NULL DEFAULT 0 AFTER headers_bytes;
UPDATE payment_dlq_log SET body_bytes = LENGTH(body), headers_bytes = LENGTH(headers);

ALTER TABLE agent_billing_dlq_log
  MODIFY message_id VARCHAR(255) NOT NULL DEFAULT '',
  MODIFY trace_id   VARCHAR(255) NOT NULL DEFAULT '',
  ADD COLUMN body_bytes    BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER headers,
  ADD COLUMN headers_bytes BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER body_bytes,
  ADD COLUMN parts         INT UNSIGNED    NOT NULL DEFAULT 0 AFTER headers_bytes;
UPDATE agent_billing_dlq_log SET body_bytes = LENGTH(body), headers_bytes = LENGTH(headers);

ALTER TABLE object_replication_log
  MODIFY message_id VARCHAR(255) NOT NULL DEFAULT '',
  MODIFY trace_id   VARCHAR(255) NOT NULL DEFAULT '',
  ADD COLUMN body_bytes    BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER headers,
  ADD COLUMN headers_bytes BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER body_bytes,
  ADD COLUMN parts         INT UNSIGNED    NOT NULL DEFAULT 0 AFTER headers_bytes;
UPDATE object_replication_log SET body_bytes = LENGTH(body), headers_bytes = LENGTH(headers);

ALTER TABLE identity_material_dlq_log
  MODIFY message_id VARCHAR(255) NOT NULL DEFAULT '',
  MODIFY trace_id   VARCHAR(255) NOT NULL DEFAULT '',
  ADD COLUMN body_bytes    BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER headers,
  ADD COLUMN headers_bytes BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER body_bytes,
  ADD COLUMN parts         INT UNSIGNED    NOT NULL DEFAULT 0 AFTER headers_bytes;
UPDATE identity_material_dlq_log SET body_bytes = LENGTH(body), headers_bytes = LENGTH(headers);

ALTER TABLE mini_game_score_dlq_log
  MODIFY message_id VARCHAR(255) NOT NULL DEFAULT '',
  MODIFY trace_id   VARCHAR(255) NOT NULL DEFAULT '',
  ADD COLUMN body_bytes    BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER headers,
  ADD COLUMN headers_bytes BIGINT UNSIGNED NOT NULL DEFAULT 0 AFTER body_bytes,
  ADD COLUMN parts         INT UNSIGNED    NOT NULL DEFAULT 0 AFTER headers_bytes;
UPDATE mini_game_score_dlq_log SET body_bytes = LENGTH(body), headers_bytes = LENGTH(headers);

-- +goose Down
DROP TABLE dlq_log_part;
ALTER TABLE email_dispatch_dlq_log
  DROP COLUMN parts,
  DROP COLUMN headers_bytes,
  DROP COLUMN body_bytes,
  MODIFY message_id VARCHAR(128) NOT NULL DEFAULT '',
  MODIFY trace_id   VARCHAR(128) NOT NULL DEFAULT '';

ALTER TABLE payment_dlq_log
  DROP COLUMN parts,
  DROP COLUMN headers_bytes,
  DROP COLUMN body_bytes,
  MODIFY message_id VARCHAR(128) NOT NULL DEFAULT '',
  MODIFY trace_id   VARCHAR(128) NOT NULL DEFAULT '';

ALTER TABLE agent_billing_dlq_log
  DROP COLUMN parts,
  DROP COLUMN headers_bytes,
  DROP COLUMN body_bytes,
  MODIFY message_id VARCHAR(128) NOT NULL DEFAULT '',
  MODIFY trace_id   VARCHAR(128) NOT NULL DEFAULT '';

ALTER TABLE object_replication_log
  DROP COLUMN parts,
  DROP COLUMN headers_bytes,
  DROP COLUMN body_bytes,
  MODIFY message_id VARCHAR(128) NOT NULL DEFAULT '',
  MODIFY trace_id   VARCHAR(128) NOT NULL DEFAULT '';

ALTER TABLE identity_material_dlq_log
  DROP COLUMN parts,
  DROP COLUMN headers_bytes,
  DROP COLUMN body_bytes,
  MODIFY message_id VARCHAR(128) NOT NULL DEFAULT '',
  MODIFY trace_id   VARCHAR(128) NOT NULL DEFAULT '';

ALTER TABLE mini_game_score_dlq_log
  DROP COLUMN parts,
  DROP COLUMN headers_bytes,
  DROP COLUMN body_bytes,
  MODIFY message_id VARCHAR(128) NOT NULL DEFAULT '',
  MODIFY trace_id   VARCHAR(128) NOT NULL DEFAULT '';
