package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"
)

// Balances are the hot balances in Redis that admit requests (doc/money.md),
// with what keeps them in step with the Ledger: pending deductions,
// initialisation from MySQL, settling of committed entries.
type Balances struct {
	db *gorm.DB
	r  *Redis
}

// NewBalances returns the hot balances of r, initialised from db.
func NewBalances(db *gorm.DB, r *Redis) *Balances { return &Balances{db: db, r: r} }

// MoneyScale is the number of decimal places of every fen amount (DECIMAL(20,8)).
const MoneyScale = 8

// Errors of DeductBalance, mapped from deduct.lua's return codes.
var (
	ErrBalanceMissing   = errors.New("store: balance not initialised")     // "-1": initialise with InitBalance, run again
	ErrBalanceMalformed = errors.New("store: balance or amount malformed") // "-2"
	ErrBalanceEmpty     = errors.New("store: balance is zero")             // "-3"
	// ErrRequestConflict: the deduction id was charged before for a request
	// with another body; nothing changed (Taken.Deducted is the first charge).
	ErrRequestConflict = errors.New("store: the deduction id was charged for another request body")
)

// Taken is the outcome of DeductBalance.
type Taken struct {
	Balance  decimal.Decimal // balance after the deduction
	Deducted decimal.Decimal // min(balance before, amount): cap at zero
	Replayed bool            // the id was deducted before; nothing changed and the first result is returned
	Ref      string          // the charge's nonce: the request's, or the first charge's for a replay ("" when unknown)
	// Cost is what the charge asked: the request's amount, or for a
	// replay the first charge's. When Redis no longer knows it (a marker
	// restored from the ledger after a Redis loss, or one of an older
	// build) it is what the first charge deducted.
	Cost decimal.Decimal
}

// DeductRequest asks to take Amount fen from Username's hot balance.
type DeductRequest struct {
	Username string
	ID       string // deduction id (the API request id): the same id deducts once
	// Amount is the request's cost, rounded half-up to 8 places. Zero takes
	// nothing and records nothing pending, but holds the id as a charge
	// does: the same id again is a replay, with another body a conflict.
	Amount decimal.Decimal
	Now    time.Time // recorded in the pending entry
	// Ref is a nonce drawn for this charge (NewRef): it tells this charge
	// apart from another charge of the same id taken after Redis forgot
	// this one (Resettle).
	Ref string
	// RequestHash identifies the request's body (RequestHash): the same id
	// with another body is ErrRequestConflict. "" does not compare.
	RequestHash string
	Usage       *UsageData // kept with the pending record, for balance-sync
}

// NewRef draws a charge's nonce: 16 hex digits from crypto/rand.
func NewRef() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// parseDeduction reads "OK|balance|deducted", "DUP|balance|deducted|ref|cost"
// or "CONFLICT|deducted".
func parseDeduction(res string) (Taken, error) {
	parts := strings.Split(res, "|")
	if parts[0] == "CONFLICT" && len(parts) == 2 {
		ded, err := decimal.NewFromString(parts[1])
		if err != nil {
			return Taken{}, fmt.Errorf("store: deduct: result %q: %w", res, err)
		}
		return Taken{Deducted: ded, Replayed: true}, ErrRequestConflict
	}
	if !(parts[0] == "OK" && len(parts) == 3) && !(parts[0] == "DUP" && len(parts) == 5) {
		return Taken{}, fmt.Errorf("store: deduct: unexpected script result %q", res)
	}
	bal, err1 := decimal.NewFromString(parts[1])
	ded, err2 := decimal.NewFromString(parts[2])
	if err := errors.Join(err1, err2); err != nil {
		return Taken{}, fmt.Errorf("store: deduct: result %q: %w", res, err)
	}
	t := Taken{Balance: bal, Deducted: ded, Replayed: parts[0] == "DUP"}
	if t.Replayed {
		t.Ref, t.Cost = parts[3], ded
		if parts[4] != "" {
			cost, err := decimal.NewFromString(parts[4])
			if err != nil {
				return Taken{}, fmt.Errorf("store: deduct: result %q: %w", res, err)
			}
			t.Cost = cost
		}
	}
	return t, nil
}

