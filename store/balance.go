package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/store/keys"
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

// Deduction is the outcome of DeductBalance.
type Deduction struct {
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
func (r *Redis) DeductBalance(ctx context.Context, req DeductRequest) (Deduction, error) {
	amount := req.Amount.Round(MoneyScale)
	if !amount.IsPositive() {
		return Deduction{}, fmt.Errorf("store: deduct %s: amount %s: %w", req.ID, req.Amount, ErrBalanceMalformed)
	}
	if req.Username == "" || req.ID == "" {
		return Deduction{}, fmt.Errorf("store: deduct: username and deduction id are required")
	}
	c := r.Client(keys.DBAgentBilling)
	k := []string{r.keys.AgentBalance(req.Username), r.keys.AgentPending(req.Username), r.keys.AgentDeduction(req.Username, req.ID)}
	res, err := deductScript.Run(ctx, c, k,
		amount.StringFixed(MoneyScale), req.ID, req.Now.UnixMilli(), int64(keys.DeductionMarkerTTL/time.Second)).Text()
	if err != nil {
		return Deduction{}, fmt.Errorf("store: deduct %s: %w", req.ID, err)
	}
	switch res {
	case "-1":
		return Deduction{}, ErrBalanceMissing
	case "-2":
		return Deduction{}, fmt.Errorf("store: deduct %s: %w", req.ID, ErrBalanceMalformed)
	case "-3":
		return Deduction{}, ErrBalanceEmpty
	}
	return parseDeduction(res)
}

func parseDeduction(res string) (Deduction, error) {
	parts := strings.Split(res, "|")
	if len(parts) != 3 || (parts[0] != "OK" && parts[0] != "DUP") {
		return Deduction{}, fmt.Errorf("store: deduct: unexpected script result %q", res)
	}
	bal, err1 := decimal.NewFromString(parts[1])
	ded, err2 := decimal.NewFromString(parts[2])
	if err := errors.Join(err1, err2); err != nil {
		return Deduction{}, fmt.Errorf("store: deduct: result %q: %w", res, err)
	}
	return Deduction{Balance: bal, Deducted: ded, Replayed: parts[0] == "DUP"}, nil
}

// InitBalance sets a user's hot balance if it is missing (SETNX, seed 000
// "Balance Initialization") and reports whether it did.
func (r *Redis) InitBalance(ctx context.Context, username string, balance decimal.Decimal) (bool, error) {
	if balance.IsNegative() {
		return false, fmt.Errorf("store: init balance of %s: negative balance %s", username, balance)
	}
	ok, err := r.Client(keys.DBAgentBilling).SetNX(ctx, r.keys.AgentBalance(username), balance.StringFixed(MoneyScale), 0).Result()
	if err != nil {
		return false, fmt.Errorf("store: init balance of %s: %w", username, err)
	}
	return ok, nil
}

// PendingDeduction is one entry of a user's pending hash.
type PendingDeduction struct {
	ID       string
	Deducted decimal.Decimal
	At       time.Time
}

// PendingDeductions lists a user's deductions that no consumer has applied yet.
func (r *Redis) PendingDeductions(ctx context.Context, username string) ([]PendingDeduction, error) {
	m, err := r.Client(keys.DBAgentBilling).HGetAll(ctx, r.keys.AgentPending(username)).Result()
	if err != nil {
		return nil, fmt.Errorf("store: pending deductions of %s: %w", username, err)
	}
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
