package keyclean_test

import (
	"context"
	"testing"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keyclean"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

func TestCleanVolatileDeletesCachesOnly(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	kb := r.Keys()
	set := func(f *keys.Family, values ...string) string {
		k := kb.Key(f, values...)
		require.NoError(t, r.Client(f.DB).Set(ctx, k, "v", 0).Err())
		return k
	}
	volatile := []string{
		set(keys.AgentPricing, "deepseek-chat"),
		set(keys.HighScore, "2048", "7"),
		set(keys.UserMeta, "2048", "7"),
		set(keys.IdentityVerified, "alice"),
	}
	persistent := []string{
		set(keys.AgentBalance, "alice"),
		set(keys.AgentPending, "alice"),
		set(keys.AgentUsage, "deepseek-chat"),
		set(keys.Leaderboard, "2048"),
		set(keys.ScoreSubmitOnce, "s1"),
		set(keys.NotifyDone, "ALIPAY", "o1", "t1"),
		set(keys.BanSet),
		set(keys.LeaderLease, "balance-sync"),
	}
	legacy := kb.Prefix() + "legacy:pricing:x"
	require.NoError(t, r.Client(keys.DBAgentPricing).Set(ctx, legacy, "v", 0).Err())
	extra, err := keyclean.ParsePattern("13/legacy:*", nil)
	require.NoError(t, err)

	res, err := keyclean.Volatile(ctx, r, []keyclean.Pattern{extra})
	require.NoError(t, err)
	var n int64
	for _, c := range res {
		n += c
	}
	require.EqualValues(t, len(volatile)+1, n)
	for _, k := range volatile {
		require.Zero(t, r.Client(keys.DBDefault).Exists(ctx, k).Val()+existsAnywhere(t, r, k), k)
	}
	require.Zero(t, existsAnywhere(t, r, legacy))
	for _, k := range persistent {
		require.EqualValues(t, 1, existsAnywhere(t, r, k), "%s must survive", k)
	}
}

func existsAnywhere(t *testing.T, r *store.Redis, key string) int64 {
	t.Helper()
	var n int64
	seen := map[int]bool{}
	for _, db := range keys.DBs() {
		if seen[db.DefaultIndex()] {
			continue
		}
		seen[db.DefaultIndex()] = true
		n += r.Client(db).Exists(context.Background(), key).Val()
	}
	return n
}

func TestCleanupPatternsCannotReachPersistentKeys(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"12/agent:*", "12/*", "12/agent:balance:x*", "13/agent:u*", "9/user:ban:bloom", "0/isle:*", "x/y", "13", "99/x:*"} {
		_, err := keyclean.ParsePattern(bad, nil)
		require.Error(t, err, bad)
	}
	for _, ok := range []string{"13/agent:pricing:*", "13/legacy:*", "12/tmp:*"} {
		_, err := keyclean.ParsePattern(ok, nil)
		require.NoError(t, err, ok)
	}
	// The guard follows the configured indexes.
	_, err := keyclean.ParsePattern("5/agent:*", map[keys.DB]int{keys.DBAgentBilling: 5})
	require.Error(t, err)
}
