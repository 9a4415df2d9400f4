-- Identity verification and mini game scores (doc/games.md).

-- +goose Up
CREATE TABLE identity_verification (
  id                BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  username          VARCHAR(64)     NOT NULL,
  certify_id        VARCHAR(128)    NOT NULL,
  status            VARCHAR(16)     NOT NULL DEFAULT 'INIT',
  material_info_url VARCHAR(1024)   NULL,
  passed_at         DATETIME(6)     NULL,
  created_at        DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at        DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_identity_verification_certify (certify_id),
  KEY idx_identity_verification_user (username)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- A user's best score per game. Upserts keep the maximum with GREATEST, so
-- they are safe in any order and without a lock.
CREATE TABLE mini_game_score (
  id             BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  user_id        BIGINT UNSIGNED NOT NULL,
  game_id        VARCHAR(32)     NOT NULL,
  score          BIGINT          NOT NULL,
  duration_ms    BIGINT          NOT NULL DEFAULT 0,
  moves          INT             NOT NULL DEFAULT 0,
  achieved_at    BIGINT          NOT NULL DEFAULT 0,
  submit_id      VARCHAR(64)     NOT NULL DEFAULT '',
  client_version VARCHAR(64)     NOT NULL DEFAULT '',
  created_at     DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  updated_at     DATETIME(6)     NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
  PRIMARY KEY (id),
  UNIQUE KEY uk_mini_game_score_user_game (user_id, game_id),
  KEY idx_mini_game_score_game_score (game_id, score),
  CONSTRAINT ck_mini_game_score_score CHECK (score >= 0)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE mini_game_score;
DROP TABLE identity_verification;
