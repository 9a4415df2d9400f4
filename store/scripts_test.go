package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

func deduct(t *testing.T, r *store.Redis, user, id, amount string) (store.Taken, error) {
	t.Helper()
	return store.NewBalances(nil, r).Deduct(context.Background(), store.DeductRequest{Username: user, ID: id, Amount: dec(amount), Now: time.UnixMilli(1700000000000)})
}

func balance(t *testing.T, r *store.Redis, user string) string {
	t.Helper()
	v, err := r.Client(keys.DBAgentBilling).Get(context.Background(), r.Keys().AgentBalance(user)).Result()
	require.NoError(t, err)
	return v
}

func TestDeductMissingKey(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	_, err := deduct(t, r, "alice", "r1", "1")
	require.ErrorIs(t, err, store.ErrBalanceMissing)

	set, err := store.NewBalances(nil, r).Init(context.Background(), "alice", store.BalanceRead{Balance: dec("10")})
	require.NoError(t, err)
	require.True(t, set)
	set, err = store.NewBalances(nil, r).Init(context.Background(), "alice", store.BalanceRead{Balance: dec("99")})
	require.NoError(t, err)
	require.False(t, set, "SETNX keeps the first value")
	require.Equal(t, "10.00000000", balance(t, r, "alice"))
}

func TestDeductZeroBalance(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	_, err := store.NewBalances(nil, r).Init(context.Background(), "bob", store.BalanceRead{Balance: decimal.Zero})
	require.NoError(t, err)
	_, err = deduct(t, r, "bob", "r1", "0.5")
	require.ErrorIs(t, err, store.ErrBalanceEmpty)
	require.Equal(t, "0.00000000", balance(t, r, "bob"))
	pending, err := store.NewBalances(nil, r).Pending(context.Background(), "bob")
	require.NoError(t, err)
	require.Empty(t, pending, "a refused deduction records nothing")
}

func TestDeductNormalAndPending(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	_, err := store.NewBalances(nil, r).Init(context.Background(), "carol", store.BalanceRead{Balance: dec("1234.56789012")})
	require.NoError(t, err)
	d, err := deduct(t, r, "carol", "r1", "0.00120000")
	require.NoError(t, err)
	require.Equal(t, "1234.56669012", d.Balance.StringFixed(8))
	require.Equal(t, "0.00120000", d.Deducted.StringFixed(8))
	require.False(t, d.Replayed)
	require.Equal(t, "1234.56669012", balance(t, r, "carol"))

	pending, err := store.NewBalances(nil, r).Pending(context.Background(), "carol")
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, "r1", pending[0].ID)
	require.True(t, pending[0].Deducted.Equal(dec("0.0012")))
	require.Equal(t, int64(1700000000000), pending[0].At.UnixMilli())
}

func TestDeductCapsAtZero(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	_, err := store.NewBalances(nil, r).Init(context.Background(), "dave", store.BalanceRead{Balance: dec("0.3")})
	require.NoError(t, err)
	d, err := deduct(t, r, "dave", "r1", "1.25")
	require.NoError(t, err)
	require.Equal(t, "0.00000000", d.Balance.StringFixed(8))
	require.Equal(t, "0.30000000", d.Deducted.StringFixed(8), "only what was there is taken")
	_, err = deduct(t, r, "dave", "r2", "1")
	require.ErrorIs(t, err, store.ErrBalanceEmpty)
}

func TestDeductSameIDOnce(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	_, err := store.NewBalances(nil, r).Init(context.Background(), "erin", store.BalanceRead{Balance: dec("5")})
	require.NoError(t, err)
	first, err := deduct(t, r, "erin", "req-7", "2")
	require.NoError(t, err)
	again, err := deduct(t, r, "erin", "req-7", "2")
	require.NoError(t, err)
	require.True(t, again.Replayed)
	require.True(t, first.Balance.Equal(again.Balance))
	require.True(t, first.Deducted.Equal(again.Deducted))
	require.Equal(t, "3.00000000", balance(t, r, "erin"))

	// Concurrent duplicates: still one deduction.
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			_, err := deduct(t, r, "erin", "req-8", "1")
			require.NoError(t, err)
		})
	}
	wg.Wait()
	require.Equal(t, "2.00000000", balance(t, r, "erin"))
	// The id is scoped to the user.
	_, err = store.NewBalances(nil, r).Init(context.Background(), "frank", store.BalanceRead{Balance: dec("1")})
	require.NoError(t, err)
	d, err := deduct(t, r, "frank", "req-7", "1")
	require.NoError(t, err)
	require.False(t, d.Replayed)
}

