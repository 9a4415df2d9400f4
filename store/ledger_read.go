package store

import (
	"context"
	"fmt"

	"github.com/shopspring/decimal"
)

// Recent returns a user's newest ledger entries, at most limit, newest
// first (on the (username, created_at) index).
func (l *Ledger) Recent(ctx context.Context, username string, limit int) ([]LedgerEntry, error) {
	var rows []LedgerEntry
	err := l.db.WithContext(ctx).Where("username = ?", username).Order("created_at DESC, id DESC").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: ledger of %s: %w", username, err)
	}
	return rows, nil
}

// LastID is the newest ledger row's id, 0 when there is none: rows written
// later have larger ids.
func (l *Ledger) LastID(ctx context.Context) (uint64, error) {
	var id uint64
	if err := l.db.WithContext(ctx).Raw("SELECT COALESCE(MAX(id), 0) FROM agent_ledger").Scan(&id).Error; err != nil {
		return 0, fmt.Errorf("store: last ledger id: %w", err)
	}
	return id, nil
}

// CountEntries counts the ledger rows of kind after the row afterID whose
// entry id begins with prefix.
func (l *Ledger) CountEntries(ctx context.Context, kind, prefix string, afterID uint64) (int64, error) {
	var n int64
	err := l.db.WithContext(ctx).Raw("SELECT COUNT(*) FROM agent_ledger WHERE id > ? AND kind = ? AND entry_id LIKE ?",
		afterID, kind, likePrefix(prefix)).Scan(&n).Error
	if err != nil {
		return 0, fmt.Errorf("store: ledger rows %s %s*: %w", kind, prefix, err)
	}
	return n, nil
}

// LedgerTotal is how many ledger rows there are and what they add up to.
type LedgerTotal struct {
	Rows int
	Fen  decimal.Decimal
}

// TotalOf adds up the ledger rows of kind whose entry ids are entryIDs.
func (l *Ledger) TotalOf(ctx context.Context, kind string, entryIDs []string) (LedgerTotal, error) {
	var t LedgerTotal
	err := l.db.WithContext(ctx).Raw("SELECT COUNT(*) AS `rows`, COALESCE(SUM(amount_fen), 0) AS fen FROM agent_ledger WHERE kind = ? AND entry_id IN ?",
		kind, entryIDs).Scan(&t).Error
	if err != nil {
		return t, fmt.Errorf("store: ledger total of %d %s entries: %w", len(entryIDs), kind, err)
	}
	return t, nil
}

// LedgerMove is what a user's ledger rows of one kind add up to.
type LedgerMove struct {
	Username string
	Kind     string
	Fen      decimal.Decimal
}

// MovedSince adds up, by user and kind, the ledger rows after the row
// afterID of the users named.
func (l *Ledger) MovedSince(ctx context.Context, afterID uint64, usernames []string) ([]LedgerMove, error) {
	var moved []LedgerMove
	err := l.db.WithContext(ctx).Raw(`SELECT username, kind, SUM(amount_fen) AS fen FROM agent_ledger
		WHERE id > ? AND username IN ? GROUP BY username, kind`, afterID, usernames).Scan(&moved).Error
	if err != nil {
		return nil, fmt.Errorf("store: ledger of %d users since row %d: %w", len(usernames), afterID, err)
	}
	return moved, nil
}
