package billing_test

import (
	"context"
	"math"
	"sync"
	"testing"

	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func TestCostIsExactDecimal(t *testing.T) {
	t.Parallel()
	p := store.Pricing{Input: dec("200"), CachedInput: dec("50"), Output: dec("800"), Reasoning: dec("800")}
	fen, micro, err := billing.Cost(p, billing.Tokens{Input: 1234, Cached: 100, Output: 567, Reasoning: 89})
	require.NoError(t, err)
	// (1234*200 + 100*50 + 567*800 + 89*800) / 1e6 = 776600 / 1e6
	require.Equal(t, "0.77660000", fen.StringFixed(8))
	require.EqualValues(t, 77660000, micro)
	fen, micro, err = billing.Cost(store.Pricing{Input: dec("0.3")}, billing.Tokens{Input: 7})
	require.NoError(t, err)
	require.Equal(t, "0.00000210", fen.StringFixed(8))
	require.EqualValues(t, 210, micro)
	fen, _, _ = billing.Cost(store.Pricing{Input: dec("0.000001")}, billing.Tokens{Input: 5})
	require.Equal(t, "0.00000000", fen.StringFixed(8), "5e-12 rounds to zero")
	fen, _, _ = billing.Cost(store.Pricing{Input: dec("0.000001")}, billing.Tokens{Input: 5000})
	require.Equal(t, "0.00000001", fen.StringFixed(8), "5e-9 rounds half up")
}

// At store.MaxPriceFenPerMTok the largest request the API takes (2^31-1
// tokens of each kind) is priced exactly; a price past it (a row the store
// did not write) makes such a request ErrCostTooLarge, never a micro-fen
// count that wrapped past int64.
func TestCostAtTheBounds(t *testing.T) {
	t.Parallel()
	top := store.MaxPriceFenPerMTok
	most := billing.Tokens{Input: math.MaxInt32, Cached: math.MaxInt32, Output: math.MaxInt32, Reasoning: math.MaxInt32}
	fen, micro, err := billing.Cost(store.Pricing{Input: top, CachedInput: top, Output: top, Reasoning: top}, most)
	require.NoError(t, err)
	require.Equal(t, "85899345880.00000000", fen.StringFixed(8))
	require.Equal(t, int64(8589934588000000000), micro)

	huge := dec("100000000")
	_, _, err = billing.Cost(store.Pricing{Model: "huge", Input: huge, Output: huge}, billing.Tokens{Input: math.MaxInt32, Output: math.MaxInt32})
	require.ErrorIs(t, err, billing.ErrCostTooLarge)
	// The last micro-fen an int64 holds is a cost; one more is not.
	_, micro, err = billing.Cost(store.Pricing{Input: dec("92233720368.54775807")}, billing.Tokens{Input: 1000000})
	require.NoError(t, err)
	require.Equal(t, int64(math.MaxInt64), micro)
	_, _, err = billing.Cost(store.Pricing{Input: dec("92233720368.54775808")}, billing.Tokens{Input: 1000000})
	require.ErrorIs(t, err, billing.ErrCostTooLarge)
}

type bundle struct {
	svc *billing.Service
	r   *store.Redis
	db  *gorm.DB
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	ctx := context.Background()
	require.NoError(t, store.NewPrices(db, r).Set(ctx, store.Pricing{Model: "m", Input: dec("1000000"), Output: dec("2000000"), Enabled: true}))
	_, err := store.NewAccounts(db).Create(ctx, "alice", "", dec("10"))
	require.NoError(t, err)
	return bundle{svc: billing.New(db, r), r: r, db: db}
}

func TestChargeInitialisesCapsAndRefuses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// 1 fen per input token, 2 per output token; the balance starts missing in Redis.
	c, err := b.svc.Charge(ctx, billing.Request{ID: "r1", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 3, Output: 1}})
	require.NoError(t, err)
	require.Equal(t, "5.00000000", c.Cost.StringFixed(8))
	require.Equal(t, "5.00000000", c.Deducted.StringFixed(8))
	require.Equal(t, "5.00000000", c.Balance.StringFixed(8))

	c, err = b.svc.Charge(ctx, billing.Request{ID: "r2", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 8}})
	require.NoError(t, err)
	require.Equal(t, "5.00000000", c.Deducted.StringFixed(8), "cap at zero")
	require.True(t, c.Balance.IsZero())

	_, err = b.svc.Charge(ctx, billing.Request{ID: "r3", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 1}})
	require.ErrorIs(t, err, billing.ErrNoBalance)
	_, err = b.svc.Charge(ctx, billing.Request{ID: "r4", Username: "alice", Model: "nope", Tokens: billing.Tokens{Input: 1}})
	require.ErrorIs(t, err, billing.ErrUnknownModel)
	_, err = b.svc.Charge(ctx, billing.Request{ID: "r5", Username: "ghost", Model: "m", Tokens: billing.Tokens{Input: 1}})
	require.ErrorIs(t, err, billing.ErrUnknownUser)

	pending, err := b.svc.Pending(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, "10.00000000", pending.StringFixed(8))
}

