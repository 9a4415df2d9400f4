package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/eisland/isle/internal/kit/sqltx"
	"gorm.io/gorm"
)

// DeadLetters are the stored dead messages: one table per domain (the
// topology names it), each message kept whole however large.
type DeadLetters struct{ db *gorm.DB }

// NewDeadLetters returns the dead messages of db.
func NewDeadLetters(db *gorm.DB) *DeadLetters { return &DeadLetters{db: db} }

// ErrNotFound is returned when a row does not exist.
var ErrNotFound = errors.New("store: not found")

// DeadLetterKey is the dedup key of a dead message: the same delivery stored
// twice (a redelivery of the DLQ message) is one row, while the same message
// dead again after a replay (another replay count) is a new one.
func DeadLetterKey(queue, messageID string, replay int, body []byte) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(queue), []byte(messageID), []byte(strconv.Itoa(replay)), body} {
		h.Write([]byte(strconv.Itoa(len(part))))
		h.Write([]byte{':'})
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// dlqTableName is what a table of dead messages is called: the topology
// names them (its "*_dlq_log" tables and object_replication_log). The name
// goes into SQL as an identifier, so nothing else passes.
var dlqTableName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,58}_log$`)

func checkDLQTable(table string) error {
	if !dlqTableName.MatchString(table) {
		return fmt.Errorf("store: %q is not a dead-letter table", table)
	}
	return nil
}

// errStoredBefore ends the transaction of a dead message stored before.
var errStoredBefore = errors.New("stored before")

// Save stores a dead message whole and reports whether a row was
// inserted (false: the same delivery, by DedupKey, was stored before; the
// unique key decides, so two consumers storing it at once make one row).
// Any other failure is an error: ErrUnstorable when the database would not
// keep the message whole (nothing is stored then), whatever its sql_mode.
// dl.ID is set on insert. The text columns that only describe the message
// are made to fit (see layout); the body and headers are kept byte for byte.
func (ds *DeadLetters) Save(ctx context.Context, table string, dl *DeadLetter) (bool, error) {
	db := ds.db
	if err := checkDLQTable(table); err != nil {
		return false, err
	}
	if dl.DedupKey == "" || dl.Queue == "" || len(dl.Queue) > varcharBytes || !utf8.ValidString(dl.Queue) {
		return false, errors.New("store: dead letter needs a dedup key and a queue name")
	}
	row, parts := layout(dl)
	err := sqltx.Transact(ctx, db, func(tx *gorm.DB) error {
		if err := tx.Table(table).Omit("id", "created_at").Create(&row).Error; err != nil {
			if sqltx.IsDuplicate(err) {
				return errStoredBefore
			}
			return err
		}
		if err := writeParts(tx, table, row.ID, parts); err != nil {
			return err
		}
		return verifySaved(tx, table, &row)
	})
	switch {
	case errors.Is(err, errStoredBefore):
		return false, nil
	case err != nil && unstorable(err):
		return false, fmt.Errorf("store: save dead message %s (%d body bytes) in %s: %w: %w", dl.MessageID, len(dl.Body), table, ErrUnstorable, err)
	case err != nil:
		return false, fmt.Errorf("store: save dead message %s in %s: %w", dl.MessageID, table, err)
	}
	dl.ID = row.ID
	return true, nil
}

// DeadLetterFilter selects dead messages.
type DeadLetterFilter struct {
	Queues        []string  // only these queues; empty = all
	Since         time.Time // dead at or after; zero = any time
	NotReplayed   bool
	Replayed      bool     // only rows replayed before (NotReplayed's opposite)
	MessageID     string   // only this message's rows (its deaths, one per replay)
	Subject       string   // only rows of this subject (the body's key field, as the DLQ consumer read it)
	IDs           []uint64 // only these rows; empty = any
	ErrorContains string   // last_error contains this text
	AfterID       uint64   // for paging: rows with a larger id
	Limit         int      // default 100
	NewestFirst   bool
	SizesOnly     bool // leave Body and Headers out (BodyBytes and HeadersBytes give their sizes)
	// ByDeadAt orders by dead_at and id, newest first, rather than by id,
	// and pages with Before rather than AfterID.
	ByDeadAt bool
	Before   DeadLetterCursor // with ByDeadAt: only rows before it; zero = from the newest
}

// DeadLetterCursor is a place in the order of dead_at and id: the rows
// before it died earlier, or at At with a smaller id.
type DeadLetterCursor struct {
	At time.Time
	ID uint64
}

// where adds f's conditions to q.
func (f DeadLetterFilter) where(q *gorm.DB) *gorm.DB {
	if len(f.Queues) > 0 {
		q = q.Where("queue IN ?", f.Queues)
	}
	if !f.Since.IsZero() {
		q = q.Where("dead_at >= ?", f.Since.UTC())
	}
	switch {
	case f.NotReplayed:
		q = q.Where("replayed_at IS NULL")
	case f.Replayed:
		q = q.Where("replayed_at IS NOT NULL")
	}
	if f.MessageID != "" {
		q = q.Where("message_id = ?", f.MessageID)
	}
	if f.Subject != "" {
		q = q.Where("subject = ?", f.Subject)
	}
	if len(f.IDs) > 0 {
		q = q.Where("id IN ?", f.IDs)
	}
	if f.ErrorContains != "" {
		q = q.Where(`last_error LIKE ? ESCAPE '!'`, "%"+likeEscaper.Replace(f.ErrorContains)+"%")
	}
	if f.ByDeadAt && !f.Before.At.IsZero() {
		at := f.Before.At.UTC()
		q = q.Where("(dead_at < ? OR (dead_at = ? AND id < ?))", at, at, f.Before.ID)
	} else if !f.ByDeadAt && f.AfterID > 0 {
		q = q.Where("id > ?", f.AfterID)
	}
	return q
}

// likeEscaper makes a text match itself in a LIKE pattern escaped by '!'.
var likeEscaper = strings.NewReplacer("!", "!!", "%", "!%", "_", "!_")

// List lists the rows of table that match f, each whole as
// DeadLetters.Get reads it, or without body and headers with f.SizesOnly (a
// listing of large messages then holds none of them in memory).
func (ds *DeadLetters) List(ctx context.Context, table string, f DeadLetterFilter) ([]DeadLetter, error) {
	db := ds.db
	if err := checkDLQTable(table); err != nil {
		return nil, err
	}
	q := f.where(db.WithContext(ctx).Table(table))
	order := "id"
	switch {
	case f.ByDeadAt:
		order = "dead_at DESC, id DESC"
	case f.NewestFirst:
		order = "id DESC"
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	if f.SizesOnly {
		q = q.Omit("body", "headers")
	}
	var rows []DeadLetter
	if err := q.Order(order).Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: list %s: %w", table, err)
	}
	if f.SizesOnly {
		return rows, nil
	}
	for i := range rows {
		if err := assemble(ctx, db, table, &rows[i]); err != nil {
			return nil, fmt.Errorf("store: %s row %d: %w", table, rows[i].ID, err)
		}
	}
	return rows, nil
}

// Count counts the rows of table that match f (its Limit, order and paging
// aside).
func (ds *DeadLetters) Count(ctx context.Context, table string, f DeadLetterFilter) (int64, error) {
	if err := checkDLQTable(table); err != nil {
		return 0, err
	}
	f.Before, f.AfterID = DeadLetterCursor{}, 0
	var n int64
	if err := f.where(ds.db.WithContext(ctx).Table(table)).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("store: count %s: %w", table, err)
	}
	return n, nil
}

// Get returns one row of table, whole: a body or headers kept in
// pieces is put together, and a row missing some of its bytes is
// ErrIncomplete.
func (ds *DeadLetters) Get(ctx context.Context, table string, id uint64) (DeadLetter, error) {
	db := ds.db
	if err := checkDLQTable(table); err != nil {
		return DeadLetter{}, err
	}
	var dl DeadLetter
	err := db.WithContext(ctx).Table(table).Where("id = ?", id).Take(&dl).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return DeadLetter{}, fmt.Errorf("store: %s row %d: %w", table, id, ErrNotFound)
	}
	if err == nil {
		err = assemble(ctx, db, table, &dl)
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("store: %s row %d: %w", table, id, err)
	}
	return dl, nil
}

// ClaimReplay marks a row replayed (replayed_at now, replay_count + 1) if it
// was not replayed before, or always with force, and reports whether it did.
// Two operators replaying one row at once: exactly one claims it.
func (ds *DeadLetters) ClaimReplay(ctx context.Context, table string, id uint64, force bool) (bool, error) {
	db := ds.db
	if err := checkDLQTable(table); err != nil {
		return false, err
	}
	q := db.WithContext(ctx).Table(table).Where("id = ?", id)
	if !force {
		q = q.Where("replayed_at IS NULL")
	}
	res := q.Updates(map[string]any{"replayed_at": time.Now().UTC(), "replay_count": gorm.Expr("replay_count + 1")})
	if res.Error != nil {
		return false, fmt.Errorf("store: claim replay of %s row %d: %w", table, id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// UnclaimReplay undoes ClaimReplay after the republish failed.
func (ds *DeadLetters) UnclaimReplay(ctx context.Context, table string, id uint64, previous *time.Time) error {
	db := ds.db
	if err := checkDLQTable(table); err != nil {
		return err
	}
	err := db.WithContext(ctx).Table(table).Where("id = ?", id).
		Updates(map[string]any{"replayed_at": previous, "replay_count": gorm.Expr("GREATEST(replay_count - 1, 0)")}).Error
	if err != nil {
		return fmt.Errorf("store: unclaim replay of %s row %d: %w", table, id, err)
	}
	return nil
}