// BalanceRead is what an initialisation read of user_account: the balance
// with the ledger sequence and the hot-entry count it includes.
type BalanceRead struct {
	Balance    decimal.Decimal
	Seq        uint64 // ledger_seq: entries with a higher seq are not in Balance
	HotEntries uint64 // hot_entries: the Redis balance starts reflecting this many
}

// Init initialises a user's hot balance from what MySQL read, if it
// is missing, and reports whether it did (the Spring
// backend's initialisation, with the record of the read of doc/money.md, "After a Redis loss"). Ledger entries MySQL
// committed after the read are settled into the balance when they land
// (Settle). EnsureBalance does the MySQL read.
func (b *Balances) Init(ctx context.Context, username string, read BalanceRead, recent ...RecentDeduction) (bool, error) {
	r := b.r
	if read.Balance.IsNegative() {
		return false, fmt.Errorf("store: init balance of %s: negative balance %s", username, read.Balance)
	}
	k := []string{r.keys.AgentBalance(username), r.keys.AgentBalanceInit(username), r.keys.AgentBalanceLate(username),
		r.keys.AgentBalanceEntries(username)}
	args := []any{read.Balance.StringFixed(MoneyScale), read.Seq, time.Now().UnixMilli(), int64(keys.DeductionMarkerTTL / time.Second), read.HotEntries}
	for _, d := range recent {
		k = append(k, r.keys.AgentDeduction(username, d.ID))
		args = append(args, markerValue(d.Amount, d.Ref, d.RequestHash))
	}
	res, err := initBalanceScript.Run(ctx, r.Client(keys.DBAgentBilling), k, args...).Text()
	if err != nil {
		return false, fmt.Errorf("store: init balance of %s: %w", username, err)
	}
	switch {
	case res == "EXISTS":
		return false, nil
	case strings.HasPrefix(res, "INIT|"):
		return true, nil
	}
	return false, fmt.Errorf("store: init balance of %s: script answered %q", username, res)
}

// RecentDeduction is a deduction id the ledger has, restored as an
// idempotency marker when a balance is initialised.
type RecentDeduction struct {
	ID          string
	Amount      decimal.Decimal // what it took, positive
	Ref         string
	RequestHash string
}

// Balance returns a user's hot balance, or ErrBalanceMissing.
func (b *Balances) Balance(ctx context.Context, username string) (decimal.Decimal, error) {
	r := b.r
	v, err := r.Client(keys.DBAgentBilling).Get(ctx, r.keys.AgentBalance(username)).Result()
	if errors.Is(err, redis.Nil) {
		return decimal.Zero, ErrBalanceMissing
	}
	if err != nil {
		return decimal.Zero, fmt.Errorf("store: balance of %s: %w", username, err)
	}
	d, err := decimal.NewFromString(v)
	if err != nil {
		return decimal.Zero, fmt.Errorf("store: balance of %s: %q: %w", username, v, ErrBalanceMalformed)
	}
	return d, nil
}

// Settle outcomes, as settle.lua answers.
const (
	SettleCleared  = "CLEARED"  // the pending entry of a deduction was removed
	SettleSettled  = "SETTLED"  // settled before: nothing done
	SettleLate     = "LATE"     // the balance is missing: kept for its initialisation
	SettleIncluded = "INCLUDED" // the last initialisation read it
	SettleApplied  = "APPLIED"  // applied to the balance now
	SettleRefunded = "REFUNDED" // reflected already; a later charge of the id (a second charge) refunded
)

// Entry kinds of Settle.
const (
	SettleDeduction = "D"
	SettleCredit    = "C"
)

// SettleEntry is one ledger entry MySQL committed, to reflect in Redis.
type SettleEntry struct {
	Username string
	Kind     string          // SettleDeduction or SettleCredit
	EntryID  string          // the deduction id or the credit's entry id
	Amount   decimal.Decimal // what the ledger applied, positive
	Seq      uint64          // its per-user ledger sequence
	Deducted decimal.Decimal // a deduction: what the hot balance took (the ledger's amount plus its shortfall); zero = Amount
	// A deduction's ref and request hash, as its ledger row holds them
	// (the idempotency marker is set from them).
	Ref, RequestHash string
}

