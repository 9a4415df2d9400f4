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

// The release deletes a lock only while it holds the releaser's token: a
// lock that expired and was taken by another keeps its new holder.
func TestOrderLockReleaseComparesBeforeDeleting(t *testing.T) {
	if testing.Short() {
		t.Skip("needs Redis: not run with -short") // storetest would import store: a cycle here
	}
	t.Parallel()
	addr := cmp.Or(os.Getenv("ISLE_TEST_REDIS_ADDR"), "127.0.0.1:6379")
	c := redis.NewClient(&redis.Options{Addr: addr, DB: keys.DBPayment.DefaultIndex()})
	defer c.Close()
	ctx := context.Background()
	lock := "isletest:order-lock:" + strconv.FormatInt(time.Now().UnixNano(), 10)
	defer c.Del(ctx, lock)
	require.NoError(t, c.Set(ctx, lock, "token-b", keys.PaymentLockTTL).Err())

	ok, err := releaseLock(ctx, c, lock, "token-a")
	require.NoError(t, err)
	require.False(t, ok, "another holder's lock is not deleted")
	require.Equal(t, "token-b", c.Get(ctx, lock).Val())

	ok, err = releaseLock(ctx, c, lock, "token-b")
	require.NoError(t, err)
	require.True(t, ok)
	require.Zero(t, c.Exists(ctx, lock).Val())

	ok, err = releaseLock(ctx, c, lock, "token-b")
	require.NoError(t, err)
	require.False(t, ok, "nothing left to release")
}
