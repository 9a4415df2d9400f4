package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// ParkedRow is an outbox row the relay parked: it cannot be published as it
// is (doc/outbox.md, "Rows that cannot be published").
type ParkedRow struct {
	Table string
	ID    uint64
	// What the row publishes: "<domain> <message id>" for outbox, "object
	// <id>" for object_outbox.
	What      string
	Attempts  int
	LastError string
	CreatedAt time.Time
	ParkedAt  time.Time
}

// ParkedOutbox lists the parked rows of every table of OutboxTables, up to
// limit of each, oldest first, and how many each table holds in all.
func ParkedOutbox(ctx context.Context, db *gorm.DB, limit int) ([]ParkedRow, map[string]int, error) {
	db = db.WithContext(ctx)
	var rows []ParkedRow
	counts := map[string]int{}
	for _, table := range OutboxTables {
		what := "CONCAT(domain, ' ', message_id)"
		if table == "object_outbox" {
			what = "CONCAT('object ', object_id)"
		}
		var n int
		if err := db.Raw("SELECT COUNT(*) FROM " + table + " WHERE published_at IS NULL AND parked_at IS NOT NULL").Scan(&n).Error; err != nil {
			return nil, nil, fmt.Errorf("store: parked rows of %s: %w", table, err)
		}
		counts[table] = n
		if n == 0 {
			continue
		}
		var some []ParkedRow
		err := db.Raw("SELECT ? AS `table`, id, "+what+" AS what, attempts, COALESCE(last_error, '') AS last_error, created_at, parked_at FROM "+
			table+" WHERE published_at IS NULL AND parked_at IS NOT NULL ORDER BY parked_at, id LIMIT ?", table, limit).Scan(&some).Error
		if err != nil {
			return nil, nil, fmt.Errorf("store: parked rows of %s: %w", table, err)
		}
		rows = append(rows, some...)
	}
	return rows, counts, nil
}

// UnparkOutbox makes parked rows of table due again, with their attempts
// reset (their last_error stays until the next publish): the ids given, or
// every parked row of the table when ids is empty. It returns how many it
// unparked; a row not parked (any more) is left alone, so a replay twice
// unparks once.
func UnparkOutbox(ctx context.Context, db *gorm.DB, table string, ids []uint64) (int, error) {
	if err := outboxTable(table); err != nil {
		return 0, err
	}
	q := db.WithContext(ctx).Table(table).Where("published_at IS NULL AND parked_at IS NOT NULL")
	if len(ids) > 0 {
		q = q.Where("id IN ?", ids)
	}
	res := q.Updates(map[string]any{"parked_at": nil, "claimed_by": nil, "attempts": 0, "available_at": gorm.Expr("NOW(6)")})
	if res.Error != nil {
		return 0, fmt.Errorf("store: unpark %s: %w", table, res.Error)
	}
	return int(res.RowsAffected), nil
}

// PurgeOutbox deletes up to limit rows of table published more than
// retention ago, oldest first, and returns how many it deleted. The DELETE
// is a READ COMMITTED transaction of its own: at REPEATABLE READ its range
// scan would lock the gap where new outbox rows go, and hold up business
// inserts.
func PurgeOutbox(ctx context.Context, db *gorm.DB, table string, retention time.Duration, limit int) (int64, error) {
	if err := outboxTable(table); err != nil {
		return 0, err
	}
	var n int64
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		del := tx.Exec("DELETE FROM "+table+" WHERE published_at < NOW(6) - INTERVAL ? MICROSECOND ORDER BY published_at LIMIT ?",
			retention.Microseconds(), limit)
		n = del.RowsAffected
		return del.Error
	}, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, fmt.Errorf("store: purge %s: %w", table, err)
	}
	return n, nil
}
