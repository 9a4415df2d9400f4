// Package billing is the API side of agent billing (doc/money.md): price a
// request's tokens, and take the cost from the user's hot Redis balance
// atomically (cap at zero; the request id is the deduction id, so the same
// request deducts once; the deduction is recorded as pending until MySQL has
// it). The messages that carry the deduction to MySQL are published by the
// caller.
package billing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/eisland/isle/store"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"
)

// Errors callers branch on.
var (
	ErrUnknownModel = store.ErrUnknownModel
	ErrUnknownUser  = store.ErrUnknownUser
	ErrNoBalance    = errors.New("billing: the balance is zero")
	// ErrConflict: the request id was charged for a request with another
	// body (Charge.Deducted is that first charge); nothing was taken.
	ErrConflict = errors.New("billing: the request id was charged for another request")
	// ErrCostTooLarge: the tokens cost more at the model's price than a
	// charge can carry (its micro-fen would not fit an int64); a price row
	// above store.MaxPriceFenPerMTok, which Set refuses, is the only way.
	ErrCostTooLarge = errors.New("billing: the cost is too large to charge")
	// ErrOutcomeUnknown: Redis stopped answering while the charge's script
	// may have run, and could not say within the request's time whether it
	// did. The same request sent again answers what was taken, once.
	ErrOutcomeUnknown = errors.New("billing: whether the request was charged is not known yet")
)

// Tokens are one request's token counts; input excludes cached input.
type Tokens struct {
	Input, Cached, Output, Reasoning int64
}

var perMillion = decimal.New(1, 6)

// maxMicroFen is the largest cost in micro-fen: what an int64 holds.
var maxMicroFen = decimal.NewFromInt(math.MaxInt64)

// Cost prices tokens: Σ count × fen per million tokens / 10^6, rounded half
// up to 8 places, and the same amount in micro-fen (10^-8 fen), as
// AgentUsageStatsMessage.costMicroFen carries it. A cost whose micro-fen
// would not fit an int64 is ErrCostTooLarge (prices within
// store.MaxPriceFenPerMTok never give one for token counts the API takes).
func Cost(p store.Pricing, t Tokens) (fen decimal.Decimal, micro int64, err error) {
	sum := decimal.NewFromInt(t.Input).Mul(p.Input).
		Add(decimal.NewFromInt(t.Cached).Mul(p.CachedInput)).
		Add(decimal.NewFromInt(t.Output).Mul(p.Output)).
		Add(decimal.NewFromInt(t.Reasoning).Mul(p.Reasoning))
	fen = sum.Div(perMillion).Round(store.MoneyScale)
	if fen.Shift(store.MoneyScale).GreaterThan(maxMicroFen) {
		return fen, 0, fmt.Errorf("%w: %s fen at the price of %s", ErrCostTooLarge, fen.StringFixed(store.MoneyScale), p.Model)
	}
	return fen, microFen(fen), nil
}

// microFen is fen in 10^-8 fen.
func microFen(fen decimal.Decimal) int64 { return fen.Shift(store.MoneyScale).IntPart() }

// Service charges requests.
type Service struct {
	prices   *store.PriceCache
	balances *store.Balances
	now      func() time.Time
	// settling, when set (tests), runs between a charge that found the hot
	// balance empty and its settle of the user's recharges.
	settling func()
}

// New returns a Service over the prices and the hot balances of db and rdb.
// Its prices are read from Redis (or MySQL) each time until WatchPrices
// runs, and from memory while it does.
func New(db *gorm.DB, rdb *store.Redis) *Service {
	return &Service{prices: store.NewPriceCache(store.NewPrices(db, rdb)), balances: store.NewBalances(db, rdb), now: time.Now}
}

// WatchPrices keeps prices in memory, dropped as soon as a change is
// announced (store.PriceCache), until ctx ends.
func (s *Service) WatchPrices(ctx context.Context, log *slog.Logger) { s.prices.Watch(ctx, log) }

// Request is one usage to charge.
type Request struct {
	ID       string // the client's request id: the deduction id
	Username string
	Model    string
	Tokens   Tokens
}

// Hash identifies the request's body — the model and the token counts —
// among the requests of one id: 16 hex digits of a SHA-256.
func (r Request) Hash() string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d\x00%d\x00%d", r.Model, r.Tokens.Input, r.Tokens.Cached, r.Tokens.Output, r.Tokens.Reasoning))
	return hex.EncodeToString(sum[:8])
}

// Charge is what a request cost and what was taken.
type Charge struct {
	Cost         decimal.Decimal // the price of the tokens
	CostMicroFen int64
	Deducted     decimal.Decimal // min(balance, cost): cap at zero
	Balance      decimal.Decimal // after the deduction
	Replayed     bool            // the request id was charged before; nothing was taken now
	// Ref is the nonce of the hot-balance charge (the first one's for a
	// replay; "" when Redis no longer knows it) and RequestHash the body's
	// hash: the deduction message carries both.
	Ref, RequestHash string
}

// Charge prices r and takes the cost from the user's hot balance. A missing
// balance is initialised from MySQL and the deduction run again. A zero
// balance is ErrNoBalance (with the Charge's Cost set). A zero cost takes
// nothing, also from a zero balance, but holds the request id as a charge
// does. A replay answers the first charge: what it took and what it cost
// then, whatever the price is now. It is ChargeAll of one request.
func (s *Service) Charge(ctx context.Context, r Request) (Charge, error) {
	res := s.ChargeAll(ctx, []Request{r})
	return res[0].Charge, res[0].Err
}

// Balance is a user's hot balance, initialised from MySQL if missing.
func (s *Service) Balance(ctx context.Context, username string) (decimal.Decimal, error) {
	var bal decimal.Decimal
	err := s.withBalance(ctx, username, func() error {
		var err error
		bal, err = s.balances.Balance(ctx, username)
		return err
	})
	return bal, err
}

// withBalance runs op, which reads or changes username's hot balance. When
// op finds the balance missing from Redis (never loaded, or lost), the
// balance is initialised from MySQL and op run once more: once, so a balance
// that keeps vanishing is an error rather than a loop. An error initialising
// it is returned as it is.
func (s *Service) withBalance(ctx context.Context, username string, op func() error) error {
	err := op()
	if !errors.Is(err, store.ErrBalanceMissing) {
		return err
	}
	if _, err := s.balances.Ensure(ctx, username); err != nil {
		return err
	}
	return op()
}

// Pending sums a user's deductions not yet in MySQL.
func (s *Service) Pending(ctx context.Context, username string) (decimal.Decimal, error) {
	entries, err := s.balances.Pending(ctx, username)
	sum := decimal.Zero
	for _, e := range entries {
		sum = sum.Add(e.Deducted)
	}
	return sum, err
}
