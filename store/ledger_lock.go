package store

import (
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The ledger transaction's locking reads: what it reads it holds until it
// commits, so concurrent writers of one user or one key wait their turn.

// lockBalances reads and locks the accounts, in username order (the same
// order in every transaction keeps deadlocks rare).
func lockBalances(tx *gorm.DB, usernames []string) (map[string]account, error) {
	var accounts []UserAccount
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Select("username", "balance_fen", "ledger_seq", "hot_entries").
		Where("username IN ?", usernames).Order("username").Find(&accounts).Error
	if err != nil {
		return nil, err
	}
	out := make(map[string]account, len(accounts))
	for _, a := range accounts {
		out[a.Username] = account{Balance: a.BalanceFen, Seq: a.LedgerSeq, HotEntries: a.HotEntries}
	}
	return out, nil
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
// its own key, the user's oldest DEDUCT row whose id begins with SameBody,
// by index of the debit. The range read of the unique key also holds its
// gap: a message with the body cannot be applied under us.
func lockSameBody(tx *gorm.DB, debits []Debit, existing map[[2]string]LedgerEntry) (map[int]LedgerEntry, error) {
	out := map[int]LedgerEntry{}
	for i, d := range debits {
		if _, found := existing[[2]string{d.Username, d.ID}]; found || d.SameBody == "" {
			continue
		}
		var rows []LedgerEntry
		err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).
			Where("username = ? AND kind = ? AND entry_id LIKE ?", d.Username, LedgerDeduct, likePrefix(d.SameBody)).
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

// likePrefix is the LIKE pattern of the strings that begin with p.
func likePrefix(p string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p) + "%"
}

// lockEntryKeys reads and locks the ledger rows of keys that exist; the
// locking read of the unique key also holds the gaps of keys not there yet,
// so a concurrent transaction cannot insert them under us.
func lockEntryKeys(tx *gorm.DB, keys []EntryKey) ([]LedgerEntry, error) {
	where, args := entryKeysIn(keys)
	var rows []LedgerEntry
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where(where, args...).Find(&rows).Error
	return rows, err
}
