-- The generation of the ban list (doc/keys.md: a Redis that comes back behind
-- MySQL gets its recent bans back). Every ban and unban adds one to it in
-- the transaction that changes user_ban, and writes the new value to Redis
-- (user:ban:generation) with the change. The API compares the two every few
-- seconds: a Redis that holds no generation, or another one, lost changes
-- or went back in time, and its ban list is rebuilt from user_ban.
-- One row, id 1; no row is generation 0.

-- +goose Up
CREATE TABLE user_ban_generation (
  id         TINYINT UNSIGNED NOT NULL,
  generation BIGINT UNSIGNED  NOT NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB;

-- +goose Down
DROP TABLE user_ban_generation;
