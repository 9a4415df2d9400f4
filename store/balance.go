package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"
)

// MoneyScale is the number of decimal places of every fen amount (DECIMAL(20,8)).
const MoneyScale = 8

// Errors of DeductBalance, mapped from deduct.lua's return codes.
var (
	ErrBalanceMissing   = errors.New("store: balance not initialised")     // "-1": initialise with InitBalance, run again
	ErrBalanceMalformed = errors.New("store: balance or amount malformed") // "-2"
	ErrBalanceEmpty     = errors.New("store: balance is zero")             // "-3"
)

// Taken is the outcome of DeductBalance.
type Taken struct {
	Balance  decimal.Decimal // balance after the deduction
	Deducted decimal.Decimal // min(balance before, amount): cap at zero
	Replayed bool            // the id was deducted before; nothing changed and the first result is returned
}

// DeductRequest asks to take Amount fen from Username's hot balance.
type DeductRequest struct {
	Username string
	ID       string          // deduction id (the API request id): the same id deducts once
	Amount   decimal.Decimal // rounded half-up to 8 places; must be more than zero
	Now      time.Time       // recorded in the pending entry
}

// DeductBalance runs deduct.lua: it takes min(balance, amount) from the
// user's balance and records the deduction as pending, atomically. Running it
// again with the same id, also after a client-side retry whose first reply was
// lost, changes nothing and returns the first result with Replayed set.
func (r *Redis) DeductBalance(ctx context.Context, req DeductRequest) (Taken, error) {
	amount := req.Amount.Round(MoneyScale)
	if !amount.IsPositive() {
		return Taken{}, fmt.Errorf("store: deduct %s: amount %s: %w", req.ID, req.Amount, ErrBalanceMalformed)
	}
	if req.Username == "" || req.ID == "" {
		return Taken{}, fmt.Errorf("store: deduct: username and deduction id are required")
	}
	c := r.Client(keys.DBAgentBilling)
	k := []string{r.keys.AgentBalance(req.Username), r.keys.AgentPending(req.Username), r.keys.AgentDeduction(req.Username, req.ID)}
	res, err := deductScript.Run(ctx, c, k,
		amount.StringFixed(MoneyScale), req.ID, req.Now.UnixMilli(), int64(keys.DeductionMarkerTTL/time.Second)).Text()
	if err != nil {
		return Taken{}, fmt.Errorf("store: deduct %s: %w", req.ID, err)
	}
	switch res {
	case "-1":
		return Taken{}, ErrBalanceMissing
	case "-2":
		return Taken{}, fmt.Errorf("store: deduct %s: %w", req.ID, ErrBalanceMalformed)
	case "-3":
		return Taken{}, ErrBalanceEmpty
	}
	return parseDeduction(res)
}

func parseDeduction(res string) (Taken, error) {
	parts := strings.Split(res, "|")
	if len(parts) != 3 || (parts[0] != "OK" && parts[0] != "DUP") {
		return Taken{}, fmt.Errorf("store: deduct: unexpected script result %q", res)
	}
	bal, err1 := decimal.NewFromString(parts[1])
	ded, err2 := decimal.NewFromString(parts[2])
	if err := errors.Join(err1, err2); err != nil {
		return Taken{}, fmt.Errorf("store: deduct: result %q: %w", res, err)
	}
	return Taken{Balance: bal, Deducted: ded, Replayed: parts[0] == "DUP"}, nil
}

