package reconcile

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/eisland/isle/store"
	"gorm.io/gorm"
)

// Defaults of OutboxPurgeConfig.
const (
	OutboxRetentionDefault  = 7 * 24 * time.Hour
	OutboxPurgeBatchDefault = 1000
)

// OutboxPurgeConfig configures outbox-purge. Zero fields take the defaults.
type OutboxPurgeConfig struct {
	Retention time.Duration // published rows older than this are deleted
	Batch     int           // rows per DELETE
}

// OutboxPurge is the outbox-purge job (OUTBOX_PURGE_*): it deletes the rows
// of every table of store.OutboxTables that were published longer ago than
// Retention, Batch rows per statement, until none is left. A row not
// published is never deleted (doc/outbox.md).
type OutboxPurge struct {
	db  *gorm.DB
	cfg OutboxPurgeConfig
	m   *Metrics
	log *slog.Logger
}

// NewOutboxPurge returns the job.
func NewOutboxPurge(db *gorm.DB, cfg OutboxPurgeConfig, m *Metrics, log *slog.Logger) *OutboxPurge {
	cfg.Retention = cmp.Or(cfg.Retention, OutboxRetentionDefault)
	cfg.Batch = cmp.Or(cfg.Batch, OutboxPurgeBatchDefault)
	return &OutboxPurge{db: db, cfg: cfg, m: m, log: log}
}

// Name is "outbox-purge".
func (j *OutboxPurge) Name() string { return "outbox-purge" }

// PurgeResult is how many rows one run deleted, by table.
type PurgeResult struct {
	Retention time.Duration
	Deleted   map[string]int64
}

func (r PurgeResult) String() string {
	parts := make([]string, 0, len(store.OutboxTables))
	for _, t := range store.OutboxTables {
		parts = append(parts, fmt.Sprintf("%s %d", t, r.Deleted[t]))
	}
	return fmt.Sprintf("deleted rows published before %s ago: %s", r.Retention, strings.Join(parts, ", "))
}

// LogValue implements slog.LogValuer.
func (r PurgeResult) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Duration("retention", r.Retention)}
	for _, t := range store.OutboxTables {
		attrs = append(attrs, slog.Int64(t, r.Deleted[t]))
	}
	return slog.GroupValue(attrs...)
}

// RunOnce deletes the expired rows of each table, a batch at a time
// (store.PurgeOutbox).
func (j *OutboxPurge) RunOnce(ctx context.Context) (Result, error) {
	res := PurgeResult{Retention: j.cfg.Retention, Deleted: map[string]int64{}}
	for _, table := range store.OutboxTables {
		for ctx.Err() == nil {
			n, err := store.PurgeOutbox(ctx, j.db, table, j.cfg.Retention, j.cfg.Batch)
			if err != nil {
				return res, fmt.Errorf("reconcile: %w", err)
			}
			res.Deleted[table] += n
			j.m.add(j.Name(), table+"_deleted", int(n))
			if n < int64(j.cfg.Batch) {
				break
			}
		}
	}
	return res, ctx.Err()
}
