package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

func TestLedgerRecentIsNewestFirstPerUser(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	for _, u := range []string{"alice", "bob"} {
		_, err := store.NewAccounts(db).Create(ctx, u, "", dec("10"))
		require.NoError(t, err)
	}
	for i := range 5 {
		_, err := store.NewLedger(db).ApplyDebits(ctx, []store.Debit{{Username: "alice", ID: fmt.Sprint("d", i), Amount: dec("0.5")}})
		require.NoError(t, err)
	}
	rows, err := store.NewLedger(db).Recent(ctx, "alice", 3)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	for i, r := range rows {
		require.Equal(t, "alice", r.Username)
		require.EqualValues(t, 6-i, r.Seq, "newest first")
	}
	rows, err = store.NewLedger(db).Recent(ctx, "bob", 10)
	require.NoError(t, err)
	require.Len(t, rows, 1, "the opening balance")
	require.Equal(t, store.LedgerRecharge, rows[0].Kind)
}
