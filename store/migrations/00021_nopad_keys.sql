-- Usernames, ledger entry ids and usage request ids compare byte for byte,
-- trailing spaces included, as they do in Go and in Redis keys. utf8mb4_bin
-- (migration 00010) pads: 'a' = 'a ' under it. The ledger's locking read
-- found the row of "msg:X" for the key "msg:X ", Go's lookup did not, and
-- the insert failed on the unique key, batch after batch; a credit "c " was
-- taken for "c" and never applied.
--
-- The NO PAD binary collation is utf8mb4_nopad_bin on MariaDB and
-- utf8mb4_0900_bin on MySQL 8 (docker-compose.yml), and neither server has
-- the other's: each statement is prepared with the one the server has
-- (MariaDB's when it has both). On a server with neither, the first
-- statement fails and nothing changes.
--
-- A PAD SPACE unique key admits no rows that differ only by trailing
-- spaces, so going up cannot break uniqueness. Going down can, if such rows
-- were written since.

-- +goose Up
SET @isle_nopad = IF(EXISTS (SELECT 1 FROM information_schema.COLLATIONS WHERE COLLATION_NAME = 'utf8mb4_nopad_bin'), 'utf8mb4_nopad_bin',
  (SELECT COLLATION_NAME FROM information_schema.COLLATIONS WHERE COLLATION_NAME = 'utf8mb4_0900_bin'));
SET @isle_sql = CONCAT('ALTER TABLE user_account MODIFY username VARCHAR(64) CHARACTER SET utf8mb4 COLLATE ', @isle_nopad, ' NOT NULL');
PREPARE isle_stmt FROM @isle_sql;
EXECUTE isle_stmt;
DEALLOCATE PREPARE isle_stmt;
SET @isle_sql = CONCAT('ALTER TABLE agent_ledger MODIFY username VARCHAR(64) CHARACTER SET utf8mb4 COLLATE ', @isle_nopad, ' NOT NULL');
PREPARE isle_stmt FROM @isle_sql;
EXECUTE isle_stmt;
DEALLOCATE PREPARE isle_stmt;
SET @isle_sql = CONCAT('ALTER TABLE agent_ledger MODIFY entry_id VARCHAR(128) CHARACTER SET utf8mb4 COLLATE ', @isle_nopad, ' NOT NULL');
PREPARE isle_stmt FROM @isle_sql;
EXECUTE isle_stmt;
DEALLOCATE PREPARE isle_stmt;
SET @isle_sql = CONCAT('ALTER TABLE agent_usage_event MODIFY request_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE ', @isle_nopad, ' NOT NULL');
PREPARE isle_stmt FROM @isle_sql;
EXECUTE isle_stmt;
DEALLOCATE PREPARE isle_stmt;
SET @isle_sql = CONCAT('ALTER TABLE user_ban MODIFY username VARCHAR(64) CHARACTER SET utf8mb4 COLLATE ', @isle_nopad, ' NOT NULL');
PREPARE isle_stmt FROM @isle_sql;
EXECUTE isle_stmt;
DEALLOCATE PREPARE isle_stmt;
SET @isle_sql = CONCAT('ALTER TABLE payment_order MODIFY username VARCHAR(64) CHARACTER SET utf8mb4 COLLATE ', @isle_nopad, ' NOT NULL');
PREPARE isle_stmt FROM @isle_sql;
EXECUTE isle_stmt;
DEALLOCATE PREPARE isle_stmt;
SET @isle_sql = CONCAT('ALTER TABLE identity_verification MODIFY username VARCHAR(64) CHARACTER SET utf8mb4 COLLATE ', @isle_nopad, ' NOT NULL');
PREPARE isle_stmt FROM @isle_sql;
EXECUTE isle_stmt;
DEALLOCATE PREPARE isle_stmt;
SET @isle_sql = CONCAT('ALTER TABLE stored_object MODIFY owner_username VARCHAR(64) CHARACTER SET utf8mb4 COLLATE ', @isle_nopad, ' NOT NULL');
PREPARE isle_stmt FROM @isle_sql;
EXECUTE isle_stmt;
DEALLOCATE PREPARE isle_stmt;

-- +goose Down
ALTER TABLE stored_object MODIFY owner_username VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
ALTER TABLE identity_verification MODIFY username VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
ALTER TABLE payment_order MODIFY username VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
ALTER TABLE user_ban MODIFY username VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
ALTER TABLE agent_usage_event MODIFY request_id VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
ALTER TABLE agent_ledger MODIFY entry_id VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
ALTER TABLE agent_ledger MODIFY username VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
ALTER TABLE user_account MODIFY username VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL;
