-- Object replication (doc/objects.md): stored objects, the outbox the relay drains,
-- the replication tasks it creates, and the log of dead replication messages.

-- +goose Up
CREATE TABLE stored_object (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  owner_username VARCHAR(64)     NOT NULL,
  kind           VARCHAR(16)     NOT NULL,
  object_key     VARCHAR(255)    NOT NULL,
  content_type   VARCHAR(128)    NOT NULL DEFAULT '',
  size_bytes     BIGINT          NOT NULL,
  sha256         CHAR(64)        NOT NULL,
  source_url     VARCHAR(1024)   NOT NULL,
  replica_url    VARCHAR(1024)   NULL,
  created_at     DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at     DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_stored_object_key (object_key),
  KEY idx_stored_object_owner (owner_username, kind),
  CONSTRAINT ck_stored_object_kind CHECK (kind IN ('avatar', 'wallpaper'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- Written in the object's transaction; claimed by relays with
-- SELECT ... FOR UPDATE SKIP LOCKED on (status, lease_until, id).
CREATE TABLE object_outbox (
  id           BIGINT UNSIGNED  NOT NULL AUTO_INCREMENT,
  object_id    BIGINT UNSIGNED  NOT NULL,
  event_type   VARCHAR(32)      NOT NULL DEFAULT 'REPLICATE',
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
  KEY idx_object_outbox_claim (status, lease_until, id),
  CONSTRAINT ck_object_outbox_status CHECK (status IN ('pending', 'publishing', 'published'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- One task per outbox row: a relay that publishes a row twice reuses the task.
CREATE TABLE object_replication_task (
  id          BIGINT UNSIGNED  NOT NULL AUTO_INCREMENT,
  outbox_id   BIGINT UNSIGNED  NOT NULL,
  object_id   BIGINT UNSIGNED  NOT NULL,
  source_url  VARCHAR(1024)    NOT NULL,
  target_url  VARCHAR(1024)    NOT NULL DEFAULT '',
  priority    TINYINT UNSIGNED NOT NULL DEFAULT 0,
  status      VARCHAR(16)      NOT NULL DEFAULT 'pending',
  attempts    INT              NOT NULL DEFAULT 0,
  last_error  TEXT             NULL,
  sha256      CHAR(64)         NOT NULL,
  trace_id    VARCHAR(128)     NOT NULL DEFAULT '',
  created_at  DATETIME(6)      NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at  DATETIME(6)      NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  done_at     DATETIME(6)      NULL,
  PRIMARY KEY (id),
  UNIQUE KEY uk_object_replication_task_outbox (outbox_id),
  KEY idx_object_replication_task_status (status, updated_at),
  CONSTRAINT ck_object_replication_task_status CHECK (status IN ('pending', 'done', 'failed'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

CREATE TABLE object_replication_log (
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
  UNIQUE KEY uk_object_replication_log_dedup (dedup_key),
  KEY idx_object_replication_log_dead_at (dead_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE object_replication_log;
DROP TABLE object_replication_task;
DROP TABLE object_outbox;
DROP TABLE stored_object;
