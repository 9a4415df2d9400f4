package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestRedisSentinelNeedsTheMasterName(t *testing.T) {
	t.Parallel()
	_, err := store.OpenRedis(store.RedisConfig{SentinelAddrs: []string{"127.0.0.1:26379"}})
	require.ErrorIs(t, err, store.ErrNoSentinelMaster)
}

// openSentinel opens store.Redis on the group through its Sentinels.
func openSentinel(t *testing.T, s *storetest.Sentinel) *store.Redis {
	t.Helper()
	r, err := store.OpenRedis(store.RedisConfig{
		SentinelAddrs:  s.Addrs(),
		SentinelMaster: storetest.SentinelMaster,
		Password:       storetest.SentinelPassword,
		KeyPrefix:      "sentineltest:",
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	require.NoError(t, r.Ping(t.Context()))
	return r
}

// Through Sentinel each logical database is still its own index on the
// master.
func TestRedisSentinelLogicalDatabases(t *testing.T) {
	t.Parallel()
	s := storetest.StartSentinel(t)
	r := openSentinel(t, s)
	ctx := t.Context()
	key := r.Keys().Prefix() + "k"

	require.NoError(t, r.Client(keys.DBPayment).Set(ctx, key, "payment", 0).Err())
	require.NoError(t, r.Client(keys.DBMiniGame).Set(ctx, key, "game", 0).Err())
	got, err := r.Client(keys.DBPayment).Get(ctx, key).Result()
	require.NoError(t, err)
	require.Equal(t, "payment", got)
	got, err = r.Client(keys.DBMiniGame).Get(ctx, key).Result()
	require.NoError(t, err)
	require.Equal(t, "game", got)

	// The master itself holds them at the contract's indexes.
	master, err := s.MasterAddr(ctx)
	require.NoError(t, err)
	for db, want := range map[keys.DB]string{keys.DBPayment: "payment", keys.DBMiniGame: "game"} {
		c := redis.NewClient(&redis.Options{Addr: master, Password: storetest.SentinelPassword, DB: db.DefaultIndex()})
		got, err := c.Get(ctx, key).Result()
		_ = c.Close()
		require.NoError(t, err, db.EnvVar())
		require.Equal(t, want, got, db.EnvVar())
	}
}

// After the master dies and the Sentinels promote the replica, the same
// store.Redis writes to the new master, and what was replicated before is
// there.
func TestRedisSentinelFailover(t *testing.T) {
	t.Parallel()
	s := storetest.StartSentinel(t)
	r := openSentinel(t, s)
	ctx := t.Context()
	c := r.Client(keys.DBAgentBilling)
	before := r.Keys().Prefix() + "before"
	after := r.Keys().Prefix() + "after"

	require.NoError(t, c.Set(ctx, before, "kept", 0).Err())
	replicas, err := c.Wait(ctx, 1, 0).Result()
	require.NoError(t, err)
	require.EqualValues(t, 1, replicas, "the write reached the replica")

	old, err := s.MasterAddr(ctx)
	require.NoError(t, err)
	killed := time.Now()
	s.Kill(old)
	promoted := s.WaitFailover(old)
	t.Logf("Sentinel promoted %s %v after %s was killed", promoted, time.Since(killed).Round(time.Millisecond), old)

	// Connections to the dead master fail until the client has asked the
	// Sentinels again: retry the write until it lands, within the same
	// ceiling as the failover.
	require.Eventually(t, func() bool {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return c.Set(wctx, after, "written", 0).Err() == nil
	}, time.Minute, 50*time.Millisecond, "no write through the new master")
	t.Logf("the client wrote again %v after the kill", time.Since(killed).Round(time.Millisecond))

	for key, want := range map[string]string{before: "kept", after: "written"} {
		got, err := c.Get(ctx, key).Result()
		require.NoError(t, err, key)
		require.Equal(t, want, got, key)
	}
	// And the client is on the promoted replica.
	direct := redis.NewClient(&redis.Options{Addr: promoted, Password: storetest.SentinelPassword, DB: keys.DBAgentBilling.DefaultIndex()})
	defer direct.Close()
	got, err := direct.Get(ctx, after).Result()
	require.NoError(t, err)
	require.Equal(t, "written", got)
}
