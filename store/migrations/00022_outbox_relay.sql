-- The relays running now (internal/service/relay, doc/outbox.md "A relay that
-- dies"). Each relay holds a MySQL named lock, lock_name, on a connection of
-- its own for as long as it runs, and lists itself here; instance tells
-- this start of an owner from a later one. A relay that finds rows claimed
-- by an owner listed here whose lock is free knows that relay is gone (its
-- connections went with its process) and puts the rows back at once rather
-- than wait for their lease. Rows claimed by an owner not listed (a relay
-- that never listed itself) wait for their lease, as before.

-- +goose Up
CREATE TABLE outbox_relay (
  owner      VARCHAR(128) NOT NULL,
  instance   CHAR(16)     NOT NULL,
  lock_name  VARCHAR(64)  NOT NULL,
  started_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (owner)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- +goose Down
DROP TABLE outbox_relay;
