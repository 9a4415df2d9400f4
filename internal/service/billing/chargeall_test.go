package billing_test

import (
	"context"
	"testing"

	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/store"
	"github.com/stretchr/testify/require"
)

// ChargeAll answers each request as Charge would, in one batch: charged,
// replayed (of an earlier single request, or of an earlier item), a
// conflict, a zero balance, an unknown model or user; a user's requests
// apply in the order given (the first takes what is left, the next finds
// nothing), and a user whose hot balance is missing is initialised once.
func TestChargeAllAnswersEachAsChargeWould(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, u := range []string{"bob", "carol"} {
		_, err := store.NewAccounts(b.db).Create(ctx, u, "", dec("3"))
		require.NoError(t, err)
	}
	single, err := b.svc.Charge(ctx, billing.Request{ID: "s1", Username: "alice", Model: "m", Tokens: billing.Tokens{Input: 1}})
	require.NoError(t, err)
	require.False(t, single.Replayed)

	tok := func(n int64) billing.Tokens { return billing.Tokens{Input: n} }
	res := b.svc.ChargeAll(ctx, []billing.Request{
		{ID: "s1", Username: "alice", Model: "m", Tokens: tok(1)},    // 0: the single request again: a replay
		{ID: "b1", Username: "alice", Model: "m", Tokens: tok(2)},    // 1: charged, 9 → 7
		{ID: "b1", Username: "alice", Model: "m", Tokens: tok(2)},    // 2: the item before, again: a replay
		{ID: "s1", Username: "alice", Model: "m", Tokens: tok(5)},    // 3: s1 with another body: a conflict
		{ID: "c1", Username: "bob", Model: "m", Tokens: tok(2)},      // 4: bob's balance is initialised: 3 → 1
		{ID: "c2", Username: "bob", Model: "m", Tokens: tok(4)},      // 5: capped at what is left: 1 → 0
		{ID: "c3", Username: "bob", Model: "m", Tokens: tok(1)},      // 6: bob's balance is zero
		{ID: "x1", Username: "carol", Model: "nope", Tokens: tok(1)}, // 7: no such model
		{ID: "x2", Username: "ghost", Model: "m", Tokens: tok(1)},    // 8: no such user
		{ID: "z1", Username: "bob", Model: "m", Tokens: tok(0)},      // 9: costs nothing: taken from a zero balance
		{ID: "c4", Username: "carol", Model: "m", Tokens: tok(3)},    // 10: all of carol's
	})
	require.Len(t, res, 11)
	charged := func(i int, deducted, balance string, replayed bool) {
		t.Helper()
		require.NoError(t, res[i].Err, i)
		require.Equal(t, deducted, res[i].Charge.Deducted.StringFixed(8), i)
		require.Equal(t, balance, res[i].Charge.Balance.StringFixed(8), i)
		require.Equal(t, replayed, res[i].Charge.Replayed, i)
	}
	charged(0, "1.00000000", "9.00000000", true)
	charged(1, "2.00000000", "7.00000000", false)
	charged(2, "2.00000000", "7.00000000", true)
	require.ErrorIs(t, res[3].Err, billing.ErrConflict)
	require.Equal(t, "1.00000000", res[3].Charge.Deducted.StringFixed(8), "the first charge of s1")
	charged(4, "2.00000000", "1.00000000", false)
	charged(5, "1.00000000", "0.00000000", false)
	require.ErrorIs(t, res[6].Err, billing.ErrNoBalance)
	require.Equal(t, "1.00000000", res[6].Charge.Cost.StringFixed(8), "the cost is told")
	require.ErrorIs(t, res[7].Err, billing.ErrUnknownModel)
	require.ErrorIs(t, res[8].Err, billing.ErrUnknownUser)
	charged(9, "0.00000000", "0.00000000", false)
	charged(10, "3.00000000", "0.00000000", false)

	again := b.svc.ChargeAll(ctx, []billing.Request{{ID: "b1", Username: "alice", Model: "m", Tokens: tok(2)}, {ID: "c4", Username: "carol", Model: "m", Tokens: tok(3)}})
	for _, r := range again {
		require.NoError(t, r.Err)
		require.True(t, r.Charge.Replayed, "a batch sent again is all replays")
	}
	for user, want := range map[string]string{"alice": "7.00000000", "bob": "0.00000000", "carol": "0.00000000"} {
		bal, err := b.svc.Balance(ctx, user)
		require.NoError(t, err)
		require.Equal(t, want, bal.StringFixed(8), user)
	}
}
