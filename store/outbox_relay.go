package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
)

// Outbox is the relay's side of the outbox tables (OutboxTables): it claims
// the rows due, marks them published, records why one was not, creates the
// replication tasks of object_outbox rows and puts back the rows of relays
// that are gone (doc/outbox.md). It is safe for concurrent use.
type Outbox struct{ db *gorm.DB }

// NewOutbox returns the outbox tables of db.
func NewOutbox(db *gorm.DB) *Outbox { return &Outbox{db: db} }

// ClaimedObject is an object_outbox row as the relay claims it, with the
// object it replicates: SourceURL and SHA256 are nil when the object is
// gone.
type ClaimedObject struct {
	ID        uint64  `gorm:"column:id"`
	Attempts  int     `gorm:"column:attempts"` // claims so far, this one included
	ObjectID  uint64  `gorm:"column:object_id"`
	Priority  uint8   `gorm:"column:priority"`
	TraceID   string  `gorm:"column:trace_id"`
	Headers   string  `gorm:"column:headers"` // JSON object
	SourceURL *string `gorm:"column:source_url"`
	SHA256    *string `gorm:"column:sha256"`
}

// claimSQL is doc/outbox.md's claim: the rows due, in the claim index's
// order, skipping those another relay holds locked.
func claimSQL(table string) string {
	return "SELECT id FROM " + table + " WHERE published_at IS NULL AND available_at <= NOW(6)" +
		" ORDER BY available_at, id LIMIT ? FOR UPDATE SKIP LOCKED"
}

// readCommitted is the claim's isolation: at REPEATABLE READ the locking
// read would also lock gaps, and business inserts would wait for it.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// ClaimMessages claims up to limit outbox rows due now for claim, leased for
// lease, and returns them in id order (Attempts counts this claim).
func (o *Outbox) ClaimMessages(ctx context.Context, claim string, limit int, lease time.Duration) ([]OutboxMessage, error) {
	var rows []OutboxMessage
	err := o.claim(ctx, "outbox", claim, limit, lease, func(tx *gorm.DB, ids []uint64) error {
		return tx.Where("id IN ?", ids).Order("id").Find(&rows).Error
	})
	return rows, err
}

// ClaimObjects claims up to limit object_outbox rows due now for claim,
// leased for lease, and returns them in id order with their objects.
func (o *Outbox) ClaimObjects(ctx context.Context, claim string, limit int, lease time.Duration) ([]ClaimedObject, error) {
	var rows []ClaimedObject
	err := o.claim(ctx, "object_outbox", claim, limit, lease, func(tx *gorm.DB, ids []uint64) error {
		return tx.Raw(`SELECT o.id, o.attempts, o.object_id, o.priority, o.trace_id, o.headers, s.source_url, s.sha256
			FROM object_outbox o LEFT JOIN stored_object s ON s.id = o.object_id WHERE o.id IN ? ORDER BY o.id`, ids).Scan(&rows).Error
	})
	return rows, err
}

// claim takes up to limit rows of table due now, in a short READ COMMITTED
// transaction: it locks them, skipping rows other relays hold, leases them
// to claim and reads them with load.
func (o *Outbox) claim(ctx context.Context, table, claim string, limit int, lease time.Duration, load func(tx *gorm.DB, ids []uint64) error) error {
	err := o.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var ids []uint64
		if err := tx.Raw(claimSQL(table), limit).Scan(&ids).Error; err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		if err := tx.Exec("UPDATE "+table+" SET claimed_by = ?, attempts = attempts + 1,"+
			" available_at = NOW(6) + INTERVAL ? MICROSECOND WHERE id IN ?", claim, lease.Microseconds(), ids).Error; err != nil {
			return err
		}
		return load(tx, ids)
	}, readCommitted)
	if err != nil {
		return fmt.Errorf("store: claim %s: %w", table, err)
	}
	return nil
}

// MarkPublished marks the rows ids of table published where claim still
// holds them, and returns how many it marked: the others were claimed again
// after claim's lease ended.
func (o *Outbox) MarkPublished(ctx context.Context, table, claim string, ids []uint64) (int, error) {
	if err := outboxTable(table); err != nil {
		return 0, err
	}
	res := o.db.WithContext(ctx).Exec("UPDATE "+table+" SET published_at = NOW(6) WHERE id IN ? AND claimed_by = ?", ids, claim)
	if res.Error != nil {
		return 0, fmt.Errorf("store: mark %d rows of %s published: %w", len(ids), table, res.Error)
	}
	return int(res.RowsAffected), nil
}

// Retry records why row id of table was not published and makes it due
// again after wait, where claim still holds it; false when it does not.
func (o *Outbox) Retry(ctx context.Context, table, claim string, id uint64, why string, wait time.Duration) (bool, error) {
	return o.release(ctx, table, id, claim, "last_error = ?, claimed_by = NULL, available_at = NOW(6) + INTERVAL ? MICROSECOND",
		why, wait.Microseconds())
}

// Park records why row id of table cannot be published as it is and takes
// it out of the claim until it is replayed (UnparkOutbox), where claim
// still holds it; false when it does not.
func (o *Outbox) Park(ctx context.Context, table, claim string, id uint64, why string) (bool, error) {
	return o.release(ctx, table, id, claim, "last_error = ?, claimed_by = NULL, parked_at = NOW(6), available_at = ?",
		why, OutboxParkedUntil)
}