// Balances are exact to the 8th decimal even past a double's 15-16 digits.
func TestDeductIsExactForLargeBalances(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	_, err := store.NewBalances(nil, r).Init(context.Background(), "gina", store.BalanceRead{Balance: dec("999999999999.99999999")})
	require.NoError(t, err)
	d, err := deduct(t, r, "gina", "r1", "0.00000001")
	require.NoError(t, err)
	require.Equal(t, "999999999999.99999998", d.Balance.StringFixed(8))
	d, err = deduct(t, r, "gina", "r2", "123456789012.34567891")
	require.NoError(t, err)
	require.Equal(t, "876543210987.65432107", d.Balance.StringFixed(8))
	// Borrowing across the decimal point.
	d, err = deduct(t, r, "gina", "r3", "0.65432108")
	require.NoError(t, err)
	require.Equal(t, "876543210986.99999999", d.Balance.StringFixed(8))
}

func TestDeductMalformed(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	_, err := deduct(t, r, "hank", "r1", "-1")
	require.ErrorIs(t, err, store.ErrBalanceMalformed)
	require.NoError(t, r.Client(keys.DBAgentBilling).Set(ctx, r.Keys().AgentBalance("hank"), "12abc", 0).Err())
	_, err = deduct(t, r, "hank", "r2", "1")
	require.ErrorIs(t, err, store.ErrBalanceMalformed)
	require.Equal(t, "12abc", balance(t, r, "hank"), "nothing changed")
}

// After the server loses its script cache (as after a restart), Run falls back to EVAL.
func TestScriptsSurviveScriptFlush(t *testing.T) {
	r := storetest.Redis(t)
	ctx := context.Background()
	_, err := store.NewBalances(nil, r).Init(ctx, "ivy", store.BalanceRead{Balance: dec("2")})
	require.NoError(t, err)
	_, err = deduct(t, r, "ivy", "r1", "1")
	require.NoError(t, err)
	require.NoError(t, r.Client(keys.DBAgentBilling).ScriptFlush(ctx).Err())
	d, err := deduct(t, r, "ivy", "r2", "1")
	require.NoError(t, err)
	require.Equal(t, "0.00000000", d.Balance.StringFixed(8))
}

// Settle pipelines EVALSHA, which does not fall back by itself: it loads
// the script after NOSCRIPT and goes again.
func TestSettleSurvivesScriptFlush(t *testing.T) {
	r := storetest.Redis(t)
	ctx := context.Background()
	require.NoError(t, r.Client(keys.DBAgentBilling).ScriptFlush(ctx).Err())
	out, err := store.NewBalances(nil, r).Settle(ctx, store.SettleEntry{Username: "jay", Kind: store.SettleCredit, EntryID: "c1", Amount: dec("1"), Seq: 1})
	require.NoError(t, err)
	require.Equal(t, store.SettleLate, out[0].Outcome, "no balance: kept for its initialisation")
}

