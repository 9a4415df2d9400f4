-- Banned users (doc/keys.md, database 9). The API checks the Redis Bloom
-- bitmap and exact set; this table is their durable source, so a Redis that
-- lost its data gets them back.

-- +goose Up
CREATE TABLE user_ban (
  username   VARCHAR(64)  NOT NULL,
  reason     VARCHAR(255) NOT NULL DEFAULT '',
  banned_at  DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (username)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE user_ban;
