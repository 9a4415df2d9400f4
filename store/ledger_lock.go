package store

import (
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The ledger transaction's locking reads: what it reads it holds until it
// commits, so concurrent writers of one user or one key wait their turn.

// lockBalances reads and locks the accounts, in username order (the same
// order in every transaction keeps deadlocks rare).
func lockBalances(tx *gorm.DB, usernames []string) (map[string]account, error) {
	out := make(map[string]account, len(usernames))
	if len(usernames) == 0 {
		return out, nil
	}
	q, args := inStrings("SELECT username, balance_fen, ledger_seq, hot_entries FROM user_account WHERE username IN ", usernames,
		" ORDER BY username FOR UPDATE")
	rows, err := querySQL(tx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var u string
		var a account
		if err := rows.Scan(&u, &a.Balance, &a.Seq, &a.HotEntries); err != nil {
			return nil, err
		}
		out[u] = a
	}
	return out, rows.Err()
}

// lockEntries reads and locks the ledger rows of kind for the debits' keys.
func lockEntries(tx *gorm.DB, kind string, debits []Debit) (map[[2]string]LedgerEntry, error) {
	keys := make([]EntryKey, len(debits))
	for i, d := range debits {
		keys[i] = EntryKey{Username: d.Username, Kind: kind, EntryID: d.ID}
	}
	rows, err := lockEntryKeys(tx, keys)
	if err != nil {
		return nil, err
	}
	out := make(map[[2]string]LedgerEntry, len(rows))
	for _, r := range rows {
		out[[2]string{r.Username, r.EntryID}] = r
	}
	return out, nil
}

// lockSameBody reads and locks, for each debit with SameBody and no row of
// its own key, the user's oldest DEDUCT row whose id begins with SameBody
// and that was written within RedeliveryHorizon, by index of the debit. The
// range read of the unique key also holds its gap: a message with the body
// cannot be applied under us.
func lockSameBody(tx *gorm.DB, debits []Debit, existing map[[2]string]LedgerEntry) (map[int]LedgerEntry, error) {
	out := map[int]LedgerEntry{}
	since := time.Now().Add(-RedeliveryHorizon)
	for i, d := range debits {
		if _, found := existing[[2]string{d.Username, d.ID}]; found || d.SameBody == "" {
			continue
		}
		var rows []LedgerEntry
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).
			Where("username = ? AND kind = ? AND entry_id LIKE ? AND created_at >= ?", d.Username, LedgerDeduct, likePrefix(d.SameBody), since).
			Order("entry_id").Limit(1).Find(&rows).Error
		if err != nil {
			return nil, err
		}
		if len(rows) == 1 {
			out[i] = rows[0]
		}
	}
	return out, nil
}

// RedeliveryHorizon bounds how long ago a row may have been written to be
// the first delivery of a message without an id that the broker delivers
// again (Debit.SameBody, Usage.SameBody): rows of its body older than that
// are other messages with an equal body. The broker gives a delivery out
// again once its channel is gone: at the latest when RabbitMQ's
// consumer_timeout (30 minutes by default) closes the channel of a
// delivery held unacked, and a handler is stopped long before that (the
// worker's handler timeout, 5 minutes); the rest of the hour covers a
// fleet that had no consumer of the queue for a while (doc/money.md,
// "Messages without ids").
const RedeliveryHorizon = time.Hour

// likePrefix is the LIKE pattern of the strings that begin with p.
func likePrefix(p string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p) + "%"
}

// lockEntryKeys reads and locks the ledger rows of keys that exist; the
// locking read of the unique key also holds the gaps of keys not there yet,
// so a concurrent transaction cannot insert them under us.
func lockEntryKeys(tx *gorm.DB, keys []EntryKey) ([]LedgerEntry, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	where, args := entryKeysIn(keys)
	rows, err := querySQL(tx, "SELECT "+ledgerColumns+" FROM agent_ledger WHERE "+where+" FOR UPDATE", args...)
	if err != nil {
		return nil, err
	}
	return scanLedgerEntries(rows)
}
