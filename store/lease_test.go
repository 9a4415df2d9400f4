package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/store"
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
	a, b := store.NewLease(c, key, time.Minute), store.NewLease(c, key, time.Minute)

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