// InitBalance initialises a user's hot balance from what MySQL read — the
// balance and the user's ledger sequence with it — if it is missing, and
// reports whether it did (seed 000 "Balance Initialization", with SPEC 6.6's
// record of the read). Ledger entries MySQL committed after the read are
// settled into the balance when they land (Settle). EnsureBalance does the
// MySQL read.
func (r *Redis) InitBalance(ctx context.Context, username string, balance decimal.Decimal, readSeq uint64, recent ...RecentDeduction) (bool, error) {
	if balance.IsNegative() {
		return false, fmt.Errorf("store: init balance of %s: negative balance %s", username, balance)
	}
	k := []string{r.keys.AgentBalance(username), r.keys.AgentBalanceInit(username), r.keys.AgentBalanceLate(username)}
	args := []any{balance.StringFixed(MoneyScale), readSeq, time.Now().UnixMilli(), int64(keys.DeductionMarkerTTL / time.Second)}
	for _, d := range recent {
		k = append(k, r.keys.AgentDeduction(username, d.ID))
		args = append(args, d.Amount.StringFixed(MoneyScale))
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
	ID     string
	Amount decimal.Decimal // what it took, positive
}

// Balance returns a user's hot balance, or ErrBalanceMissing.
func (r *Redis) Balance(ctx context.Context, username string) (decimal.Decimal, error) {
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
}

// Settle runs settle.lua for each entry in one pipeline and returns each
// outcome. It is idempotent per entry (a marker records it), so a retry after
// a lost reply changes nothing. An entry of a user whose Redis balance is
// unreadable gets its own SettleResult.Err; the error returned is for the
// call as a whole (Redis unreachable).
func (r *Redis) Settle(ctx context.Context, entries ...SettleEntry) ([]SettleResult, error) {
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
				r.keys.AgentBalanceLate(e.Username), r.keys.AgentSettled(e.Username, e.Kind, e.EntryID), r.keys.AgentDeduction(e.Username, e.EntryID)}
			deducted := e.Deducted
			if deducted.IsZero() {
				deducted = e.Amount
			}
			cmds[i] = settleScript.EvalSha(ctx, p, k, e.Kind, e.EntryID, e.Amount.StringFixed(MoneyScale), e.Seq,
				int64(keys.DeductionMarkerTTL/time.Second), time.Now().UnixMilli(), deducted.StringFixed(MoneyScale))
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
		if len(parts) == 3 {
			if out[i].Uncovered, err = decimal.NewFromString(parts[2]); err != nil {
				out[i] = SettleResult{Err: fmt.Errorf("store: settle %s of %s: answer %q: %w", e.EntryID, e.Username, res, err)}
			}
		}
	}
	return out, nil
}

// PendingDeduction is one entry of a user's pending hash.
type PendingDeduction struct {
	ID       string
	Deducted decimal.Decimal
	At       time.Time
}

// ClearPending removes a deduction MySQL already has from the user's
// pending hash, and makes sure its idempotency marker exists (a Redis loss
// may have taken it), so a client retrying the request is not charged again.
func (r *Redis) ClearPending(ctx context.Context, username, id string, deducted decimal.Decimal) error {
	_, err := r.Client(keys.DBAgentBilling).Pipelined(ctx, func(p redis.Pipeliner) error {
		p.HDel(ctx, r.keys.AgentPending(username), id)
		p.SetNX(ctx, r.keys.AgentDeduction(username, id), deducted.StringFixed(MoneyScale), keys.DeductionMarkerTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: clear pending %s of %s: %w", id, username, err)
	}
	return nil
}

// PendingDeductions lists a user's deductions that no consumer has applied yet.
func (r *Redis) PendingDeductions(ctx context.Context, username string) ([]PendingDeduction, error) {
	m, err := r.Client(keys.DBAgentBilling).HGetAll(ctx, r.keys.AgentPending(username)).Result()
	if err != nil {
		return nil, fmt.Errorf("store: pending deductions of %s: %w", username, err)
	}
	return parsePending(username, m)
}

// parsePending reads a user's pending hash: deduction id -> "amount|ms",
// as deduct.lua writes it.
func parsePending(username string, m map[string]string) ([]PendingDeduction, error) {
	out := make([]PendingDeduction, 0, len(m))
	for id, v := range m {
		amount, at, ok := strings.Cut(v, "|")
		d, err := decimal.NewFromString(amount)
		ms, err2 := strconv.ParseInt(at, 10, 64)
		if !ok || err != nil || err2 != nil {
			return nil, fmt.Errorf("store: pending deduction %s of %s: malformed entry %q", id, username, v)
		}
		out = append(out, PendingDeduction{ID: id, Deducted: d, At: time.UnixMilli(ms)})
	}
	return out, nil
}
