package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

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
	order, err := store.NewOutTradeNo(time.Now())
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
