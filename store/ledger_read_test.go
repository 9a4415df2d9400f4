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

// The operator's reads of the ledger: the last id as a mark, the rows
// after it by user and kind, entries counted by prefix (a LIKE wildcard in
// the prefix is a character, not a pattern) and totalled by id.
func TestLedgerReadsAfterAMark(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	l := store.NewLedger(db)
	mark, err := l.LastID(ctx)
	require.NoError(t, err)
	require.Zero(t, mark, "an empty ledger")
	for _, u := range []string{"alice", "bob"} {
		_, err := store.NewAccounts(db).Create(ctx, u, "", dec("10"))
		require.NoError(t, err)
	}
	mark, err = l.LastID(ctx)
	require.NoError(t, err)
	require.Positive(t, mark)
	for _, id := range []string{"run_1-a", "run_1-b", "runx1-c"} {
		_, err := l.ApplyDebits(ctx, []store.Debit{{Username: "alice", ID: id, Amount: dec("0.5")}})
		require.NoError(t, err)
	}
	_, err = l.ApplyDebits(ctx, []store.Debit{{Username: "bob", ID: "run_1-d", Amount: dec("2")}})
	require.NoError(t, err)

	n, err := l.CountEntries(ctx, store.LedgerDeduct, "run_1-", 0)
	require.NoError(t, err)
	require.EqualValues(t, 3, n, "runx1-c does not match run_1-")
	n, err = l.CountEntries(ctx, store.LedgerRecharge, "", mark)
	require.NoError(t, err)
	require.Zero(t, n, "the opening balances are before the mark")

	total, err := l.TotalOf(ctx, store.LedgerDeduct, []string{"run_1-a", "run_1-d", "missing"})
	require.NoError(t, err)
	require.Equal(t, 2, total.Rows)
	require.True(t, dec("-2.5").Equal(total.Fen), total.Fen.String())

	moved, err := l.MovedSince(ctx, mark, []string{"alice", "bob", "carol"})
	require.NoError(t, err)
	byUser := map[string]string{}
	for _, m := range moved {
		require.Equal(t, store.LedgerDeduct, m.Kind)
		byUser[m.Username] = m.Fen.String()
	}
	require.Equal(t, map[string]string{"alice": "-1.5", "bob": "-2"}, byUser)

	accounts, err := store.NewAccounts(db).List(ctx, []string{"alice", "carol"})
	require.NoError(t, err)
	require.Len(t, accounts, 1)
	require.Equal(t, "alice", accounts[0].Username)
}
