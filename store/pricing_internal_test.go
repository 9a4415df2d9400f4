package store

import (
	"cmp"
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// A reader that read a row before a writer changed it must not cache its
// stale copy after the writer fenced the key (the cache-aside race).
func TestCacheFillRespectsTheFence(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis: not run with -short") // storetest.Services would import store: a cycle here
	}
	t.Parallel()
	addr := cmp.Or(os.Getenv("ISLE_TEST_REDIS_ADDR"), "127.0.0.1:6379") // storetest would import store: a cycle here
	c := redis.NewClient(&redis.Options{Addr: addr, DB: keys.DBAgentPricing.DefaultIndex()})
	defer c.Close()
	ctx := context.Background()
	key := "isletest:fence:" + strconv.FormatInt(time.Now().UnixNano(), 10)
	defer c.Del(ctx, key)

	require.NoError(t, c.Set(ctx, key, fencePrefix+"2000", time.Minute).Err()) // the writer's change, version 2000
	n, err := cacheFillScript.Run(ctx, c, []string{key}, "old", 1000, 60000).Int()
	require.NoError(t, err)
	require.Zero(t, n, "a copy read before the change is refused")
	require.Equal(t, fencePrefix+"2000", c.Get(ctx, key).Val())

	n, err = cacheFillScript.Run(ctx, c, []string{key}, "new", 2000, 60000).Int()
	require.NoError(t, err)
	require.Equal(t, 1, n, "a copy of the new row fills")
	require.Equal(t, "new", c.Get(ctx, key).Val())
	n, _ = cacheFillScript.Run(ctx, c, []string{key}, "older", 1, 60000).Int()
	require.Equal(t, 1, n, "without a fence, fills go through (the TTL bounds staleness)")
}
