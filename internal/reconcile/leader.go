package reconcile

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/eisland/isle/internal/lease"
)

// Leader keeps trying to hold a lease and renews it while it does. Jobs run
// under Context(): when the lease is lost (not renewed in time, or taken
// over), that context is canceled and running jobs stop.
type Leader struct {
	lease *lease.Lease
	log   *slog.Logger
	mu    sync.Mutex
	ctx   context.Context // the current leadership, while it lasts
}

// NewLeader returns a Leader campaigning for lease.
func NewLeader(lease *lease.Lease, log *slog.Logger) *Leader {
	return &Leader{lease: lease, log: log}
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

// Run campaigns until ctx ends, then gives the lease up.
func (l *Leader) Run(ctx context.Context) {
	tick := time.NewTicker(l.lease.TTL() / 3)
	defer tick.Stop()
	for {
		held, err := l.lease.Acquire(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			l.log.Warn("leader lease: Redis did not answer", "err", err)
		case held:
			l.lead(ctx)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// lead holds the lease until it is lost or ctx ends; jobs run meanwhile.
func (l *Leader) lead(ctx context.Context) {
	why := "shutting down"
	held, release := l.lease.Hold(ctx, func(w string) { why = "lease " + w })
	l.mu.Lock()
	l.ctx = held
	l.mu.Unlock()
	l.log.Info("leader: this process runs the scheduled jobs", "owner", l.lease.Owner())
	<-held.Done()
	release()
	l.log.Warn("leader: no longer running the scheduled jobs", "why", why)
}
