-- Payments (doc/payments.md): orders and the gateway notifications applied to them.

-- +goose Up
CREATE TABLE payment_order (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  out_trade_no   VARCHAR(64)     NOT NULL,
  username       VARCHAR(64)     NOT NULL,
  product_code   VARCHAR(32)     NOT NULL,
  amount_fen     BIGINT          NOT NULL,
  currency       CHAR(3)         NOT NULL DEFAULT 'CNY',
  channel        VARCHAR(16)     NOT NULL,
  status         VARCHAR(16)     NOT NULL DEFAULT 'PENDING',
  transaction_id VARCHAR(64)     NULL,
  receipt_email  VARCHAR(254)    NULL,
  paid_at        DATETIME(6)     NULL,
  expire_at      DATETIME(6)     NOT NULL,
  created_at     DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at     DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_payment_order_out_trade_no (out_trade_no),
  KEY idx_payment_order_user_status (username, status),
  CONSTRAINT ck_payment_order_amount CHECK (amount_fen > 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- One row per distinct notification: the unique key makes a gateway's
-- resend, or a redelivered message, a no-op.
CREATE TABLE payment_notify_record (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  channel        VARCHAR(16)     NOT NULL,
  out_trade_no   VARCHAR(64)     NOT NULL,
  transaction_id VARCHAR(64)     NOT NULL,
  trade_state    VARCHAR(32)     NOT NULL,
  notify_id      VARCHAR(128)    NOT NULL DEFAULT '',
  verify_ok      TINYINT(1)      NOT NULL,
  outcome        VARCHAR(32)     NOT NULL,
  raw_body       MEDIUMTEXT      NULL,
  created_at     DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_payment_notify (channel, out_trade_no, transaction_id, trade_state)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE payment_notify_record;
DROP TABLE payment_order;
