package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// The keys derived for messages without a deduction id stay in their own
// namespace: "msg:" and the id, or "sha256:" and a hash when the id does
// not fit its column or is not UTF-8 (a column would not keep it byte for
// byte).
func TestForeignKeysStayInTheirNamespace(t *testing.T) {
	t.Parallel()
	require.Equal(t, "msg:spring-7", store.ForeignKey("spring-7", 128))
	long := store.ForeignKey(strings.Repeat("x", 125), 128)
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, long)
	require.Equal(t, long, store.ForeignKey(strings.Repeat("x", 125), 128), "stable")
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, store.ForeignKey("bad\xff", 128))
	require.NotEqual(t, store.ForeignKey("bad\xff", 128), store.ForeignKey("bad\xfe", 128))
	for _, k := range []string{store.ForeignKey("x", 128), long, "msg:", "sha256:"} {
		require.True(t, store.IsForeignKey(k), k)
	}
	for _, k := range []string{"r1", "MSG:x", "msg", "x:msg:", "sha256", "islectl:x"} {
		require.False(t, store.IsForeignKey(k), k)
	}
}

// An operator's recharge can never take the ledger key of a paid order's
// or of an opening balance: each credits once, and both apply.
func TestOperatorCreditsNeverShareKeysWithOrders(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "olga", "", dec("5"))
	require.NoError(t, err)
	order, err := order.NewOutTradeNo(time.Now())
	require.NoError(t, err)
	b := store.NewBalances(db, r)
	for _, id := range []string{order, store.OpeningEntryID} {
		res, err := b.Credit(ctx, store.Credit{Username: "olga", ID: store.OperatorCreditID(id), Amount: dec("1"), Source: "islectl"})
		require.NoError(t, err)
		require.True(t, res.Applied, id)
	}
	res, err := b.Credit(ctx, store.Credit{Username: "olga", ID: order, Amount: dec("10"), Source: "payment"}) // the order, paid
	require.NoError(t, err)
	require.True(t, res.Applied, "the paid order is credited")
	require.Equal(t, "islectl:x", store.OperatorCreditID("islectl:x"), "an operator id kept as printed")
	acct, err := store.NewAccounts(db).Get(ctx, "olga")
	require.NoError(t, err)
	require.Equal(t, "17.00000000", acct.BalanceFen.StringFixed(8))
}

// A redelivered message without an id (Debit.SameBody, Usage.SameBody) is
// taken as applied when the user's ledger (the usage events) has a message
// of its body: an id beginning with the prefix, whatever its own part, or
// the key an older build gave such a message (the prefix alone). The
// prefix is a prefix, not a pattern.
func TestRedeliveredMessageWithoutIDMatchesItsBody(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	for _, u := range []string{"ann", "bob"} {
		_, err := store.NewAccounts(db).Create(ctx, u, "", dec("10"))
		require.NoError(t, err)
	}
	ledger := store.NewLedger(db)
	apply := func(d store.Debit) store.DebitResult {
		t.Helper()
		d.Amount, d.SelfSettled = dec("1"), true
		res, err := ledger.ApplyDebits(ctx, []store.Debit{d})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		return res[0]
	}
	first := apply(store.Debit{Username: "ann", ID: "msg:sha256:aaaa:0001"})
	again := apply(store.Debit{Username: "ann", ID: "msg:sha256:aaaa:0002", SameBody: "msg:sha256:aaaa"})
	require.False(t, again.Applied, "the message of its body was applied")
	require.Equal(t, first.Seq, again.Seq)
	require.True(t, apply(store.Debit{Username: "ann", ID: "msg:sha256:aaaa:0003"}).Applied, "a fresh delivery always applies")
	require.True(t, apply(store.Debit{Username: "bob", ID: "msg:sha256:aaaa:0004", SameBody: "msg:sha256:aaaa"}).Applied, "another user's")
	apply(store.Debit{Username: "ann", ID: "msg:sha256:bbbb"}) // an older build's key
	require.False(t, apply(store.Debit{Username: "ann", ID: "msg:sha256:bbbb:0005", SameBody: "msg:sha256:bbbb"}).Applied)
	apply(store.Debit{Username: "ann", ID: "msg:axb:0006"})
	require.True(t, apply(store.Debit{Username: "ann", ID: "msg:a_b:0007", SameBody: "msg:a_b"}).Applied, "_ is no wildcard")
	require.True(t, apply(store.Debit{Username: "ann", ID: "msg:a%:0008", SameBody: "msg:a%"}).Applied, "% is no wildcard")
	require.Equal(t, "4.00000000", account(t, db, "ann").BalanceFen.StringFixed(8), "six applied of eight")

	usage := store.NewUsageStats(db, nil)
	day := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	counted, err := usage.ApplyUsage(ctx, []store.Usage{{RequestID: "msg:sha256:cccc:0001", Model: "m", Day: day}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, counted)
	counted, err = usage.ApplyUsage(ctx, []store.Usage{
		{RequestID: "msg:sha256:cccc:0002", SameBody: "msg:sha256:cccc", Model: "m", Day: day},
		{RequestID: "msg:sha256:cccc:0003", Model: "m", Day: day},
		{RequestID: "msg:sha256:dddd:0004", SameBody: "msg:sha256:dddd", Model: "m", Day: day},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{false, true, true}, counted)
}

// A redelivery comes within RedeliveryHorizon of its first delivery's
// handling: a row of its body written longer ago is another message's (a
// real equal one), not its own, and does not stop it.
func TestRedeliveredMessageWithoutIDLooksOnlyWithinTheHorizon(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "ann", "", dec("10"))
	require.NoError(t, err)
	ledger := store.NewLedger(db)
	apply := func(d store.Debit) store.DebitResult {
		t.Helper()
		d.Amount, d.SelfSettled = dec("1"), true
		res, err := ledger.ApplyDebits(ctx, []store.Debit{d})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		return res[0]
	}
	old := time.Now().Add(-store.RedeliveryHorizon - time.Minute)
	apply(store.Debit{Username: "ann", ID: "msg:sha256:aaaa:0001"})
	require.NoError(t, db.Exec("UPDATE agent_ledger SET created_at = ? WHERE entry_id = ?", old, "msg:sha256:aaaa:0001").Error)
	require.True(t, apply(store.Debit{Username: "ann", ID: "msg:sha256:aaaa:0002", SameBody: "msg:sha256:aaaa"}).Applied,
		"the only row of its body is older than the horizon")
	require.False(t, apply(store.Debit{Username: "ann", ID: "msg:sha256:aaaa:0003", SameBody: "msg:sha256:aaaa"}).Applied,
		"a row of its body within the horizon")

	usage := store.NewUsageStats(db, nil)
	day := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	_, err = usage.ApplyUsage(ctx, []store.Usage{{RequestID: "msg:sha256:cccc:0001", Model: "m", Day: day}})
	require.NoError(t, err)
	require.NoError(t, db.Exec("UPDATE agent_usage_event SET created_at = ? WHERE request_id = ?", old, "msg:sha256:cccc:0001").Error)
	counted, err := usage.ApplyUsage(ctx, []store.Usage{{RequestID: "msg:sha256:cccc:0002", SameBody: "msg:sha256:cccc", Model: "m", Day: day}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, counted, "the only usage of its body is older than the horizon")
}
