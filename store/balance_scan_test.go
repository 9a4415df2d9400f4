package store_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

func TestCleanLateRemovesOldEntriesOfMissingBalances(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	c := r.Client(keys.DBAgentBilling)
	kb := r.Keys()
	now := time.Now()
	entry := func(at time.Time) string { return "D|1.00000000|7|" + strconv.FormatInt(at.UnixMilli(), 10) }
	old, fresh := entry(now.Add(-2*time.Hour)), entry(now.Add(-time.Minute))

	// kept: its balance exists, so its initialisation consumed the hash.
	require.NoError(t, c.Set(ctx, kb.AgentBalance("kept"), "5.00000000", 0).Err())
	require.NoError(t, c.HSet(ctx, kb.AgentBalanceLate("kept"), "a", old).Err())
	// gone: no balance; the old and the unreadable entries go, the fresh one stays.
	require.NoError(t, c.HSet(ctx, kb.AgentBalanceLate("gone"), "a", old, "b", fresh, "c", "D|1|7|soon").Err())
	// other: no balance, only an old entry.
	require.NoError(t, c.HSet(ctx, kb.AgentBalanceLate("other"), "a", old).Err())

	n, bad, err := store.NewBalances(nil, r).CleanLate(ctx, []string{"kept", "gone", "other", "nobody"}, time.Hour, now)
	require.Empty(t, bad)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	for user, want := range map[string][]string{"kept": {"a"}, "gone": {"b"}, "other": nil} {
		fields, err := c.HKeys(ctx, kb.AgentBalanceLate(user)).Result()
		require.NoError(t, err)
		require.ElementsMatch(t, want, fields, user)
	}

	n, _, err = store.NewBalances(nil, r).CleanLate(ctx, []string{"kept", "gone", "other"}, time.Hour, now)
	require.NoError(t, err)
	require.Zero(t, n, "nothing old is left")
}

func TestPendingOfListsUsersWithPendingDeductionsOnly(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	c := r.Client(keys.DBAgentBilling)
	require.NoError(t, c.HSet(ctx, r.Keys().AgentPending("alice"), "d1", "1.50000000|1700000000000").Err())

	got, bad, err := store.NewBalances(nil, r).PendingOf(ctx, []string{"alice", "bob"})
	require.NoError(t, err)
	require.Empty(t, bad)
	require.Len(t, got, 1)
	require.Len(t, got["alice"], 1)
	require.Equal(t, "d1", got["alice"][0].ID)
	require.Equal(t, "1.5", got["alice"][0].Deducted.String())
	require.Equal(t, int64(1700000000000), got["alice"][0].At.UnixMilli())

	require.NoError(t, c.HSet(ctx, r.Keys().AgentPending("bob"), "d2", "oops").Err())
	got, bad, err = store.NewBalances(nil, r).PendingOf(ctx, []string{"bob", "alice"})
	require.NoError(t, err, "one user's bad entry is that user's error")
	require.EqualError(t, bad["bob"], `store: pending deduction d2 of bob: malformed entry "oops"`)
	require.Len(t, got["alice"], 1)
	_, err = store.NewBalances(nil, r).Pending(ctx, "bob")
	require.EqualError(t, err, `store: pending deduction d2 of bob: malformed entry "oops"`)
}

func TestWipeEmptiesEveryDatabase(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	for _, db := range keys.DBs() {
		require.NoError(t, r.Client(db).Set(ctx, r.Keys().Prefix()+"x:"+db.EnvVar(), "v", 0).Err())
	}
	storetest.Wipe(t, r)
	for _, db := range keys.DBs() {
		n, err := r.Client(db).Exists(ctx, r.Keys().Prefix()+"x:"+db.EnvVar()).Result()
		require.NoError(t, err)
		require.Zero(t, n, db.EnvVar())
	}
}
