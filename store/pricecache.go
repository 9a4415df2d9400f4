package store

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
)

// LocalPriceTTL bounds how long a PriceCache serves a price from memory:
// a change is announced and drops it at once, and should an announcement
// be missed, the price is read again after this long anyway.
const LocalPriceTTL = 10 * time.Second

// PriceCache keeps models' prices in process in front of Prices, so a
// charge reads its price without a Redis round trip. Its entries are
// trusted only while Watch is subscribed to agent:pricing-changes, on
// which Prices.Set announces every change: a change drops the model's
// entry, and a lost subscription drops them all and sends every read to
// Prices until it is back. Without Watch running, every read goes to
// Prices.
type PriceCache struct {
	prices  *Prices
	now     func() time.Time
	live    atomic.Bool   // Watch is subscribed: entries may be served
	changes atomic.Uint64 // counts invalidations: a read older than one must not store its answer

	mu      sync.RWMutex
	entries map[string]cachedPrice
}

type cachedPrice struct {
	p       Pricing
	unknown bool // no enabled pricing row: ErrUnknownModel
	until   time.Time
}

// NewPriceCache returns a cache in front of prices.
func NewPriceCache(prices *Prices) *PriceCache {
	return &PriceCache{prices: prices, now: time.Now, entries: map[string]cachedPrice{}}
}

// Get returns a model's pricing, from memory when it can (see PriceCache).
func (c *PriceCache) Get(ctx context.Context, model string) (Pricing, error) {
	if c.live.Load() {
		c.mu.RLock()
		e, ok := c.entries[model]
		c.mu.RUnlock()
		if ok && c.now().Before(e.until) {
			if e.unknown {
				return Pricing{}, unknownModel(model)
			}
			return e.p, nil
		}
	}
	seen := c.changes.Load()
	p, err := c.prices.Get(ctx, model)
	unknown := errors.Is(err, ErrUnknownModel)
	if (err == nil || unknown) && c.live.Load() {
		c.mu.Lock()
		if c.changes.Load() == seen { // no change was announced while it was read
			c.entries[model] = cachedPrice{p: p, unknown: unknown, until: c.now().Add(LocalPriceTTL)}
		}
		c.mu.Unlock()
	}
	return p, err
}

// drop forgets model's entry, or every entry for "".
func (c *PriceCache) drop(model string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.changes.Add(1)
	if model == "" {
		clear(c.entries)
		return
	}
	delete(c.entries, model)
}

// watchRetry is the pause before Watch subscribes again after an error.
const watchRetry = time.Second

// Watch subscribes to the announcements of price changes and applies them
// until ctx ends; while it is not subscribed (Redis away), the cache serves
// nothing from memory.
func (c *PriceCache) Watch(ctx context.Context, log *slog.Logger) {
	r := c.prices.r
	for ctx.Err() == nil {
		ps := r.Client(keys.DBAgentPricing).Subscribe(ctx, r.Keys().AgentPricingChanges())
		stop := context.AfterFunc(ctx, func() { _ = ps.Close() }) // a blocked read does not watch ctx
		err := c.follow(ctx, ps)
		stop()
		_ = ps.Close()
		c.live.Store(false)
		c.drop("")
		if ctx.Err() != nil {
			return
		}
		log.Warn("price changes: subscription lost; prices are read from Redis until it is back", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(watchRetry):
		}
	}
}

// follow applies what ps receives until it fails.
func (c *PriceCache) follow(ctx context.Context, ps *redis.PubSub) error {
	for {
		// A quiet channel is pinged now and then, so a dead connection is
		// noticed; go-redis resubscribes after an error, and the next
		// Receive says so with a *Subscription.
		msg, err := ps.ReceiveTimeout(ctx, 30*time.Second)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			var netErr interface{ Timeout() bool }
			if errors.As(err, &netErr) && netErr.Timeout() {
				if perr := ps.Ping(ctx); perr == nil {
					continue
				}
			}
			return err
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				c.drop("") // announcements may have been missed before it
				c.live.Store(true)
			}
		case *redis.Message:
			c.drop(m.Payload)
		}
	}
}