// The same request id, sent again or many times at once, deducts once.
func TestSameRequestChargesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	req := billing.Request{ID: "same", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 2}}
	var wg sync.WaitGroup
	results := make(chan billing.Charge, 16)
	for range 16 {
		wg.Go(func() {
			c, err := b.svc.Charge(ctx, req)
			require.NoError(t, err)
			results <- c
		})
	}
	wg.Wait()
	close(results)
	replayed := 0
	for c := range results {
		require.Equal(t, "2.00000000", c.Deducted.StringFixed(8))
		require.Equal(t, "8.00000000", c.Balance.StringFixed(8))
		if c.Replayed {
			replayed++
		}
	}
	require.Equal(t, 15, replayed)
	bal, err := b.svc.Balance(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, "8.00000000", bal.StringFixed(8))
}

func TestPricingCacheIsDroppedOnChange(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	ctx := context.Background()
	require.NoError(t, store.NewPrices(db, r).Set(ctx, store.Pricing{Model: "x", Input: dec("1"), Enabled: true}))
	p, err := store.NewPrices(db, r).Get(ctx, "x")
	require.NoError(t, err)
	require.Equal(t, "1", p.Input.String())
	ttl := r.Client(keys.DBAgentPricing).TTL(ctx, r.Keys().AgentPricing("x")).Val()
	require.InDelta(t, 30*60, ttl.Seconds(), 3*60+1, "30 min with jitter")
	require.NoError(t, db.Exec("UPDATE agent_model_pricing SET input_fen_per_mtok = 9 WHERE model_name = 'x'").Error)
	p, _ = store.NewPrices(db, r).Get(ctx, "x")
	require.Equal(t, "1", p.Input.String(), "served from the cache")
	require.NoError(t, store.NewPrices(db, r).Set(ctx, store.Pricing{Model: "x", Input: dec("2"), Enabled: true}))
	p, _ = store.NewPrices(db, r).Get(ctx, "x")
	require.Equal(t, "2", p.Input.String(), "the change dropped the cache")
	_, err = store.NewPrices(db, r).Get(ctx, "unknown")
	require.ErrorIs(t, err, store.ErrUnknownModel)
	require.Equal(t, "__NONE__", r.Client(keys.DBAgentPricing).Get(ctx, r.Keys().AgentPricing("unknown")).Val(), "unknown names are cached briefly")
}

