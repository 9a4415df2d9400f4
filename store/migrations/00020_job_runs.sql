-- Each run of a reconciler job (internal/service/reconcile: scheduled, `reconcile
-- -once` or the operator console's "run now"), for operators to read: who
-- ran it and where, when it started and ended, what it did (the Result an
-- operator reads, as text and as JSON with the log's names) or why it
-- failed. A run whose process died keeps no finished_at. Runs older than
-- a week are deleted as new ones finish; (job, started_at) serves both the
-- console's "last runs of each job" and that deletion.

-- +goose Up
CREATE TABLE job_run (
  id          BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  job         VARCHAR(64)     NOT NULL,
  started_by  VARCHAR(128)    NOT NULL,
  owner       VARCHAR(255)    NOT NULL,
  started_at  DATETIME(6)     NOT NULL,
  finished_at DATETIME(6)     NULL,
  outcome     VARCHAR(16)     NOT NULL DEFAULT 'running',
  summary     TEXT            NULL,
  result      TEXT            NULL,
  error       TEXT            NULL,
  PRIMARY KEY (id),
  KEY idx_job_run_job (job, started_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_unicode_ci;

-- +goose Down
DROP TABLE job_run;
