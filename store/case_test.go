package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// Usernames and ids are compared byte for byte in MySQL as they are in
// Redis keys: under a case-insensitive collation "Alice" initialised a
// second hot balance from alice's account, and "Req1" after "req1" failed
// its ledger insert forever.
func TestKeysAreCaseSensitive(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "alice", "", dec("10"))
	require.NoError(t, err)

	_, err = store.NewBalances(db, r).Ensure(ctx, "Alice")
	require.ErrorIs(t, err, store.ErrUnknownUser, "Alice is not alice")

	res, err := store.NewLedger(db).ApplyDebits(ctx, []store.Debit{
		{Username: "alice", ID: "req1", Amount: dec("1")},
		{Username: "alice", ID: "Req1", Amount: dec("2")},
	})
	require.NoError(t, err)
	require.True(t, res[0].Applied)
	require.True(t, res[1].Applied, "a different request id")
	require.Equal(t, "7.00000000", account(t, db, "alice").BalanceFen.StringFixed(8))

	day := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	counted, err := store.NewUsageStats(db, nil).ApplyUsage(ctx, []store.Usage{
		{RequestID: "alice:u1", Model: "m", Day: day, InputTokens: 1},
		{RequestID: "alice:U1", Model: "m", Day: day, InputTokens: 1},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, counted)

	_, err = store.NewAccounts(db).Create(ctx, "Alice", "", dec("5"))
	require.NoError(t, err, "a different user")
}
