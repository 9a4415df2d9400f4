package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/sqltx"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"
)

// Ledger is the money's record in MySQL (doc/money.md): the append-only
// agent_ledger and the balance of user_account, changed only together.
type Ledger struct{ db *gorm.DB }

// NewLedger returns the ledger of db.
func NewLedger(db *gorm.DB) *Ledger { return &Ledger{db: db} }

// ErrUnknownUser is a debit or credit for a user without an account.
var ErrUnknownUser = errors.New("store: no such user")

// Debit is a deduction taken from a hot balance, to apply to MySQL once.
type Debit struct {
	Username     string
	ID           string          // deduction id: (user, DEDUCT, id) is the ledger's idempotency key
	Amount       decimal.Decimal // what the hot balance gave, > 0
	ModelName    string
	InputTokens  int64
	OutputTokens int64
	OccurredAt   time.Time
	Source       string // consumer, reconciler, ...
	// SelfSettled marks a deduction whose producer keeps its Redis balance
	// itself (no pending record here): the row is settled when written.
	SelfSettled bool
	Ref         string // the nonce of the hot-balance charge (DeductRequest.Ref); "" unknown
	RequestHash string // the request body's hash; "" unknown
	// SameBody is set for a message without an id that the broker
	// delivered again: the prefix of the ids of every message with its
	// body. A row of one stands for this message's first delivery, applied
	// before (doc/money.md, "Messages without ids"): the debit is applied
	// only if the user's ledger has none.
	SameBody string
}

// DebitResult says what ApplyDebits did with one debit.
type DebitResult struct {
	Applied   bool            // this call wrote the ledger row; false: it was there already
	Seq       uint64          // the row's per-user sequence
	Settled   bool            // the row's Redis side is done (settled_at is set)
	Amount    decimal.Decimal // taken from MySQL (positive): Debit.Amount minus the shortfall
	Shortfall decimal.Decimal // what the MySQL balance could not cover (money forgiven after a Redis loss)
	Err       error           // a debit that can never apply (ErrUnknownUser); the others went on
	// The row's ref and request hash: the debit's when Applied, else what
	// the row written before holds.
	Ref, RequestHash string
}

// ErrKeyMismatch is an insert that failed on its unique key although the
// locking read of the key found no row: MySQL compares the key otherwise
// than Go does (a collation that pads or folds, a value it cannot keep byte
// for byte). Retrying cannot help; the entry is refused on its own.
var ErrKeyMismatch = errors.New("store: the key's insert met a row its lookup did not find")

// ApplyDebits applies debits to MySQL in one transaction: one ledger row
// per deduction id and the balances decremented by the same amounts. A
// debit whose row exists changes nothing (exactly once, whoever applies it:
// consumer, replay or reconciler). A balance never goes below zero: what it
// cannot cover is recorded as the row's shortfall. Deadlocks re-run the
// whole transaction. When the transaction fails on a duplicate key, each
// debit is applied in a transaction of its own, and one whose own insert
// still fails so gets ErrKeyMismatch as its result's Err: the others are
// not held back by it, batch after batch.
func (l *Ledger) ApplyDebits(ctx context.Context, debits []Debit) ([]DebitResult, error) {
	results, err := l.applyDebits(ctx, debits)
	switch {
	case err == nil:
		return results, nil
	case !sqltx.IsDuplicate(err):
		return nil, fmt.Errorf("store: apply %d debits: %w", len(debits), err)
	}
	results = make([]DebitResult, len(debits))
	for i, d := range debits {
		one, err := l.applyDebits(ctx, []Debit{d})
		switch {
		case err == nil:
			results[i] = one[0]
		case sqltx.IsDuplicate(err):
			results[i].Err = fmt.Errorf("%w: debit %q of %q: %v", ErrKeyMismatch, d.ID, d.Username, err)
		default:
			return nil, fmt.Errorf("store: apply %d debits: %w", len(debits), err)
		}
	}
	return results, nil
}

func (l *Ledger) applyDebits(ctx context.Context, debits []Debit) ([]DebitResult, error) {
	return l.applyDebitsMarking(ctx, debits, nil)
}

