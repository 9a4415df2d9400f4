package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/eisland/isle/store"
)

// Leader keeps trying to hold a lease and renews it while it does. Jobs run
// under Context(): when the lease is lost (not renewed in time, or taken
// over), that context is canceled and running jobs stop.
type Leader struct {
	lease    *store.Lease
	ttl      time.Duration
	log      *slog.Logger
	mu       sync.Mutex
	ctx      context.Context
	cancel   context.CancelFunc
	onChange func(bool)
}

// NewLeader returns a Leader for lease; ttl is the lease's TTL.
func NewLeader(lease *store.Lease, ttl time.Duration, log *slog.Logger) *Leader {
	return &Leader{lease: lease, ttl: ttl, log: log}
}

// Context returns the current leadership's context, and whether this process leads.
func (l *Leader) Context() (context.Context, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil || l.ctx.Err() != nil {
		return nil, false
	}
	return l.ctx, true
}

// IsLeader reports whether this process holds the lease.
func (l *Leader) IsLeader() bool {
	_, ok := l.Context()
	return ok
}

// Run campaigns until ctx ends, then gives the lease up.
func (l *Leader) Run(ctx context.Context) {
	tick := time.NewTicker(l.ttl / 3)
	defer tick.Stop()
	lastHeld := time.Time{}
	for {
		held, err := l.lease.Acquire(ctx) // acquires, or renews what we hold
		now := time.Now()
		switch {
		case err != nil && ctx.Err() == nil:
			l.log.Warn("leader lease: Redis did not answer", "err", err)
			if l.IsLeader() && now.Sub(lastHeld) > l.ttl*2/3 {
				l.resign("lease could not be renewed in time")
			}
		case held:
			lastHeld = now
			l.take()
		default:
			if l.IsLeader() {
				l.resign("lease taken by another process")
			}
		}
		select {
		case <-ctx.Done():
			l.resign("shutting down")
			_ = l.lease.Release(context.WithoutCancel(ctx))
			return
		case <-tick.C:
		}
	}
}

func (l *Leader) take() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx != nil && l.ctx.Err() == nil {
		return
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.log.Info("leader: this process runs the scheduled jobs", "owner", l.lease.Owner())
}

func (l *Leader) resign(why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil && l.ctx.Err() == nil {
		l.cancel()
		l.log.Warn("leader: no longer running the scheduled jobs", "why", why)
	}
}
