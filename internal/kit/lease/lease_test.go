package lease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/lease"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// One owner at a time; only the owner renews (renew.lua) or releases
// (unlock.lua) it.
func TestLeaseHasOneOwner(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	c, key := r.Client(keys.JobLock.DB), r.Keys().JobLock("lease-test")
	a, b := lease.New(c, key, time.Minute), lease.New(c, key, time.Minute)

	held, err := a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, held)
	held, err = b.Acquire(ctx)
	require.NoError(t, err)
	require.False(t, held, "taken")
	held, err = a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, held, "already ours: renewed")

	renewed, err := b.Renew(ctx)
	require.NoError(t, err)
	require.False(t, renewed, "renew.lua returns 0 for another holder")
	require.NoError(t, b.Release(ctx))
	renewed, err = a.Renew(ctx)
	require.NoError(t, err)
	require.True(t, renewed, "renew.lua returns 1 for the holder; the other's release did nothing")

	require.NoError(t, a.Release(ctx))
	held, err = b.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, held, "free after its owner released it")
}

// Hold's context ends when another owner takes the lease, and release
// gives a held lease up.
func TestLeaseHold(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	c, key := r.Client(keys.JobLock.DB), r.Keys().JobLock("hold-test")
	const ttl = 300 * time.Millisecond
	a := lease.New(c, key, ttl)
	held, err := a.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, held)

	var why string
	hctx, release := a.Hold(ctx, func(w string) { why = w })
	time.Sleep(ttl) // renewed meanwhile: still ours past the first TTL
	require.NoError(t, hctx.Err())
	require.Equal(t, a.Owner(), c.Get(ctx, key).Val())

	require.NoError(t, c.Set(ctx, key, "someone-else", time.Minute).Err())
	select {
	case <-hctx.Done():
	case <-time.After(5 * ttl):
		t.Fatal("the held context did not end when the lease was taken")
	}
	release()
	require.Equal(t, "taken by another owner", why)
	require.Equal(t, "someone-else", c.Get(ctx, key).Val(), "release leaves another owner's lease alone")

	b := lease.New(c, r.Keys().JobLock("hold-test-2"), ttl)
	held, err = b.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, held)
	_, release = b.Hold(ctx, nil)
	release()
	require.Zero(t, c.Exists(ctx, r.Keys().JobLock("hold-test-2")).Val(), "released")
}

// A lock passes to one holder at a time; only its holder releases it.
func TestLock(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	c := r.Client(keys.DBPayment)
	key := r.Keys().OrderCreateLock("pro-month", "alice")
	l, err := lease.Acquire(ctx, c, key, keys.PaymentLockTTL)
	require.NoError(t, err)
	_, err = lease.Acquire(ctx, c, key, keys.PaymentLockTTL)
	require.ErrorIs(t, err, lease.ErrHeld)

	// The lock expires and passes to another holder; the first may not release it.
	require.NoError(t, c.Del(ctx, key).Err())
	other, err := lease.Acquire(ctx, c, key, keys.PaymentLockTTL)
	require.NoError(t, err)
	released, err := l.Release(ctx)
	require.NoError(t, err)
	require.False(t, released, "a stale holder's release is a no-op")
	require.Equal(t, other.Token(), c.Get(ctx, key).Val())

	released, err = other.Release(ctx)
	require.NoError(t, err)
	require.True(t, released)
	require.Zero(t, c.Exists(ctx, key).Val())
}

func TestAcquireWaitAndCompareAndDelete(t *testing.T) {
	t.Parallel()
	r := storetest.Redis(t)
	ctx := context.Background()
	c := r.Client(keys.DBMiniGame)
	key := r.Keys().Key(keys.ScoreLock, "2048", "7")
	first, err := lease.Acquire(ctx, c, key, keys.ScoreLockTTL)
	require.NoError(t, err)
	_, err = lease.AcquireWait(ctx, c, key, keys.ScoreLockTTL, 30*time.Millisecond)
	require.ErrorIs(t, err, lease.ErrHeld, "still held when the wait ends")

	got := make(chan error, 1)
	go func() {
		l, err := lease.AcquireWait(ctx, c, key, keys.ScoreLockTTL, 10*time.Second)
		if err == nil && l.Token() == first.Token() {
			err = errors.New("the same token twice")
		}
		got <- err
	}()
	released, err := first.Release(ctx)
	require.NoError(t, err)
	require.True(t, released)
	require.NoError(t, <-got, "taken once the holder released it")

	require.NoError(t, c.Set(ctx, key, "mine", 0).Err())
	require.NoError(t, lease.CompareAndDelete(ctx, c, key, "theirs"))
	require.Equal(t, "mine", c.Get(ctx, key).Val(), "another value is left alone")
	require.NoError(t, lease.CompareAndDelete(ctx, c, key, "mine"))
	require.Zero(t, c.Exists(ctx, key).Val())
}