// applyDebitsMarking applies debits as ApplyDebits does and, in the same
// transaction, marks settled the entries of settled (MarkSettled): one
// commit for both. It fails as a whole, without the fallback of
// ApplyDebits.
func (l *Ledger) applyDebitsMarking(ctx context.Context, debits []Debit, settled []EntryKey) ([]DebitResult, error) {
	var results []DebitResult
	err := sqltx.Transact(ctx, l.db, func(tx *gorm.DB) error {
		var err error
		if results, err = applyDebits(tx, debits); err != nil {
			return err
		}
		return markSettled(tx, settled)
	})
	return results, err
}

func applyDebits(tx *gorm.DB, debits []Debit) ([]DebitResult, error) {
	results := make([]DebitResult, len(debits))
	balances, err := lockBalances(tx, usernamesOf(debits))
	if err != nil {
		return nil, err
	}
	existing, err := lockEntries(tx, LedgerDeduct, debits)
	if err != nil {
		return nil, err
	}
	sameBody, err := lockSameBody(tx, debits, existing)
	if err != nil {
		return nil, err
	}
	var rows []LedgerEntry
	var fill []Debit                 // rows written without a model (from a pending record of an older build), to complete
	first := make(map[[2]string]int) // a deduction twice in one batch applies once
	dupOf := make(map[int]int)
	for i, d := range debits {
		key := [2]string{d.Username, d.ID}
		if j, dup := first[key]; dup {
			dupOf[i] = j
			continue
		}
		first[key] = i
		bal, known := balances[d.Username]
		e, found := existing[key]
		if same, ok := sameBody[i]; ok && !found {
			e, found = same, true
		}
		switch {
		case !d.Amount.IsPositive() || d.ID == "":
			results[i].Err = fmt.Errorf("debit %q of %s: want an id and an amount > 0", d.ID, d.Amount)
		case !known:
			results[i].Err = fmt.Errorf("%w: %s", ErrUnknownUser, d.Username)
		case len(d.ID) > 128 || len(d.Username) > 64:
			results[i].Err = fmt.Errorf("debit %q of %q: id over 128 or username over 64 bytes", d.ID, d.Username)
		case found:
			results[i] = DebitResult{Seq: e.Seq, Amount: e.AmountFen.Neg(), Shortfall: e.ShortfallFen, Settled: e.SettledAt != nil,
				Ref: deref(e.PendingRef), RequestHash: deref(e.RequestHash)}
			if e.ModelName == nil && d.ModelName != "" && e.EntryID == d.ID {
				fill = append(fill, d)
			}
		default:
			took := decimal.Min(d.Amount, bal.Balance)
			bal.Balance, bal.Seq = bal.Balance.Sub(took), bal.Seq+1
			if !d.SelfSettled {
				bal.HotEntries++ // settled into the Redis balance later
			}
			balances[d.Username] = bal
			results[i] = DebitResult{Applied: true, Seq: bal.Seq, Amount: took, Shortfall: d.Amount.Sub(took), Settled: d.SelfSettled,
				Ref: d.Ref, RequestHash: d.RequestHash}
			rows = append(rows, debitRow(d, took, bal.Seq))
		}
	}
	if err := fillUsage(tx, fill); err != nil {
		return nil, err
	}
	if err := insertLedgerRows(tx, rows); err != nil {
		return nil, err
	}
	for i, j := range dupOf {
		results[i] = results[j]
		results[i].Applied = false
	}
	if len(rows) == 0 {
		return results, nil
	}
	return results, setBalances(tx, balances, touched(rows))
}

func debitRow(d Debit, took decimal.Decimal, seq uint64) LedgerEntry {
	row := LedgerEntry{
		Username: d.Username, Kind: LedgerDeduct, EntryID: d.ID, Seq: seq, AmountFen: took.Neg(), ShortfallFen: d.Amount.Sub(took),
		Source: d.Source, OccurredAt: d.OccurredAt.UTC(), PendingRef: nonEmpty(d.Ref), RequestHash: nonEmpty(d.RequestHash),
		ModelName: nonEmpty(d.ModelName),
	}
	in, out := tokenCount(d.InputTokens), tokenCount(d.OutputTokens)
	row.InputTokens, row.OutputTokens = &in, &out
	if d.SelfSettled {
		now := time.Now().UTC()
		row.SettledAt = &now
	}
	if row.ShortfallFen.IsPositive() {
		reason := "balance could not cover " + row.ShortfallFen.StringFixed(MoneyScale) + " fen"
		row.Reason = &reason
	}
	return row
}

