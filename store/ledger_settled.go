package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/sqltx"
	"gorm.io/gorm"
)

// Whether the Redis balance reflects a ledger entry is kept in MySQL
// (agent_ledger.settled_at): the marks, and the entries still to settle.

// EntryKey names one ledger entry.
type EntryKey struct {
	Username string
	Kind     string
	EntryID  string
}

// MarkSettled records that the Redis balance reflects the entries. Its
// UPDATE locks rows that the ledger's transactions lock too, so it may be
// a deadlock's victim: it then runs again (sqltx.Retry), as they do.
func (l *Ledger) MarkSettled(ctx context.Context, entries ...EntryKey) error {
	db := l.db.WithContext(ctx)
	if err := sqltx.Retry(ctx, func() error { return markSettled(db, entries) }); err != nil {
		return fmt.Errorf("store: mark %d ledger entries settled: %w", len(entries), err)
	}
	return nil
}

func markSettled(tx *gorm.DB, entries []EntryKey) error {
	if len(entries) == 0 {
		return nil
	}
	// The condition names the entries' unique key only: "settled_at IS NULL"
	// there would let the optimiser range over the unsettled index and lock
	// every unsettled row, new ones included.
	where, args := entryKeysIn(entries)
	_, err := execSQL(tx, "UPDATE agent_ledger SET settled_at = COALESCE(settled_at, ?) WHERE "+where, append([]any{time.Now().UTC()}, args...)...)
	return err
}

// entryKeysIn is the condition "the row's (username, kind, entry_id) is one
// of keys", written as equalities joined by OR. MariaDB 10.11 plans the
// row-constructor form "(username, kind, entry_id) IN ((?, ?, ?))" in an
// UPDATE as a scan of the whole table (measured: 40,200 rows examined to
// mark one), while the equalities are looked up in the unique key.
func entryKeysIn(keys []EntryKey) (string, []any) {
	var b strings.Builder
	args := make([]any, 0, 3*len(keys))
	b.WriteByte('(')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(" OR ")
		}
		b.WriteString("(username = ? AND kind = ? AND entry_id = ?)")
		args = append(args, k.Username, k.Kind, k.EntryID)
	}
	b.WriteByte(')')
	return b.String(), args
}

// Key is the entry's unique key.
func (e LedgerEntry) Key() EntryKey {
	return EntryKey{Username: e.Username, Kind: e.Kind, EntryID: e.EntryID}
}

// Key is the ledger key of the entry to settle.
func (e SettleEntry) Key() EntryKey {
	kind := LedgerDeduct
	if e.Kind == SettleCredit {
		kind = LedgerRecharge
	}
	return EntryKey{Username: e.Username, Kind: kind, EntryID: e.EntryID}
}

// Unsettled lists up to limit ledger entries whose Redis side is not done,
// written before cutoff (a crash or a Redis error left them), with ids above
// after, in id order: a caller pages on with the last id it got.
func (l *Ledger) Unsettled(ctx context.Context, cutoff time.Time, after uint64, limit int) ([]LedgerEntry, error) {
	db := l.db
	var rows []LedgerEntry
	err := db.WithContext(ctx).Where("settled_at IS NULL AND created_at < ? AND id > ?", cutoff.UTC(), after).Order("id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: unsettled ledger entries: %w", err)
	}
	return rows, nil
}

// SettleEntryOf is the Settle input of a ledger row.
func SettleEntryOf(e LedgerEntry) (SettleEntry, bool) {
	switch e.Kind {
	case LedgerDeduct:
		return SettleEntry{Username: e.Username, Kind: SettleDeduction, EntryID: e.EntryID, Amount: e.AmountFen.Neg(), Seq: e.Seq,
			Deducted: e.Deducted(), Ref: deref(e.PendingRef), RequestHash: deref(e.RequestHash)}, true
	case LedgerRecharge:
		return SettleEntry{Username: e.Username, Kind: SettleCredit, EntryID: e.EntryID, Amount: e.AmountFen, Seq: e.Seq}, true
	}
	return SettleEntry{}, false
}
