package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/internal/ratelimit"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

func TestTokenBucket(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	c := r.Client(keys.VerifyRateIP.DB)
	key := r.Keys().Key(keys.VerifyRateIP, "bucket-test")
	b := ratelimit.Bucket{Capacity: 3, Window: time.Minute} // one token per 20 s
	now := time.UnixMilli(1_000_000)
	for i := range 3 {
		res, err := ratelimit.TakeToken(ctx, c, key, b, now)
		require.NoError(t, err)
		require.True(t, res.Allowed, "token %d", i)
		require.EqualValues(t, 2-i, res.Remaining)
		require.Zero(t, res.RetryAfter)
	}
	res, err := ratelimit.TakeToken(ctx, c, key, b, now)
	require.NoError(t, err)
	require.False(t, res.Allowed)
	require.Equal(t, 20*time.Second, res.RetryAfter)
	res, err = ratelimit.TakeToken(ctx, c, key, b, now.Add(10*time.Second))
	require.NoError(t, err)
	require.False(t, res.Allowed)
	require.Equal(t, 10*time.Second, res.RetryAfter)
	res, err = ratelimit.TakeToken(ctx, c, key, b, now.Add(20*time.Second))
	require.NoError(t, err)
	require.True(t, res.Allowed, "refilled after 20 s")
	ttl, err := c.TTL(ctx, key).Result()
	require.NoError(t, err)
	require.InDelta(t, 120, ttl.Seconds(), 1, "TTL is twice the window")

	// The server clock is used when now is zero.
	res, err = ratelimit.TakeToken(ctx, c, r.Keys().Key(keys.VerifyRateIP, "server-clock"), b, time.Time{})
	require.NoError(t, err)
	require.True(t, res.Allowed)

	_, err = ratelimit.TakeToken(ctx, c, key, ratelimit.Bucket{Capacity: 0, Window: time.Minute}, now)
	require.Error(t, err)
}

func TestIncrWindow(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	c := r.Client(keys.DBMiniGame)
	key := r.Keys().ScoreSubmitRate("2048", "42")
	w, err := ratelimit.IncrWindow(ctx, c, key, time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 1, w.Count)
	require.InDelta(t, 60, w.ResetIn.Seconds(), 1)

	require.NoError(t, c.Expire(ctx, key, 5*time.Second).Err()) // a later increment must not extend the window
	w, err = ratelimit.IncrWindow(ctx, c, key, time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 2, w.Count)
	require.LessOrEqual(t, w.ResetIn, 5*time.Second)

	// A counter left without a TTL gets one rather than blocking forever.
	require.NoError(t, c.Persist(ctx, key).Err())
	w, err = ratelimit.IncrWindow(ctx, c, key, time.Minute)
	require.NoError(t, err)
	require.EqualValues(t, 3, w.Count)
	ttl, err := c.TTL(ctx, key).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Duration(0))
}

// deduct.lua's idempotency marker keeps the first charge's amount, ref and
// request hash: the same id answers a replay with them, or a conflict for
// another body; a marker of an older build (amount only) answers a replay.

// A count given back leaves the window's TTL as it was; the last one
// deletes the window; an expired window is not brought back.
func TestGiveBackWindow(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	c := r.Client(keys.WallpaperUpload.DB)
	key := r.Keys().Key(keys.WallpaperUpload, "giver")
	n, err := ratelimit.GiveBackWindow(ctx, c, key)
	require.NoError(t, err)
	require.EqualValues(t, -1, n, "no window: nothing to give back")
	require.Zero(t, c.Exists(ctx, key).Val(), "and none made")

	for range 2 {
		_, err = ratelimit.IncrWindow(ctx, c, key, time.Hour)
		require.NoError(t, err)
	}
	require.NoError(t, c.Expire(ctx, key, 30*time.Minute).Err())
	n, err = ratelimit.GiveBackWindow(ctx, c, key)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	ttl, err := c.TTL(ctx, key).Result()
	require.NoError(t, err)
	require.InDelta(t, 30*60, ttl.Seconds(), 5, "the window keeps its end")
	n, err = ratelimit.GiveBackWindow(ctx, c, key)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, c.Exists(ctx, key).Val(), "a window with nothing counted leaves no key")
	n, err = ratelimit.GiveBackWindow(ctx, c, key)
	require.NoError(t, err)
	require.EqualValues(t, -1, n, "never below zero")
}
