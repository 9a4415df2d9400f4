package store_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// The in-process price cache serves from memory only while it follows the
// change announcements: a change is seen at once, a row changed behind its
// back (no announcement) is not, and a lost subscription sends reads to
// Redis again until it is back.
func TestPriceCacheFollowsAnnouncedChanges(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	ctx := context.Background()
	prices := store.NewPrices(db, r)
	require.NoError(t, prices.Set(ctx, store.Pricing{Model: "m", Input: dec("1"), Enabled: true}))
	// The cache reaches Redis through a proxy, whose connections the test cuts.
	proxy := storetest.NewProxy(t, storetest.RedisAddr())
	viaProxy, err := store.OpenRedis(store.RedisConfig{Addr: proxy.Addr(), KeyPrefix: r.Keys().Prefix()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = viaProxy.Close() })
	cache := store.NewPriceCache(store.NewPrices(db, viaProxy))
	input := func() string {
		p, err := cache.Get(ctx, "m")
		require.NoError(t, err)
		return p.Input.String()
	}
	// behindItsBack changes the row and the Redis copy without announcing it.
	behindItsBack := func(v string) {
		require.NoError(t, db.Exec("UPDATE agent_model_pricing SET input_fen_per_mtok = ? WHERE model_name = 'm'", v).Error)
		require.NoError(t, r.Client(keys.DBAgentPricing).Del(ctx, r.Keys().AgentPricing("m")).Err())
	}

	behindItsBack("2")
	require.Equal(t, "2", input(), "not watching: every read goes to the store")

	watch, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); cache.Watch(watch, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	t.Cleanup(func() { stop(); <-done })
	n := 10
	require.Eventually(t, func() bool {
		first := input()
		n++
		behindItsBack(fmt.Sprint(n))
		return input() == first
	}, 5*time.Second, 20*time.Millisecond, "watching: a read is served from memory")

	require.NoError(t, prices.Set(ctx, store.Pricing{Model: "m", Input: dec("4"), Enabled: true}))
	require.Eventually(t, func() bool { return input() == "4" }, 2*time.Second, 5*time.Millisecond, "an announced change is seen at once")

	_, err = cache.Get(ctx, "nothing")
	require.ErrorIs(t, err, store.ErrUnknownModel)
	_, err = cache.Get(ctx, "nothing")
	require.ErrorIs(t, err, store.ErrUnknownModel, "an unknown model stays unknown from memory")

	// The subscription's connection dies: nothing is served from memory
	// until the cache has subscribed again.
	behindItsBack("5")
	require.Equal(t, "4", input(), "from memory")
	proxy.Cut()
	require.Eventually(t, func() bool { return input() == "5" }, 5*time.Second, 10*time.Millisecond,
		"after the subscription was lost the change behind its back is read")
}