func TestDeductMarkerAnswersReplayOrConflict(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	_, err := store.NewBalances(nil, r).Init(ctx, "ivy", store.BalanceRead{Balance: dec("10")})
	require.NoError(t, err)
	taken := func(tk store.Taken) string {
		return fmt.Sprintf("balance %s deducted %s replayed %t ref %q", tk.Balance.StringFixed(8), tk.Deducted.StringFixed(8), tk.Replayed, tk.Ref)
	}
	req := store.DeductRequest{Username: "ivy", ID: "r1", Amount: dec("3"), Now: time.UnixMilli(1700000000000), Ref: "aaaa", RequestHash: "h1",
		Usage: &store.UsageData{Model: "m", Input: 3, CostMF: 300000000}}
	got, err := store.NewBalances(nil, r).Deduct(ctx, req)
	require.NoError(t, err)
	require.Equal(t, `balance 7.00000000 deducted 3.00000000 replayed false ref "aaaa"`, taken(got))
	pending, err := store.NewBalances(nil, r).Pending(ctx, "ivy")
	require.NoError(t, err)
	require.Len(t, pending, 1)
	p := pending[0]
	require.Equal(t, "r1 3.00000000 1700000000000 aaaa h1", fmt.Sprintf("%s %s %d %s %s", p.ID, p.Deducted.StringFixed(8), p.At.UnixMilli(), p.Ref, p.RequestHash))
	require.Equal(t, &store.UsageData{Model: "m", Input: 3, CostMF: 300000000}, p.Usage)

	req.Ref = "bbbb" // a client's retry draws a new ref; the first charge's comes back
	got, err = store.NewBalances(nil, r).Deduct(ctx, req)
	require.NoError(t, err)
	require.Equal(t, `balance 7.00000000 deducted 3.00000000 replayed true ref "aaaa"`, taken(got))

	req.RequestHash, req.Amount = "h2", dec("5")
	got, err = store.NewBalances(nil, r).Deduct(ctx, req)
	require.ErrorIs(t, err, store.ErrRequestConflict)
	require.Equal(t, "3.00000000", got.Deducted.StringFixed(8), "the first charge")
	require.Equal(t, "7.00000000", balance(t, r, "ivy"), "nothing taken")

	c := r.Client(keys.DBAgentBilling)
	require.NoError(t, c.Set(ctx, r.Keys().AgentDeduction("ivy", "old"), "2.50000000", time.Hour).Err())
	got, err = store.NewBalances(nil, r).Deduct(ctx, store.DeductRequest{Username: "ivy", ID: "old", Amount: dec("9"), Now: time.Now(), Ref: "cccc", RequestHash: "h9"})
	require.NoError(t, err, "an older marker knows no hash: a replay")
	require.Equal(t, `balance 7.00000000 deducted 2.50000000 replayed true ref ""`, taken(got))
}

// While a deduction is pending, its record proves the charge: a retry
// whose marker is gone (expired while the worker was down, or deleted) is
// a replay, never a second charge that would overwrite the record.
func TestPendingRecordAnswersAReplayWithoutTheMarker(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	_, err := store.NewBalances(nil, r).Init(ctx, "jan", store.BalanceRead{Balance: dec("10")})
	require.NoError(t, err)
	req := store.DeductRequest{Username: "jan", ID: "r1", Amount: dec("3"), Now: time.Now(), Ref: "aaaa", RequestHash: "h1"}
	_, err = store.NewBalances(nil, r).Deduct(ctx, req)
	require.NoError(t, err)
	require.NoError(t, r.Client(keys.DBAgentBilling).Del(ctx, r.Keys().AgentDeduction("jan", "r1")).Err())

	req.Ref = "bbbb"
	got, err := store.NewBalances(nil, r).Deduct(ctx, req)
	require.NoError(t, err)
	require.True(t, got.Replayed)
	require.Equal(t, "aaaa", got.Ref)
	require.Equal(t, "7.00000000", balance(t, r, "jan"), "taken once")
	req.RequestHash = "h2"
	_, err = store.NewBalances(nil, r).Deduct(ctx, req)
	require.ErrorIs(t, err, store.ErrRequestConflict)
	pending, err := store.NewBalances(nil, r).Pending(ctx, "jan")
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.Equal(t, "aaaa", pending[0].Ref, "the first charge's record is kept")
}

// A balance someone else initialised (a Spring producer's SETNX from MySQL)
// has no count of the ledger entries it reflects; settling into it must
// leave the count unknown — balance-sync then rebuilds it — rather than
// start one at 1, which would read as more entries than MySQL holds.
func TestSettleLeavesAnUnknownEntryCountUnknown(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	c := r.Client(keys.DBAgentBilling)
	require.NoError(t, c.Set(ctx, r.Keys().AgentBalance("kim"), "10.00000000", 0).Err())
	_, err := store.NewBalances(nil, r).Deduct(ctx, store.DeductRequest{Username: "kim", ID: "r1", Amount: dec("3"), Now: time.Now(), Ref: "aaaa"})
	require.NoError(t, err)
	out, err := store.NewBalances(nil, r).Settle(ctx, store.SettleEntry{Username: "kim", Kind: store.SettleDeduction, EntryID: "r1", Amount: dec("3"), Seq: 1, Ref: "aaaa"},
		store.SettleEntry{Username: "kim", Kind: store.SettleCredit, EntryID: "c1", Amount: dec("1"), Seq: 2})
	require.NoError(t, err)
	require.Equal(t, store.SettleCleared, out[0].Outcome)
	require.Equal(t, store.SettleApplied, out[1].Outcome)
	n, err := c.Exists(ctx, r.Keys().AgentBalanceEntries("kim")).Result()
	require.NoError(t, err)
	require.Zero(t, n, "still unknown")
	h, err := store.NewBalances(nil, r).Hot(ctx, []string{"kim"})
	require.NoError(t, err)
	require.False(t, h["kim"].EntriesKnown)
}

