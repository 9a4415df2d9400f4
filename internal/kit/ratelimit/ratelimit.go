// Package ratelimit holds the Redis rate limiters the Spring backend uses: the token
// bucket, the INCR+EXPIRE fixed window and the sliding window, each one Lua
// script run atomically on a key the caller names. It knows nothing of
// Isle's keys.
package ratelimit

import (
	"context"
	"embed"
	"fmt"
	"strconv"
	"time"

	"github.com/eisland/isle/internal/kit/luascript"
	"github.com/redis/go-redis/v9"
)

//go:embed lua/*.lua
var luaFS embed.FS

var (
	lua               = luascript.In(luaFS, "lua")
	tokenBucketScript = lua.Load("token_bucket.lua")
	incrWindowScript  = lua.Load("incr_window.lua")
	givebackScript    = lua.Load("giveback_window.lua")
	slidingScript     = lua.Load("sliding_window.lua")
)

// Bucket is a token bucket that refills Capacity tokens per Window.
type Bucket struct {
	Capacity int
	Window   time.Duration
}

// BucketResult is the answer of TakeToken.
type BucketResult struct {
	Allowed    bool
	Remaining  int64
	RetryAfter time.Duration // 0 when allowed
}

// TakeToken runs token_bucket.lua on key: it takes one token if there is one.
// A zero now uses the Redis server's clock.
func TakeToken(ctx context.Context, c redis.Scripter, key string, b Bucket, now time.Time) (BucketResult, error) {
	if b.Capacity <= 0 || b.Window < time.Second {
		return BucketResult{}, fmt.Errorf("ratelimit: token bucket %s: capacity %d per %s: want positive capacity and a window of 1s or more", key, b.Capacity, b.Window)
	}
	nowArg := clock(now)
	windowS := int64(b.Window / time.Second)
	refill := float64(b.Capacity) / float64(windowS) / 1000
	ttl := max(30, windowS*2)
	vals, err := tokenBucketScript.Run(ctx, c, []string{key},
		nowArg, b.Capacity, strconv.FormatFloat(refill, 'g', -1, 64), 1, ttl).Int64Slice()
	if err != nil {
		return BucketResult{}, fmt.Errorf("ratelimit: token bucket %s: %w", key, err)
	}
	if len(vals) != 3 {
		return BucketResult{}, fmt.Errorf("ratelimit: token bucket %s: unexpected result %v", key, vals)
	}
	return BucketResult{Allowed: vals[0] == 1, Remaining: vals[1], RetryAfter: time.Duration(vals[2]) * time.Millisecond}, nil
}

// Window is the state of a fixed-window counter after an increment.
type Window struct {
	Count   int64
	ResetIn time.Duration // until the window ends
	// Ends is when the window ends, to the millisecond: which window the
	// increment fell in, for GiveBackWindow.
	Ends time.Time
}

// IncrWindow runs incr_window.lua: INCR key, and start the window on the
// first increment only; it ends window after that increment's now (the
// Redis server's clock when now is zero), the counter's expiry. A counter
// whose window ended by now is a new window, even before Redis drops it.
func IncrWindow(ctx context.Context, c redis.Scripter, key string, window time.Duration, now time.Time) (Window, error) {
	if window < time.Millisecond {
		return Window{}, fmt.Errorf("ratelimit: window %s: %s is shorter than a millisecond", key, window)
	}
	vals, err := incrWindowScript.Run(ctx, c, []string{key}, window.Milliseconds(), clock(now)).Int64Slice()
	if err != nil {
		return Window{}, fmt.Errorf("ratelimit: window %s: %w", key, err)
	}
	if len(vals) != 3 {
		return Window{}, fmt.Errorf("ratelimit: window %s: unexpected result %v", key, vals)
	}
	return Window{Count: vals[0], ResetIn: time.Duration(vals[1]) * time.Millisecond, Ends: time.UnixMilli(vals[2])}, nil
}

// GiveBackWindow runs giveback_window.lua: it takes back one count of the
// IncrWindow that answered w on key, for a request that was counted and
// then refused; the last count deletes the key. The count goes back to
// w's window only: when that window has ended by now (the Redis server's
// clock when now is zero), or key holds another window, nothing is given
// back, so a window never takes back what an earlier one counted. It
// returns the count left, or -1 when w's window is over.
func GiveBackWindow(ctx context.Context, c redis.Scripter, key string, w Window, now time.Time) (int64, error) {
	n, err := givebackScript.Run(ctx, c, []string{key}, w.Ends.UnixMilli(), clock(now)).Int64()
	if err != nil {
		return 0, fmt.Errorf("ratelimit: give back %s: %w", key, err)
	}
	return n, nil
}

// clock is a script's now argument: epoch milliseconds, or "" for the
// Redis server's clock.
func clock(now time.Time) string {
	if now.IsZero() {
		return ""
	}
	return strconv.FormatInt(now.UnixMilli(), 10)
}

// Sliding is the state of a sliding-window limit after an event.
type Sliding struct {
	Allowed    bool
	Count      int64         // events in the window, this one included when allowed
	RetryAfter time.Duration // until the oldest event leaves the window; 0 when allowed
}

// SlideWindow runs sliding_window.lua: it records an event at now in the
// sorted set key unless limit events already happened within window.
func SlideWindow(ctx context.Context, c redis.Scripter, key string, limit int, window time.Duration, now time.Time) (Sliding, error) {
	if limit <= 0 || window < time.Millisecond {
		return Sliding{}, fmt.Errorf("ratelimit: sliding window %s: limit %d per %s: want a positive limit and window", key, limit, window)
	}
	member := strconv.FormatInt(now.UnixMilli(), 10) + ":" + strconv.FormatInt(now.UnixNano(), 10)
	vals, err := slidingScript.Run(ctx, c, []string{key}, now.UnixMilli(), window.Milliseconds(), limit, member).Int64Slice()
	if err != nil {
		return Sliding{}, fmt.Errorf("ratelimit: sliding window %s: %w", key, err)
	}
	if len(vals) != 3 {
		return Sliding{}, fmt.Errorf("ratelimit: sliding window %s: unexpected result %v", key, vals)
	}
	return Sliding{Allowed: vals[0] == 1, Count: vals[1], RetryAfter: time.Duration(vals[2]) * time.Millisecond}, nil
}