func (o *Outbox) release(ctx context.Context, table string, id uint64, claim, set string, args ...any) (bool, error) {
	if err := outboxTable(table); err != nil {
		return false, err
	}
	res := o.db.WithContext(ctx).Exec("UPDATE "+table+" SET "+set+" WHERE id = ? AND claimed_by = ?", append(args, id, claim)...)
	if res.Error != nil {
		return false, fmt.Errorf("store: record the failure of %s %d: %w", table, id, res.Error)
	}
	return res.RowsAffected > 0, nil
}

// NewTask is the replication task an object_outbox row asks for.
type NewTask struct {
	OutboxID  uint64
	ObjectID  uint64
	SourceURL string
	Priority  uint8
	SHA256    string
	TraceID   string
}

// CreateTasks creates the replication task of each row, or finds the one a
// former claim of the row created (one per row:
// uk_object_replication_task_outbox), and returns the tasks' ids by outbox
// row.
func (o *Outbox) CreateTasks(ctx context.Context, tasks []NewTask) (map[uint64]uint64, error) {
	if len(tasks) == 0 {
		return map[uint64]uint64{}, nil
	}
	var q strings.Builder
	q.WriteString("INSERT INTO object_replication_task (outbox_id, object_id, source_url, priority, sha256, trace_id) VALUES ")
	values := make([]any, 0, 6*len(tasks))
	ids := make([]uint64, len(tasks))
	for i, t := range tasks {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?, ?)")
		values = append(values, t.OutboxID, t.ObjectID, t.SourceURL, t.Priority, t.SHA256, t.TraceID)
		ids[i] = t.OutboxID
	}
	q.WriteString(" ON DUPLICATE KEY UPDATE id = id")
	db := o.db.WithContext(ctx)
	if err := db.Exec(q.String(), values...).Error; err != nil {
		return nil, fmt.Errorf("store: create replication tasks: %w", err)
	}
	var made []struct {
		ID       uint64
		OutboxID uint64
	}
	if err := db.Raw("SELECT id, outbox_id FROM object_replication_task WHERE outbox_id IN ?", ids).Scan(&made).Error; err != nil {
		return nil, fmt.Errorf("store: read replication tasks: %w", err)
	}
	byOutbox := make(map[uint64]uint64, len(made))
	for _, t := range made {
		byOutbox[t.OutboxID] = t.ID
	}
	return byOutbox, nil
}

// OutboxBacklog is what waits in an outbox table: the age of the oldest row
// to publish (parked rows aside; 0 when none) and the rows parked.
type OutboxBacklog struct {
	Oldest time.Duration
	Parked int
}

// Backlog returns what waits in table, by the database's clock.
func (o *Outbox) Backlog(ctx context.Context, table string) (OutboxBacklog, error) {
	if err := outboxTable(table); err != nil {
		return OutboxBacklog{}, err
	}
	var row struct {
		Micros *int64
		Parked int
	}
	err := o.db.WithContext(ctx).Raw("SELECT TIMESTAMPDIFF(MICROSECOND, MIN(CASE WHEN parked_at IS NULL THEN created_at END), NOW(6)) AS micros," +
		" COUNT(parked_at) AS parked FROM " + table + " WHERE published_at IS NULL").Scan(&row).Error
	if err != nil {
		return OutboxBacklog{}, fmt.Errorf("store: backlog of %s: %w", table, err)
	}
	b := OutboxBacklog{Parked: row.Parked}
	if row.Micros != nil {
		b.Oldest = time.Duration(max(0, *row.Micros)) * time.Microsecond
	}
	return b, nil
}

// outboxTable refuses a name not in OutboxTables: table names are written
// into the statements.
func outboxTable(table string) error {
	if !slices.Contains(OutboxTables, table) {
		return fmt.Errorf("store: %q is not an outbox table (%v)", table, OutboxTables)
	}
	return nil
}

// Pending says whether table holds a row not published yet (parked rows
// included). It reads one entry of the claim index.
func (o *Outbox) Pending(ctx context.Context, table string) (bool, error) {
	if err := outboxTable(table); err != nil {
		return false, err
	}
	var left bool
	if err := o.db.WithContext(ctx).Raw("SELECT EXISTS (SELECT 1 FROM " + table + " WHERE published_at IS NULL)").Scan(&left).Error; err != nil {
		return false, fmt.Errorf("store: rows left in %s: %w", table, err)
	}
	return left, nil
}

// PublishSpan is how the rows of the message outbox were published, by
// the database's clock: from the first mark to the last, the rows the
// first mark published (a mark sets one time for its whole batch) and the
// rows in all.
type PublishSpan struct {
	Span  time.Duration
	First int64
	Rows  int64
}

// PublishedSpan measures the message outbox's publishes (PublishSpan).
func (o *Outbox) PublishedSpan(ctx context.Context) (PublishSpan, error) {
	var row struct {
		Micros *int64 `gorm:"column:micros"`
		First  *int64 `gorm:"column:first"`
		Rows   int64  `gorm:"column:n"`
	}
	err := o.db.WithContext(ctx).Raw(`SELECT TIMESTAMPDIFF(MICROSECOND, MIN(published_at), MAX(published_at)) AS micros,
		SUM(published_at = (SELECT MIN(published_at) FROM outbox)) AS first, COUNT(*) AS n FROM outbox`).Scan(&row).Error
	if err != nil {
		return PublishSpan{}, fmt.Errorf("store: publish span of outbox: %w", err)
	}
	s := PublishSpan{Rows: row.Rows}
	if row.Micros != nil {
		s.Span = time.Duration(*row.Micros) * time.Microsecond
	}
	if row.First != nil {
		s.First = *row.First
	}
	return s, nil
}