// A replay answers what the first charge cost (its price then), also when
// the balance capped what it took: from the marker, which a resettle of the
// same charge keeps; from the pending record while the marker is gone; and,
// once Redis knows neither, what the charge took.
func TestReplayAnswersTheFirstChargesCost(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	b := store.NewBalances(nil, r)
	_, err := b.Init(ctx, "lou", store.BalanceRead{Balance: dec("2")})
	require.NoError(t, err)
	req := store.DeductRequest{Username: "lou", ID: "r1", Amount: dec("5"), Now: time.Now(), Ref: "aaaa", RequestHash: "h1",
		Usage: &store.UsageData{Model: "m", Input: 5, CostMF: 500000000}}
	got, err := b.Deduct(ctx, req)
	require.NoError(t, err)
	require.Equal(t, "2.00000000 5.00000000", got.Deducted.StringFixed(8)+" "+got.Cost.StringFixed(8), "capped at the balance")
	replay := func(why string) string {
		t.Helper()
		got, err := b.Deduct(ctx, req)
		require.NoError(t, err, why)
		require.True(t, got.Replayed, why)
		return got.Deducted.StringFixed(8) + " " + got.Cost.StringFixed(8)
	}
	require.Equal(t, "2.00000000 5.00000000", replay("the marker"))

	row := store.SettleEntry{Username: "lou", Kind: store.SettleDeduction, EntryID: "r1", Amount: dec("2"), Seq: 1, Ref: "aaaa", RequestHash: "h1"}
	out, err := b.Settle(ctx, row)
	require.NoError(t, err)
	require.Equal(t, store.SettleCleared, out[0].Outcome)
	_, err = b.Resettle(ctx, row) // a redelivery of its message
	require.NoError(t, err)
	require.Equal(t, "2.00000000 5.00000000", replay("a resettle of the same charge keeps the marker"))

	// A record whose marker is gone answers with the usage it keeps.
	req.ID = "r2"
	require.NoError(t, r.Client(keys.DBAgentBilling).Set(ctx, r.Keys().AgentBalance("lou"), "1.00000000", 0).Err())
	_, err = b.Deduct(ctx, req)
	require.NoError(t, err)
	require.NoError(t, r.Client(keys.DBAgentBilling).Del(ctx, r.Keys().AgentDeduction("lou", "r2")).Err())
	require.Equal(t, "1.00000000 5.00000000", replay("the pending record"))

	// A marker restored from the ledger knows what the charge took only.
	require.NoError(t, r.Client(keys.DBAgentBilling).Set(ctx, r.Keys().AgentDeduction("lou", "r2"), "1.00000000|aaaa|h1", time.Hour).Err())
	require.NoError(t, r.Client(keys.DBAgentBilling).HDel(ctx, r.Keys().AgentPending("lou"), "r2").Err())
	require.Equal(t, "1.00000000 1.00000000", replay("a restored marker"))
}

// A request that costs nothing takes nothing and leaves nothing pending,
// also on an empty balance, but its id answers a replay or a conflict.
func TestZeroAmountHoldsTheID(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	b := store.NewBalances(nil, r)
	_, err := b.Init(ctx, "max", store.BalanceRead{Balance: dec("0")})
	require.NoError(t, err)
	req := store.DeductRequest{Username: "max", ID: "z1", Amount: dec("0"), Now: time.Now(), Ref: "aaaa", RequestHash: "h1"}
	got, err := b.Deduct(ctx, req)
	require.NoError(t, err)
	require.False(t, got.Replayed)
	require.True(t, got.Deducted.IsZero())
	pending, err := b.Pending(ctx, "max")
	require.NoError(t, err)
	require.Empty(t, pending)
	got, err = b.Deduct(ctx, req)
	require.NoError(t, err)
	require.True(t, got.Replayed)
	req.RequestHash, req.Amount = "h2", dec("1")
	_, err = b.Deduct(ctx, req)
	require.ErrorIs(t, err, store.ErrRequestConflict)
	_, err = b.Deduct(ctx, store.DeductRequest{Username: "max", ID: "z2", Amount: dec("-1"), Now: time.Now()})
	require.ErrorIs(t, err, store.ErrBalanceMalformed)
	require.Equal(t, "0.00000000", balance(t, r, "max"))
}
