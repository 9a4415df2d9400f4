package lease

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

// ErrHeld is returned by Acquire when someone else holds the lock.
var ErrHeld = errors.New("lease: lock held by another holder")

// Lock is a SETNX lock with a UUID token (a creation lock of doc/keys.md).
// It is an efficiency device only: a paused holder can outlive its TTL, so
// every write it guards must be safe without it.
type Lock struct {
	c     redis.Scripter
	key   string
	token string
}

// Acquire sets key to a fresh UUID if it is free, for ttl.
func Acquire(ctx context.Context, c redis.Cmdable, key string, ttl time.Duration) (*Lock, error) {
	token := uuid.NewString()
	ok, err := c.SetNX(ctx, key, token, ttl).Result()
	if err != nil {
		return nil, fmt.Errorf("lease: acquire lock %s: %w", key, err)
	}
	if !ok {
		return nil, ErrHeld
	}
	return &Lock{c: c, key: key, token: token}, nil
}

// Token is the lock's UUID.
func (l *Lock) Token() string { return l.token }

// Release deletes the lock if this holder still owns it (unlock.lua), and
// reports whether it did; a lock that expired or passed to another holder is
// left alone.
func (l *Lock) Release(ctx context.Context) (bool, error) {
	n, err := unlockScript.Run(ctx, l.c, []string{l.key}, l.token).Int64()
	if err != nil {
		return false, fmt.Errorf("lease: release lock %s: %w", l.key, err)
	}
	return n == 1, nil
}

// lockPoll is how often AcquireWait tries a held lock again.
const lockPoll = 10 * time.Millisecond

// AcquireWait is Acquire, trying again while the lock is held, for at most
// wait; then it returns ErrHeld.
func AcquireWait(ctx context.Context, c redis.Cmdable, key string, ttl, wait time.Duration) (*Lock, error) {
	deadline := time.Now().Add(wait)
	for {
		l, err := Acquire(ctx, c, key, ttl)
		if !errors.Is(err, ErrHeld) || !time.Now().Before(deadline) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(lockPoll, time.Until(deadline))):
		}
	}
}

// CompareAndDelete deletes key if it still holds value (unlock.lua), as a
// lock's release does: a key another writer set since is left alone.
func CompareAndDelete(ctx context.Context, c redis.Scripter, key, value string) error {
	if err := unlockScript.Run(ctx, c, []string{key}, value).Err(); err != nil {
		return fmt.Errorf("lease: compare and delete %s: %w", key, err)
	}
	return nil
}

// ReleaseDetached releases the lock as its holder leaves, whether or not
// ctx is done: on a context of its own, for at most a second. A release
// that fails leaves the lock to expire with its TTL.
func (l *Lock) ReleaseDetached(ctx context.Context) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	_, _ = l.Release(rctx)
}
