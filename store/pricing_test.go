package store_test

import (
	"context"
	"testing"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// A disabled model is cached as missing like an unknown one, despite the
// fence its change left, so its requests do not all go to MySQL.
func TestDisabledPricingIsCachedAsMissing(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	ctx := context.Background()
	key := r.Keys().AgentPricing("old")
	require.NoError(t, store.NewPrices(db, r).Set(ctx, store.Pricing{Model: "old", Input: dec("1"), Enabled: true}))
	require.NoError(t, store.NewPrices(db, r).Set(ctx, store.Pricing{Model: "old", Input: dec("1"), Enabled: false}))
	require.Contains(t, r.Client(keys.DBAgentPricing).Get(ctx, key).Val(), "__STALE__|", "fenced by the change")

	_, err := store.NewPrices(db, r).Get(ctx, "old")
	require.ErrorIs(t, err, store.ErrUnknownModel)
	require.Equal(t, "__NONE__", r.Client(keys.DBAgentPricing).Get(ctx, key).Val())

	require.NoError(t, store.NewPrices(db, r).Set(ctx, store.Pricing{Model: "old", Input: dec("3"), Enabled: true}))
	p, err := store.NewPrices(db, r).Get(ctx, "old")
	require.NoError(t, err)
	require.Equal(t, "3", p.Input.String(), "enabled again")
}

// Prices are capped at MaxPriceFenPerMTok, for each kind of token, so that
// no request the API accepts costs more micro-fen than an int64 holds.
func TestPricesAreCapped(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	ctx := context.Background()
	prices := store.NewPrices(db, r)
	top := store.MaxPriceFenPerMTok
	require.NoError(t, prices.Set(ctx, store.Pricing{Model: "top", Input: top, CachedInput: top, Output: top, Reasoning: top, Enabled: true}))
	over := top.Add(dec("0.00000001"))
	for _, p := range []store.Pricing{
		{Model: "over", Input: over}, {Model: "over", CachedInput: over}, {Model: "over", Output: over}, {Model: "over", Reasoning: over},
	} {
		require.ErrorContains(t, prices.Set(ctx, p), "0..10000000 fen per million tokens")
	}
	_, err := prices.Get(ctx, "over")
	require.ErrorIs(t, err, store.ErrUnknownModel, "nothing was written")
}
