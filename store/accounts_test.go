package store_test

import (
	"context"
	"testing"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// Created finds accounts as the ledger matches a debit to one: byte for
// byte, so a name that differs by case or trailing spaces names none.
func TestCreatedMatchesNamesByteForByte(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	acct, err := store.NewAccounts(db).Create(ctx, "ann", "", dec("1"))
	require.NoError(t, err)
	got, err := store.NewAccounts(db).Created(ctx, []string{"ann", "ann ", "Ann", "bob", "ann"})
	require.NoError(t, err)
	require.Len(t, got, 1)
	stored, err := store.NewAccounts(db).Get(ctx, acct.Username)
	require.NoError(t, err)
	require.True(t, got["ann"].Equal(stored.CreatedAt))

	res, err := store.NewLedger(db).ApplyDebits(ctx, []store.Debit{{Username: "ann ", ID: "d1", Amount: dec("1")}})
	require.NoError(t, err)
	require.Error(t, res[0].Err, "the ledger applies no debit of \"ann \" to ann either")
	require.False(t, res[0].Applied)
}