// tokenCount fits a token count into the ledger's INT UNSIGNED column.
func tokenCount(n int64) uint32 { return uint32(min(max(n, 0), 1<<32-1)) }

// fillUsage completes rows written before their message arrived — by
// balance-sync from a pending record that carried no usage — with the
// model and token counts the message brings. Only a row without a model
// is touched, so a redelivery writes nothing.
func fillUsage(tx *gorm.DB, debits []Debit) error {
	for _, d := range debits {
		err := tx.Model(&LedgerEntry{}).
			Where("username = ? AND kind = ? AND entry_id = ? AND model_name IS NULL", d.Username, LedgerDeduct, d.ID).
			Updates(map[string]any{"model_name": d.ModelName, "input_tokens": tokenCount(d.InputTokens), "output_tokens": tokenCount(d.OutputTokens)}).Error
		if err != nil {
			return err
		}
	}
	return nil
}

func usernamesOf(debits []Debit) []string {
	var out []string
	for _, d := range debits {
		out = append(out, d.Username)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func touched(rows []LedgerEntry) map[string]bool {
	out := make(map[string]bool)
	for _, r := range rows {
		out[r.Username] = true
	}
	return out
}

// account is the part of user_account a ledger write needs.
type account struct {
	Balance    decimal.Decimal
	Seq        uint64
	HotEntries uint64 // entries written unsettled, to settle into the Redis balance
}

// setBalances writes the new balances, sequences and hot-entry counts of
// the changed users in one statement.
func setBalances(tx *gorm.DB, accounts map[string]account, changed map[string]bool) error {
	if len(changed) == 0 {
		return nil
	}
	users := make([]string, 0, len(changed))
	for u := range changed {
		users = append(users, u)
	}
	var when strings.Builder
	for range users {
		when.WriteString(" WHEN ? THEN ?")
	}
	cases := when.String()
	var q strings.Builder
	q.WriteString("UPDATE user_account SET balance_fen = CASE username" + cases + " END, ledger_seq = CASE username" + cases +
		" END, hot_entries = CASE username" + cases + " END WHERE username IN (")
	placeholders(&q, len(users))
	q.WriteByte(')')
	args := make([]any, 0, 7*len(users))
	for _, u := range users {
		args = append(args, u, accounts[u].Balance.StringFixed(MoneyScale))
	}
	for _, u := range users {
		args = append(args, u, accounts[u].Seq)
	}
	for _, u := range users {
		args = append(args, u, accounts[u].HotEntries)
	}
	for _, u := range users {
		args = append(args, u)
	}
	_, err := execSQL(tx, q.String(), args...)
	return err
}

// Activity is an account's balance with what says whether it is quiet.
type Activity struct {
	Username   string
	BalanceFen decimal.Decimal
	LedgerSeq  uint64
	HotEntries uint64     // entries the Redis balance must reflect
	Last       *time.Time // the newest ledger entry's time; nil without one
	Unsettled  bool       // a ledger entry's Redis side is not done
}

// Activity reads the accounts of users (those that exist), in one
// statement. The per-user reads walk indexes and stop early: the newest
// entry backwards in (username, created_at), not a MAX over every row of
// the user, which MariaDB computes by reading them all.
func (l *Ledger) Activity(ctx context.Context, users []string) ([]Activity, error) {
	db := l.db
	var rows []Activity
	err := db.WithContext(ctx).Raw(`SELECT u.username, u.balance_fen, u.ledger_seq, u.hot_entries,
		(SELECT l.created_at FROM agent_ledger l WHERE l.username = u.username ORDER BY l.created_at DESC LIMIT 1) AS last,
		EXISTS (SELECT 1 FROM agent_ledger l WHERE l.username = u.username AND l.settled_at IS NULL) AS unsettled
		FROM user_account u WHERE u.username IN ?`, users).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("store: account activity of %d users: %w", len(users), err)
	}
	return rows, nil
}
