package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/eisland/isle/internal/kit/sqltx"
	"github.com/eisland/isle/store/keys"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"
)

// ErrChanged is returned by Adjust when the account moved since it was read.
var ErrChanged = errors.New("store: account changed since it was read")

// Credit is money added to a balance: a recharge.
type Credit struct {
	Username string
	ID       string          // e.g. the recharge's order number: (user, RECHARGE, id) applies once
	Amount   decimal.Decimal // > 0
	Reason   string
	Source   string
}

// CreditResult says what CreditBalance did.
type CreditResult struct {
	Applied bool   // this call wrote the ledger row; false: it was there already
	Seq     uint64 // the row's per-user sequence
	Settled bool   // the Redis side was done before this call
	Settle  string // what settle.lua did with the Redis balance now ("" when nothing was left to do)
}

// Credit writes a RECHARGE ledger row and adds to user_account in one
// transaction, once per id, then credits the Redis balance at most once
// (settle.lua; a missing balance takes it at its initialisation). It is
// idempotent: calling it again, also after a crash between the two steps,
// finishes the work without crediting twice.
func (b *Balances) Credit(ctx context.Context, c Credit) (CreditResult, error) {
	if err := c.check(); err != nil {
		return CreditResult{}, err
	}
	var row LedgerEntry // the recharge's ledger row, written now or before
	var applied bool
	err := sqltx.Transact(ctx, b.db, func(tx *gorm.DB) error {
		var err error
		row, applied, err = creditTx(tx, c)
		return err
	})
	if err != nil {
		return CreditResult{}, fmt.Errorf("store: credit %s to %s: %w", c.ID, c.Username, err)
	}
	res := CreditResult{Applied: applied, Seq: row.Seq, Settled: row.SettledAt != nil}
	if res.Settled {
		return res, nil
	}
	res.Settle, err = b.SettleCredit(ctx, row)
	return res, err
}

func (c Credit) check() error {
	if c.Username == "" || c.ID == "" || !c.Amount.IsPositive() || c.Amount.Exponent() < -MoneyScale {
		return fmt.Errorf("store: credit %q of %s to %q: want a user, an id and an amount > 0 with at most 8 decimals", c.ID, c.Amount, c.Username)
	}
	return nil
}

// creditTx is Credit's MySQL side inside tx: the RECHARGE row of c and the
// balance it adds to, unless the row is there already. It returns the row,
// written now (applied) or before. The caller settles it into the Redis
// balance after the commit (SettleCredit).
func creditTx(tx *gorm.DB, c Credit) (row LedgerEntry, applied bool, err error) {
	if err := c.check(); err != nil {
		return LedgerEntry{}, false, err
	}
	accounts, err := lockBalances(tx, []string{c.Username})
	if err != nil {
		return LedgerEntry{}, false, err
	}
	acct, ok := accounts[c.Username]
	if !ok {
		return LedgerEntry{}, false, fmt.Errorf("%w: %s", ErrUnknownUser, c.Username)
	}
	existing, err := lockEntryKeys(tx, []EntryKey{{Username: c.Username, Kind: LedgerRecharge, EntryID: c.ID}})
	if err != nil {
		return LedgerEntry{}, false, err
	}
	if len(existing) == 1 {
		return existing[0], false, nil
	}
	acct.Balance, acct.Seq, acct.HotEntries = acct.Balance.Add(c.Amount), acct.Seq+1, acct.HotEntries+1
	row = LedgerEntry{Username: c.Username, Kind: LedgerRecharge, EntryID: c.ID, Seq: acct.Seq, AmountFen: c.Amount,
		Source: c.Source, OccurredAt: time.Now().UTC()}
	if c.Reason != "" {
		row.Reason = &c.Reason
	}
	if err := tx.Omit("id", "created_at").Create(&row).Error; err != nil {
		if sqltx.IsDuplicate(err) {
			err = fmt.Errorf("%w: credit %q of %q: %v", ErrKeyMismatch, c.ID, c.Username, err)
		}
		return LedgerEntry{}, false, err
	}
	return row, true, setBalances(tx, map[string]account{c.Username: acct}, map[string]bool{c.Username: true})
}

// SettleCredit reflects a committed RECHARGE row in the Redis balance, at
// most once (settle.lua keeps a marker per entry), and marks the row
// settled. It returns what settle.lua did. On an error the row stays
// unsettled: calling again, or balance-sync, finishes it.
func (b *Balances) SettleCredit(ctx context.Context, row LedgerEntry) (string, error) {
	// What MySQL holds is settled, not what a caller asked for: a retry
	// that names another amount must not credit Redis with it.
	entry, ok := SettleEntryOf(row)
	if !ok || row.Kind != LedgerRecharge {
		return "", fmt.Errorf("store: settle credit: ledger row %s/%s/%s is not a recharge", row.Username, row.Kind, row.EntryID)
	}
	out, err := b.Settle(ctx, entry)
	if err != nil {
		return "", fmt.Errorf("store: credit %s to %s is in MySQL; its Redis side is not (call again, or balance-sync will): %w", row.EntryID, row.Username, err)
	}
	if out[0].Err != nil {
		return "", fmt.Errorf("store: credit %s to %s is in MySQL; its Redis side is not (balance-sync reports the user): %w", row.EntryID, row.Username, out[0].Err)
	}
	return out[0].Outcome, NewLedger(b.db).MarkSettled(ctx, row.Key())
}