// A recharge committed to MySQL whose Redis side is not done yet (the
// notify consumer settles it just after its commit, or died in between) is
// spendable at once: a charge that finds the hot balance empty settles the
// user's unsettled recharges and tries again, rather than answer 402 to a
// user whose order already says PAID.
func TestChargeSettlesACommittedRechargeBeforeRefusing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.svc.Charge(ctx, billing.Request{ID: "all", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 10}})
	require.NoError(t, err)
	_, err = b.svc.Charge(ctx, billing.Request{ID: "none", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 1}})
	require.ErrorIs(t, err, billing.ErrNoBalance)

	// What a consumer's commit leaves before its settle: the row and the
	// MySQL balance, the Redis balance untouched.
	var acct store.UserAccount
	require.NoError(t, b.db.Where("username = ?", "alice").Take(&acct).Error)
	require.NoError(t, b.db.Exec("INSERT INTO agent_ledger (username, kind, entry_id, seq, amount_fen, source, occurred_at)"+
		" VALUES ('alice', 'RECHARGE', 'order-1', ?, 500, 'payment', NOW(6))", acct.LedgerSeq+1).Error)
	require.NoError(t, b.db.Exec("UPDATE user_account SET balance_fen = balance_fen + 500, ledger_seq = ledger_seq + 1,"+
		" hot_entries = hot_entries + 1 WHERE username = 'alice'").Error)

	c, err := b.svc.Charge(ctx, billing.Request{ID: "after", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 3}})
	require.NoError(t, err, "the paid recharge is spendable")
	require.Equal(t, "3.00000000", c.Deducted.StringFixed(8))
	require.Equal(t, "497.00000000", c.Balance.StringFixed(8))
	var settled int64
	require.NoError(t, b.db.Model(&store.LedgerEntry{}).Where("entry_id = 'order-1' AND settled_at IS NOT NULL").Count(&settled).Error)
	require.EqualValues(t, 1, settled)

	// Settled once: the consumer's own settle afterwards changes nothing.
	var row store.LedgerEntry
	require.NoError(t, b.db.Where("entry_id = 'order-1'").Take(&row).Error)
	out, err := store.NewBalances(b.db, b.r).SettleCredit(ctx, row)
	require.NoError(t, err)
	require.Equal(t, store.SettleSettled, out)
	bal, err := b.svc.Balance(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, "497.00000000", bal.StringFixed(8))
}

// The payment consumer's own settle may land between a charge that found
// the hot balance empty and the charge's settle of the recharges, which
// then finds nothing left to settle: the money is in the hot balance all
// the same, and the charge must take it rather than answer 402 to a user
// whose order says PAID.
func TestChargeTakesARechargeTheConsumerSettledMeanwhile(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	_, err := b.svc.Charge(ctx, billing.Request{ID: "all", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 10}})
	require.NoError(t, err)

	var acct store.UserAccount
	require.NoError(t, b.db.Where("username = ?", "alice").Take(&acct).Error)
	require.NoError(t, b.db.Exec("INSERT INTO agent_ledger (username, kind, entry_id, seq, amount_fen, source, occurred_at)"+
		" VALUES ('alice', 'RECHARGE', 'order-2', ?, 500, 'payment', NOW(6))", acct.LedgerSeq+1).Error)
	require.NoError(t, b.db.Exec("UPDATE user_account SET balance_fen = balance_fen + 500, ledger_seq = ledger_seq + 1,"+
		" hot_entries = hot_entries + 1 WHERE username = 'alice'").Error)
	billing.SetSettling(b.svc, func() {
		var row store.LedgerEntry
		require.NoError(t, b.db.Where("entry_id = 'order-2'").Take(&row).Error)
		out, err := store.NewBalances(b.db, b.r).SettleCredit(ctx, row) // the consumer's settle
		require.NoError(t, err)
		require.NotEqual(t, store.SettleSettled, out, "the consumer settles it first")
	})

	c, err := b.svc.Charge(ctx, billing.Request{ID: "after", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 3}})
	require.NoError(t, err, "the paid recharge is spendable")
	require.Equal(t, "3.00000000", c.Deducted.StringFixed(8))
	require.Equal(t, "497.00000000", c.Balance.StringFixed(8))
}