func (e SettleEntry) deducted() decimal.Decimal {
	if e.Deducted.IsZero() {
		return e.Amount
	}
	return e.Deducted
}

// SettleResult is what settle.lua did with one entry.
type SettleResult struct {
	Outcome string // one of the Settle outcomes; "" when Err is set
	// Err is set when the entry could not be settled because the user's
	// Redis data is unreadable (ErrBalanceMalformed): that user's entry is
	// left for later, the other entries of the call are settled.
	Err error
	// Uncovered is the part of a deduction applied now (SettleApplied) that
	// the balance could not take: it stops at zero. After a Redis loss the
	// restored balance does not know deductions still in flight; when the
	// user spends it before they land, the difference is forgiven, and
	// balance-sync records it as an ADJUST row.
	Uncovered decimal.Decimal
	// Refunded is, for SettleRefunded, the second charge given back.
	Refunded decimal.Decimal
}

// Settle runs settle.lua for each entry in one pipeline and returns each
// outcome. It is idempotent per entry (a marker records it), so a retry after
// a lost reply changes nothing. An entry of a user whose Redis balance is
// unreadable gets its own SettleResult.Err; the error returned is for the
// call as a whole (Redis unreachable).
func (b *Balances) Settle(ctx context.Context, entries ...SettleEntry) ([]SettleResult, error) {
	r := b.r
	c := r.Client(keys.DBAgentBilling)
	cmds, err := r.settlePipeline(ctx, c, entries)
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		// The server lost its script cache: load it and go again, once, so
		// a server that keeps losing it cannot keep us here.
		if lerr := settleScript.Load(ctx, c).Err(); lerr != nil {
			return nil, fmt.Errorf("store: settle: %w", lerr)
		}
		cmds, err = r.settlePipeline(ctx, c, entries)
	}
	if err != nil {
		return nil, fmt.Errorf("store: settle: %w", err)
	}
	return settleResults(entries, cmds)
}

// settlePipeline sends one EVALSHA of settle.lua per entry, in one pipeline.
func (r *Redis) settlePipeline(ctx context.Context, c *redis.Client, entries []SettleEntry) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(entries))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, e := range entries {
			k := []string{r.keys.AgentBalance(e.Username), r.keys.AgentPending(e.Username), r.keys.AgentBalanceInit(e.Username),
				r.keys.AgentBalanceLate(e.Username), r.keys.AgentSettled(e.Username, e.Kind, e.EntryID), r.keys.AgentDeduction(e.Username, e.EntryID),
				r.keys.AgentBalanceEntries(e.Username)}
			cmds[i] = settleScript.EvalSha(ctx, p, k, e.Kind, e.EntryID, e.Amount.StringFixed(MoneyScale), e.Seq,
				int64(keys.DeductionMarkerTTL/time.Second), time.Now().UnixMilli(), markerValue(e.deducted(), e.Ref, e.RequestHash))
		}
		return nil
	})
	return cmds, err
}

// settleResults reads settle.lua's answers ("OUTCOME", or
// "APPLIED|balance|uncovered"; "-2" for a malformed balance or amount). A
// malformed answer is that entry's error, not the batch's.
func settleResults(entries []SettleEntry, cmds []*redis.Cmd) ([]SettleResult, error) {
	out := make([]SettleResult, len(cmds))
	for i, cmd := range cmds {
		e := entries[i]
		res, err := cmd.Text()
		if err != nil {
			return nil, fmt.Errorf("store: settle %s of %s: %w", e.EntryID, e.Username, err)
		}
		if res == "-2" {
			out[i].Err = fmt.Errorf("store: settle %s of %s: %w", e.EntryID, e.Username, ErrBalanceMalformed)
			continue
		}
		parts := strings.Split(res, "|")
		out[i].Outcome = parts[0]
		switch {
		case parts[0] == SettleApplied && len(parts) == 3:
			out[i].Uncovered, err = decimal.NewFromString(parts[2])
		case parts[0] == SettleRefunded && len(parts) == 2:
			out[i].Refunded, err = decimal.NewFromString(parts[1])
		}
		if err != nil {
			out[i] = SettleResult{Err: fmt.Errorf("store: settle %s of %s: answer %q: %w", e.EntryID, e.Username, res, err)}
		}
	}
	return out, nil
}
