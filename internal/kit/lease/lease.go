// Package lease holds Redis keys for one owner: a Lease its owner renews
// (the reconciler's leader election and job locks) and a Lock set once
// with a UUID token (creation locks). Both release and renew only for
// their holder (compare-and-delete, compare-and-expire). They coordinate;
// they guarantee nothing: the work they guard stays idempotent. The
// package knows nothing of Isle's keys: callers pass them.
package lease

import (
	"context"
	"embed"
	"fmt"
	"time"

	"github.com/eisland/isle/internal/kit/luascript"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// The scripts release and renew a key only for its holder.
//
//go:embed lua/*.lua
var luaFS embed.FS

var (
	lua          = luascript.In(luaFS, "lua")
	renewScript  = lua.Load("renew.lua")
	unlockScript = lua.Load("unlock.lua")
)

// Lease is a Redis key held by one owner for a TTL that the owner renews:
// the reconciler's leader election and its per-job locks (doc/keys.md: a
// persistent key). Like any Redis lock it is a coordination device, not a
// guarantee: the work it guards stays idempotent.
type Lease struct {
	c     redis.Cmdable
	key   string
	owner string
	ttl   time.Duration
}

// New returns a lease on key for ttl, with a fresh owner id.
func New(c redis.Cmdable, key string, ttl time.Duration) *Lease {
	return &Lease{c: c, key: key, owner: uuid.NewString(), ttl: ttl}
}

// Owner is this holder's id.
func (l *Lease) Owner() string { return l.owner }

// Acquire takes the lease if it is free (or already ours, then renews it) and
// reports whether we hold it.
func (l *Lease) Acquire(ctx context.Context) (bool, error) {
	ok, err := l.c.SetNX(ctx, l.key, l.owner, l.ttl).Result()
	if err != nil {
		return false, fmt.Errorf("lease: lease %s: %w", l.key, err)
	}
	if ok {
		return true, nil
	}
	return l.Renew(ctx)
}

// Renew extends the lease if we still hold it, and reports whether we do.
func (l *Lease) Renew(ctx context.Context) (bool, error) {
	n, err := renewScript.Run(ctx, l.c, []string{l.key}, l.owner, l.ttl.Milliseconds()).Int64()
	if err != nil {
		return false, fmt.Errorf("lease: renew lease %s: %w", l.key, err)
	}
	return n == 1, nil
}

// Release gives the lease up if we hold it.
func (l *Lease) Release(ctx context.Context) error {
	if err := unlockScript.Run(ctx, l.c, []string{l.key}, l.owner).Err(); err != nil {
		return fmt.Errorf("lease: release lease %s: %w", l.key, err)
	}
	return nil
}

// TTL is how long the lease lives without a renewal.
func (l *Lease) TTL() time.Duration { return l.ttl }

// Hold keeps a lease this process has acquired. It renews it every third of
// the TTL and returns a context that ends with ctx or when the lease is
// lost: taken by another owner, or not renewed for two thirds of the TTL
// (it may have expired by then). lost, if not nil, is told why before the
// context ends. release stops the renewals and gives the lease up.
func (l *Lease) Hold(ctx context.Context, lost func(why string)) (held context.Context, release func()) {
	held, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(l.ttl / 3)
		defer t.Stop()
		renewed := time.Now()
		for {
			select {
			case <-held.Done():
				return
			case <-t.C:
			}
			ok, err := l.Renew(held)
			var why string
			switch {
			case held.Err() != nil:
				return
			case err == nil && ok:
				renewed = time.Now()
				continue
			case err == nil:
				why = "taken by another owner"
			case time.Since(renewed) < l.ttl*2/3:
				continue // Redis may answer at the next tick
			default:
				why = "not renewed in time: " + err.Error()
			}
			if lost != nil {
				lost(why)
			}
			cancel()
			return
		}
	}()
	return held, func() {
		cancel()
		<-done
		_ = l.Release(context.WithoutCancel(ctx))
	}
}
