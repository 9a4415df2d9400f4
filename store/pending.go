package store

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"
)

// A pending record is a deduction the hot balance took that MySQL does not
// have yet: deduct.lua writes it atomically with the deduction, in the
// user's pending hash, as
//
//	deduction id -> "deducted|ms|ref|hash|model|input|cached|output|reasoning|costMicroFen"
//
// ref is the nonce of that charge and hash the request body's hash; the
// usage fields let balance-sync write the ledger row and the usage
// statistics of a request whose messages never arrived. Records of older
// builds hold only "deducted|ms".

// PendingDeduction is one entry of a user's pending hash.
type PendingDeduction struct {
	ID          string
	Deducted    decimal.Decimal
	At          time.Time
	Ref         string     // the charge's nonce; "" for a record of an older build
	RequestHash string     // "" when unknown
	Usage       *UsageData // nil when the record carries none
}

// UsageData is a request's model and token counts, kept with its pending
// record.
type UsageData struct {
	Model                                    string
	Input, Cached, Output, Reasoning, CostMF int64 // CostMF: the cost in 10^-8 fen
}

// String is the usage as a pending record keeps it; "" for nil.
func (u *UsageData) String() string {
	if u == nil {
		return ""
	}
	return fmt.Sprintf("%s|%d|%d|%d|%d|%d", u.Model, u.Input, u.Cached, u.Output, u.Reasoning, u.CostMF)
}

func parseUsage(fields []string) (*UsageData, bool) {
	if len(fields) != 6 || fields[0] == "" {
		return nil, false
	}
	var n [5]int64
	for i, f := range fields[1:] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 {
			return nil, false
		}
		n[i] = v
	}
	return &UsageData{Model: fields[0], Input: n[0], Cached: n[1], Output: n[2], Reasoning: n[3], CostMF: n[4]}, true
}

// parsePendingEntry reads one value of a pending hash.
func parsePendingEntry(id, v string) (PendingDeduction, bool) {
	f := strings.Split(v, "|")
	if len(f) < 2 {
		return PendingDeduction{}, false
	}
	d, err := decimal.NewFromString(f[0])
	ms, err2 := strconv.ParseInt(f[1], 10, 64)
	if err != nil || err2 != nil || !d.IsPositive() {
		return PendingDeduction{}, false
	}
	p := PendingDeduction{ID: id, Deducted: d, At: time.UnixMilli(ms)}
	switch {
	case len(f) == 2:
	case len(f) == 5 && f[4] == "":
		p.Ref, p.RequestHash = f[2], f[3]
	case len(f) == 10:
		var ok bool
		if p.Usage, ok = parseUsage(f[4:]); !ok {
			return PendingDeduction{}, false
		}
		p.Ref, p.RequestHash = f[2], f[3]
	default:
		return PendingDeduction{}, false
	}
	return p, true
}

// parsePending reads a user's pending hash.
func parsePending(username string, m map[string]string) ([]PendingDeduction, error) {
	out := make([]PendingDeduction, 0, len(m))
	for id, v := range m {
		p, ok := parsePendingEntry(id, v)
		if !ok {
			return nil, fmt.Errorf("store: pending deduction %s of %s: malformed entry %q", id, username, v)
		}
		out = append(out, p)
	}
	return out, nil
}

// markerValue is a deduction's idempotency marker: what it took, its ref
// and its request hash (deduct.lua answers a replay from it).
func markerValue(deducted decimal.Decimal, ref, hash string) string {
	return deducted.StringFixed(MoneyScale) + "|" + ref + "|" + hash
}

// Pending lists a user's deductions that no consumer has applied yet.
func (b *Balances) Pending(ctx context.Context, username string) ([]PendingDeduction, error) {
	r := b.r
	m, err := r.Client(keys.DBAgentBilling).HGetAll(ctx, r.keys.AgentPending(username)).Result()
	if err != nil {
		return nil, fmt.Errorf("store: pending deductions of %s: %w", username, err)
	}
	return parsePending(username, m)
}

// PendingOf returns the pending deductions of users, in one pipeline, and,
// apart, the users whose pending hash holds an entry that cannot be read (the
// error names it): they are left out of the first map.
func (b *Balances) PendingOf(ctx context.Context, users []string) (map[string][]PendingDeduction, map[string]error, error) {
	r := b.r
	cmds := make([]*redis.MapStringStringCmd, len(users))
	_, err := r.Client(keys.DBAgentBilling).Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, u := range users {
			cmds[i] = p.HGetAll(ctx, r.keys.AgentPending(u))
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store: pending deductions: %w", err)
	}
	out := make(map[string][]PendingDeduction, len(users))
	bad := make(map[string]error)
	for i, u := range users {
		pending, err := parsePending(u, cmds[i].Val())
		switch {
		case err != nil:
			bad[u] = err
		case len(pending) > 0: // a user without pending deductions has no entry
			out[u] = pending
		}
	}
	return out, bad, nil
}

// Resettle outcomes, as resettle.lua answers.
const (
	ResettleNone     = "NONE"     // no pending record of the id
	ResettleCleared  = "CLEARED"  // the row's own record, back with an older snapshot: removed
	ResettleRefunded = "REFUNDED" // another charge of the id: removed, and its amount given back
)

// ResettleResult is what Resettle did.
type ResettleResult struct {
	Outcome  string
	Refunded decimal.Decimal // for ResettleRefunded: what went back to the balance
}

// Resettle deals with a pending record of a deduction whose ledger row was
// settled before (doc/money.md, "A request id deducts once"): e is the row. If the record is the row's own
// (same ref), it came back with an older Redis snapshot whose balance has
// the deduction taken: it is cleared. If it is another charge of the same
// id — taken after Redis forgot the first one's marker — the request is
// charged twice: the record is removed and its amount refunded to the hot
// balance. Either way the idempotency marker is set to the row's, so a
// client retrying the request is answered as a replay. Calling it again
// changes nothing.
func (b *Balances) Resettle(ctx context.Context, e SettleEntry) (ResettleResult, error) {
	r := b.r
	k := []string{r.keys.AgentBalance(e.Username), r.keys.AgentPending(e.Username), r.keys.AgentSettled(e.Username, SettleDeduction, e.EntryID),
		r.keys.AgentDeduction(e.Username, e.EntryID), r.keys.AgentBalanceEntries(e.Username)}
	res, err := resettleScript.Run(ctx, r.Client(keys.DBAgentBilling), k, e.EntryID, e.Ref,
		markerValue(e.deducted(), e.Ref, e.RequestHash), int64(keys.DeductionMarkerTTL/time.Second)).Text()
	if err != nil {
		return ResettleResult{}, fmt.Errorf("store: resettle %s of %s: %w", e.EntryID, e.Username, err)
	}
	outcome, amount, _ := strings.Cut(res, "|")
	switch outcome {
	case ResettleNone, ResettleCleared:
		return ResettleResult{Outcome: outcome}, nil
	case ResettleRefunded:
		d, err := decimal.NewFromString(amount)
		if err != nil {
			return ResettleResult{}, fmt.Errorf("store: resettle %s of %s: answer %q: %w", e.EntryID, e.Username, res, err)
		}
		return ResettleResult{Outcome: outcome, Refunded: d}, nil
	case "-2":
		return ResettleResult{}, fmt.Errorf("store: resettle %s of %s: %w", e.EntryID, e.Username, ErrBalanceMalformed)
	}
	return ResettleResult{}, fmt.Errorf("store: resettle %s of %s: script answered %q", e.EntryID, e.Username, res)
}