// Adjust writes an ADJUST ledger row of delta (either sign) with its
// reason, and moves the MySQL balance by it, if the account is still as it
// was read (balance and sequence); otherwise it returns ErrChanged and
// writes nothing. The reconciler uses it to bring MySQL to a quiet Redis
// balance (doc/money.md, "balance-sync"): every correction is a ledger row.
func (l *Ledger) Adjust(ctx context.Context, username, id string, delta, readBalance decimal.Decimal, readSeq uint64, reason string) (uint64, error) {
	db := l.db
	var seq uint64
	err := sqltx.Transact(ctx, db, func(tx *gorm.DB) error {
		accounts, err := lockBalances(tx, []string{username})
		if err != nil {
			return err
		}
		acct, ok := accounts[username]
		switch {
		case !ok:
			return fmt.Errorf("%w: %s", ErrUnknownUser, username)
		case acct.Seq != readSeq || !acct.Balance.Equal(readBalance):
			return ErrChanged
		case acct.Balance.Add(delta).IsNegative():
			return fmt.Errorf("store: adjust %s by %s: the balance would go below zero", username, delta)
		}
		acct.Balance, acct.Seq = acct.Balance.Add(delta), acct.Seq+1
		seq = acct.Seq
		now := time.Now().UTC()
		row := LedgerEntry{Username: username, Kind: LedgerAdjust, EntryID: id, Seq: seq, AmountFen: delta,
			Reason: &reason, Source: "reconciler", OccurredAt: now, SettledAt: &now} // it moves MySQL to Redis
		if err := tx.Omit("id", "created_at").Create(&row).Error; err != nil {
			return err
		}
		return setBalances(tx, map[string]account{username: acct}, map[string]bool{username: true})
	})
	if err != nil {
		return 0, fmt.Errorf("store: adjust %s: %w", username, err)
	}
	return seq, nil
}

// Restored idempotency markers at initialisation: the deductions of the
// markers' lifetime, at most RestoreMax of them (the newest).
const (
	RestoreWindow = keys.DeductionMarkerTTL
	RestoreMax    = 5000
)

// Ensure initialises a user's missing hot balance from MySQL: the
// balance and the ledger sequence are read together, so the Redis side knows
// which entries the read included, and the idempotency markers of the last
// week's deductions are restored, so a client retrying one after a Redis loss
// is not charged twice. It returns ErrUnknownUser for a user without an
// account, and whether it initialised the balance.
func (b *Balances) Ensure(ctx context.Context, username string) (bool, error) {
	db := b.db
	var u UserAccount
	var recent []LedgerEntry
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Select("balance_fen", "ledger_seq", "hot_entries").Where("username = ?", username).Take(&u).Error; err != nil {
			return err
		}
		return tx.Select("entry_id", "pending_ref", "request_hash", "amount_fen", "shortfall_fen").
			Where("username = ? AND kind = ? AND created_at > ?", username, LedgerDeduct, time.Now().Add(-RestoreWindow).UTC()).
			Order("created_at DESC").Limit(RestoreMax).Find(&recent).Error // the newest, read backwards in (username, created_at)
	}, &sql.TxOptions{ReadOnly: true})
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return false, fmt.Errorf("%w: %s", ErrUnknownUser, username)
	}
	if err != nil {
		return false, fmt.Errorf("store: read balance of %s: %w", username, err)
	}
	markers := make([]RecentDeduction, len(recent))
	for i, e := range recent {
		markers[i] = RecentDeduction{ID: e.EntryID, Amount: e.Deducted(), Ref: deref(e.PendingRef), RequestHash: deref(e.RequestHash)}
	}
	return b.Init(ctx, username, BalanceRead{Balance: u.BalanceFen, Seq: u.LedgerSeq, HotEntries: u.HotEntries}, markers...)
}

// SettleCredits settles the user's RECHARGE rows whose Redis side is not
// done (SettleCredit each): a recharge committed by the payment consumer
// just before its settle, or left by one that died in between. It returns
// how many were applied to the hot balance now. The rows are found by the
// ledger's unique key (username, kind, …), so the query is cheap.
func (b *Balances) SettleCredits(ctx context.Context, username string) (int, error) {
	var rows []LedgerEntry
	err := b.db.WithContext(ctx).Where("username = ? AND kind = ? AND settled_at IS NULL", username, LedgerRecharge).
		Order("seq").Limit(100).Find(&rows).Error
	if err != nil {
		return 0, fmt.Errorf("store: unsettled recharges of %s: %w", username, err)
	}
	applied := 0
	for _, row := range rows {
		out, err := b.SettleCredit(ctx, row)
		if err != nil {
			return applied, err
		}
		if out == SettleApplied {
			applied++
		}
	}
	return applied, nil
}
