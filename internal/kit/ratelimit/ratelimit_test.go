package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/ratelimit"
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
	now := time.Now()
	w, err := ratelimit.IncrWindow(ctx, c, key, time.Minute, now)
	require.NoError(t, err)
	require.EqualValues(t, 1, w.Count)
	require.Equal(t, time.Minute, w.ResetIn)
	require.Equal(t, now.Add(time.Minute).UnixMilli(), w.Ends.UnixMilli())
	require.Equal(t, w.Ends.UnixMilli(), c.PExpireTime(ctx, key).Val().Milliseconds(), "the counter expires when its window ends")

	// A later increment does not extend the window.
	w2, err := ratelimit.IncrWindow(ctx, c, key, time.Minute, now.Add(20*time.Second))
	require.NoError(t, err)
	require.EqualValues(t, 2, w2.Count)
	require.Equal(t, 40*time.Second, w2.ResetIn)
	require.True(t, w2.Ends.Equal(w.Ends))

	// A counter left without a TTL gets one rather than blocking forever.
	require.NoError(t, c.Persist(ctx, key).Err())
	w, err = ratelimit.IncrWindow(ctx, c, key, time.Minute, now.Add(30*time.Second))
	require.NoError(t, err)
	require.EqualValues(t, 3, w.Count)
	ttl, err := c.TTL(ctx, key).Result()
	require.NoError(t, err)
	require.Greater(t, ttl, time.Duration(0))

	// The Redis server's clock when now is zero.
	w, err = ratelimit.IncrWindow(ctx, c, r.Keys().ScoreSubmitRate("2048", "43"), time.Minute, time.Time{})
	require.NoError(t, err)
	require.EqualValues(t, 1, w.Count)
	require.InDelta(t, time.Now().Add(time.Minute).UnixMilli(), w.Ends.UnixMilli(), 5000)
}

// A window ends by the caller's clock: the first increment after its end
// opens the next window, though Redis has not dropped the counter yet.
func TestIncrWindowEndsByTheClock(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	c := r.Client(keys.WallpaperUpload.DB)
	key := r.Keys().Key(keys.WallpaperUpload, "clocked")
	now := time.Now()
	for range 3 {
		_, err := ratelimit.IncrWindow(ctx, c, key, time.Hour, now)
		require.NoError(t, err)
	}
	last, err := ratelimit.IncrWindow(ctx, c, key, time.Hour, now.Add(time.Hour-time.Millisecond))
	require.NoError(t, err)
	require.EqualValues(t, 4, last.Count, "the window's last millisecond")
	next, err := ratelimit.IncrWindow(ctx, c, key, time.Hour, now.Add(time.Hour))
	require.NoError(t, err)
	require.EqualValues(t, 1, next.Count, "the next window")
	require.Equal(t, now.Add(2*time.Hour).UnixMilli(), next.Ends.UnixMilli())
}

// A count given back leaves the window's end as it was; the last one
// deletes the window; an expired window is not brought back.
func TestGiveBackWindow(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	c := r.Client(keys.WallpaperUpload.DB)
	key := r.Keys().Key(keys.WallpaperUpload, "giver")
	now := time.Now()
	n, err := ratelimit.GiveBackWindow(ctx, c, key, ratelimit.Window{Ends: now.Add(time.Hour)}, now)
	require.NoError(t, err)
	require.EqualValues(t, -1, n, "no window: nothing to give back")
	require.Zero(t, c.Exists(ctx, key).Val(), "and none made")

	var w ratelimit.Window
	for range 2 {
		w, err = ratelimit.IncrWindow(ctx, c, key, time.Hour, now)
		require.NoError(t, err)
	}
	n, err = ratelimit.GiveBackWindow(ctx, c, key, w, now.Add(30*time.Minute))
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Equal(t, w.Ends.UnixMilli(), c.PExpireTime(ctx, key).Val().Milliseconds(), "the window keeps its end")
	n, err = ratelimit.GiveBackWindow(ctx, c, key, w, now.Add(30*time.Minute))
	require.NoError(t, err)
	require.Zero(t, n)
	require.Zero(t, c.Exists(ctx, key).Val(), "a window with nothing counted leaves no key")
	n, err = ratelimit.GiveBackWindow(ctx, c, key, w, now.Add(30*time.Minute))
	require.NoError(t, err)
	require.EqualValues(t, -1, n, "never below zero")
}

// A count taken in window W and given back once W has ended goes back to
// no window: not to W+1, which would then let one request more through
// than its limit. The clock decides that W ended, whether or not Redis
// has dropped W's counter yet.
func TestGiveBackAfterTheWindowEndedGivesNothing(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	c := r.Client(keys.WallpaperUpload.DB)
	now := time.Now()

	t.Run("W+1 has begun", func(t *testing.T) {
		t.Parallel()
		key := r.Keys().Key(keys.WallpaperUpload, "rolled")
		w, err := ratelimit.IncrWindow(ctx, c, key, time.Hour, now)
		require.NoError(t, err)
		next, err := ratelimit.IncrWindow(ctx, c, key, time.Hour, now.Add(time.Hour+time.Second))
		require.NoError(t, err)
		require.EqualValues(t, 1, next.Count, "W+1's first")

		n, err := ratelimit.GiveBackWindow(ctx, c, key, w, now.Add(time.Hour+2*time.Second))
		require.NoError(t, err)
		require.EqualValues(t, -1, n)
		require.Equal(t, "1", c.Get(ctx, key).Val(), "W+1 keeps its count")
		require.Equal(t, next.Ends.UnixMilli(), c.PExpireTime(ctx, key).Val().Milliseconds())

		// Were the clock behind W+1's start (another API's), W+1 still
		// is not W: its end tells them apart.
		n, err = ratelimit.GiveBackWindow(ctx, c, key, w, now.Add(time.Minute))
		require.NoError(t, err)
		require.EqualValues(t, -1, n)
		require.Equal(t, "1", c.Get(ctx, key).Val())
	})
	t.Run("W is over, its counter still there", func(t *testing.T) {
		t.Parallel()
		key := r.Keys().Key(keys.WallpaperUpload, "ended")
		var w ratelimit.Window
		for range 2 {
			var err error
			w, err = ratelimit.IncrWindow(ctx, c, key, time.Hour, now)
			require.NoError(t, err)
		}
		n, err := ratelimit.GiveBackWindow(ctx, c, key, w, now.Add(time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, -1, n)
		require.Equal(t, "2", c.Get(ctx, key).Val(), "untouched; the next increment starts W+1")
		next, err := ratelimit.IncrWindow(ctx, c, key, time.Hour, now.Add(time.Hour))
		require.NoError(t, err)
		require.EqualValues(t, 1, next.Count)
	})
	t.Run("W dropped by Redis, W+1 opened by the Redis clock", func(t *testing.T) {
		t.Parallel()
		key := r.Keys().Key(keys.WallpaperUpload, "short")
		w, err := ratelimit.IncrWindow(ctx, c, key, 50*time.Millisecond, time.Time{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { return c.Exists(ctx, key).Val() == 0 }, 10*time.Second, 10*time.Millisecond, "Redis ends W")
		next, err := ratelimit.IncrWindow(ctx, c, key, time.Hour, time.Time{})
		require.NoError(t, err)
		require.EqualValues(t, 1, next.Count)
		n, err := ratelimit.GiveBackWindow(ctx, c, key, w, time.Time{})
		require.NoError(t, err)
		require.EqualValues(t, -1, n)
		require.Equal(t, "1", c.Get(ctx, key).Val(), "W+1 keeps its count")
	})
}
