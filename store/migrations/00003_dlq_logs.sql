-- Dead messages (doc/messaging.md, "Dead messages"): each DLQ consumer stores
-- what reached its DLQ. dedup_key (SHA-256 of queue, message id and body) makes a
-- redelivered dead message one row; replayed_at and replay_count serve `islectl dlq replay`.

-- +goose Up
-- email verification dispatch
CREATE TABLE email_dispatch_dlq_log (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  dedup_key    CHAR(64)        NOT NULL,
  queue        VARCHAR(255)    NOT NULL,
  routing_key  VARCHAR(255)    NOT NULL DEFAULT '',
  message_type VARCHAR(255)    NOT NULL DEFAULT '',
  message_id   VARCHAR(128)    NOT NULL DEFAULT '',
  trace_id     VARCHAR(128)    NOT NULL DEFAULT '',
  subject      VARCHAR(255)    NOT NULL DEFAULT '',
  body         MEDIUMBLOB      NOT NULL,
  headers      TEXT            NOT NULL,
  retry_count  INT             NOT NULL DEFAULT 0,
  last_error   TEXT            NULL,
  dead_at      DATETIME(6)     NOT NULL,
  replayed_at  DATETIME(6)     NULL,
  replay_count INT             NOT NULL DEFAULT 0,
  created_at   DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_email_dispatch_dlq_log_dedup (dedup_key),
  KEY idx_email_dispatch_dlq_log_dead_at (dead_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- payment notify and receipt
CREATE TABLE payment_dlq_log (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  dedup_key    CHAR(64)        NOT NULL,
  queue        VARCHAR(255)    NOT NULL,
  routing_key  VARCHAR(255)    NOT NULL DEFAULT '',
  message_type VARCHAR(255)    NOT NULL DEFAULT '',
  message_id   VARCHAR(128)    NOT NULL DEFAULT '',
  trace_id     VARCHAR(128)    NOT NULL DEFAULT '',
  subject      VARCHAR(255)    NOT NULL DEFAULT '',
  body         MEDIUMBLOB      NOT NULL,
  headers      TEXT            NOT NULL,
  retry_count  INT             NOT NULL DEFAULT 0,
  last_error   TEXT            NULL,
  dead_at      DATETIME(6)     NOT NULL,
  replayed_at  DATETIME(6)     NULL,
  replay_count INT             NOT NULL DEFAULT 0,
  created_at   DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_payment_dlq_log_dedup (dedup_key),
  KEY idx_payment_dlq_log_dead_at (dead_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- agent billing deduction
CREATE TABLE agent_billing_dlq_log (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  dedup_key    CHAR(64)        NOT NULL,
  queue        VARCHAR(255)    NOT NULL,
  routing_key  VARCHAR(255)    NOT NULL DEFAULT '',
  message_type VARCHAR(255)    NOT NULL DEFAULT '',
  message_id   VARCHAR(128)    NOT NULL DEFAULT '',
  trace_id     VARCHAR(128)    NOT NULL DEFAULT '',
  subject      VARCHAR(255)    NOT NULL DEFAULT '',
  body         MEDIUMBLOB      NOT NULL,
  headers      TEXT            NOT NULL,
  retry_count  INT             NOT NULL DEFAULT 0,
  last_error   TEXT            NULL,
  dead_at      DATETIME(6)     NOT NULL,
  replayed_at  DATETIME(6)     NULL,
  replay_count INT             NOT NULL DEFAULT 0,
  created_at   DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_agent_billing_dlq_log_dedup (dedup_key),
  KEY idx_agent_billing_dlq_log_dead_at (dead_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- mini game score upsert
CREATE TABLE mini_game_score_dlq_log (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  dedup_key    CHAR(64)        NOT NULL,
  queue        VARCHAR(255)    NOT NULL,
  routing_key  VARCHAR(255)    NOT NULL DEFAULT '',
  message_type VARCHAR(255)    NOT NULL DEFAULT '',
  message_id   VARCHAR(128)    NOT NULL DEFAULT '',
  trace_id     VARCHAR(128)    NOT NULL DEFAULT '',
  subject      VARCHAR(255)    NOT NULL DEFAULT '',
  body         MEDIUMBLOB      NOT NULL,
  headers      TEXT            NOT NULL,
  retry_count  INT             NOT NULL DEFAULT 0,
  last_error   TEXT            NULL,
  dead_at      DATETIME(6)     NOT NULL,
  replayed_at  DATETIME(6)     NULL,
  replay_count INT             NOT NULL DEFAULT 0,
  created_at   DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_mini_game_score_dlq_log_dedup (dedup_key),
  KEY idx_mini_game_score_dlq_log_dead_at (dead_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- identity material upload (the seed only logs these; Isle keeps them)
CREATE TABLE identity_material_dlq_log (
  id           BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  dedup_key    CHAR(64)        NOT NULL,
  queue        VARCHAR(255)    NOT NULL,
  routing_key  VARCHAR(255)    NOT NULL DEFAULT '',
  message_type VARCHAR(255)    NOT NULL DEFAULT '',
  message_id   VARCHAR(128)    NOT NULL DEFAULT '',
  trace_id     VARCHAR(128)    NOT NULL DEFAULT '',
  subject      VARCHAR(255)    NOT NULL DEFAULT '',
  body         MEDIUMBLOB      NOT NULL,
  headers      TEXT            NOT NULL,
  retry_count  INT             NOT NULL DEFAULT 0,
  last_error   TEXT            NULL,
  dead_at      DATETIME(6)     NOT NULL,
  replayed_at  DATETIME(6)     NULL,
  replay_count INT             NOT NULL DEFAULT 0,
  created_at   DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_identity_material_dlq_log_dedup (dedup_key),
  KEY idx_identity_material_dlq_log_dead_at (dead_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE identity_material_dlq_log;
DROP TABLE mini_game_score_dlq_log;
DROP TABLE agent_billing_dlq_log;
DROP TABLE payment_dlq_log;
DROP TABLE email_dispatch_dlq_log;
