-- Agent money (doc/money.md): the durable balance and its append-only ledger,
-- model pricing and usage statistics.

-- +goose Up
CREATE TABLE user_account (
  id            BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  username      VARCHAR(64)     NOT NULL,
  email         VARCHAR(254)    NULL,
  balance_fen   DECIMAL(20,8)   NOT NULL DEFAULT 0,
  pro_expire_at DATETIME(6)     NULL,
  created_at    DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at    DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_user_account_username (username),
  CONSTRAINT ck_user_account_balance CHECK (balance_fen >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- One row per change of user_account.balance_fen, written in the same
-- transaction. (username, kind, entry_id) is the idempotency key: a deduction
-- id, a recharge's order number or an adjustment id applies once.
CREATE TABLE agent_ledger (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  username     VARCHAR(64)     NOT NULL,
  kind         VARCHAR(16)     NOT NULL,
  entry_id     VARCHAR(128)    NOT NULL,
  amount_fen   DECIMAL(20,8)   NOT NULL,
  model_name   VARCHAR(128)    NULL,
  input_tokens  INT UNSIGNED   NULL,
  output_tokens INT UNSIGNED   NULL,
  reason       VARCHAR(512)    NULL,
  source       VARCHAR(32)     NOT NULL DEFAULT '',
  occurred_at  DATETIME(6)     NOT NULL,
  created_at   DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_agent_ledger_entry (username, kind, entry_id),
  KEY idx_agent_ledger_user_time (username, created_at),
  CONSTRAINT ck_agent_ledger_kind CHECK (kind IN ('DEDUCT', 'RECHARGE', 'ADJUST'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Prices in fen per million tokens.
CREATE TABLE agent_model_pricing (
  id                        BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  model_name                VARCHAR(128)    NOT NULL,
  input_fen_per_mtok        DECIMAL(20,8)   NOT NULL DEFAULT 0,
  cached_input_fen_per_mtok DECIMAL(20,8)   NOT NULL DEFAULT 0,
  output_fen_per_mtok       DECIMAL(20,8)   NOT NULL DEFAULT 0,
  reasoning_fen_per_mtok    DECIMAL(20,8)   NOT NULL DEFAULT 0,
  enabled                   TINYINT(1)      NOT NULL DEFAULT 1,
  created_at                DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at                DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_agent_model_pricing_model (model_name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE agent_usage_stats (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  model_name       VARCHAR(128)    NOT NULL,
  stat_date        DATE            NOT NULL,
  input_tokens     BIGINT UNSIGNED NOT NULL DEFAULT 0,
  cached_tokens    BIGINT UNSIGNED NOT NULL DEFAULT 0,
  output_tokens    BIGINT UNSIGNED NOT NULL DEFAULT 0,
  reasoning_tokens BIGINT UNSIGNED NOT NULL DEFAULT 0,
  request_count    BIGINT UNSIGNED NOT NULL DEFAULT 0,
  cost_micro_fen   BIGINT UNSIGNED NOT NULL DEFAULT 0,
  updated_at       DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_agent_usage_stats_model_day (model_name, stat_date)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Usage messages already counted, so a redelivery is not counted twice.
CREATE TABLE agent_usage_event (
  request_id VARCHAR(128) NOT NULL,
  model_name VARCHAR(128) NOT NULL,
  created_at DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (request_id),
  KEY idx_agent_usage_event_time (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE agent_usage_event;
DROP TABLE agent_usage_stats;
DROP TABLE agent_model_pricing;
DROP TABLE agent_ledger;
DROP TABLE user_account;
