-- The generic outbox (doc/outbox.md): messages written inside a business
-- transaction (e.g. a payment receipt) and published by cmd/relay after
-- commit. domain names the topology domain, so the exchange and routing key
-- follow the configured prefix at publish time.

-- +goose Up
CREATE TABLE outbox (
  id           BIGINT UNSIGNED  NOT NULL AUTO_INCREMENT,
  message_id   CHAR(36)         NOT NULL,
  domain       VARCHAR(64)      NOT NULL,
  message_type VARCHAR(255)     NOT NULL DEFAULT '',
  payload      MEDIUMBLOB       NOT NULL,
  headers      TEXT             NOT NULL,
  priority     TINYINT UNSIGNED NOT NULL DEFAULT 0,
  trace_id     VARCHAR(128)     NOT NULL DEFAULT '',
  status       VARCHAR(16)      NOT NULL DEFAULT 'pending',
  claimed_by   VARCHAR(128)     NULL,
  lease_until  DATETIME(6)      NULL,
  attempts     INT              NOT NULL DEFAULT 0,
  last_error   TEXT             NULL,
  published_at DATETIME(6)      NULL,
  created_at   DATETIME(6)      NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_outbox_message_id (message_id),
  KEY idx_outbox_claim (status, lease_until, id),
  CONSTRAINT ck_outbox_status CHECK (status IN ('pending', 'publishing', 'published'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE outbox;
