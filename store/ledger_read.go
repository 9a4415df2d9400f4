package store

import (
	"context"
	"fmt"
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
