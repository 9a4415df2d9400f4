package reconcile

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/eisland/isle/internal/kit/lease"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
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

// LeaderGroup names the reconciler's leader lease: isle:leader:reconcile.
const LeaderGroup = "reconcile"

// Holder is who holds a lease or a job lock, and for how much longer
// unless renewed. The zero Holder is nobody.
type Holder struct {
	Owner string // the holder's id (a scheduled run's job_run.owner names it)
	TTL   time.Duration
}

// CurrentLeader reads who leads the reconcilers now: the process that runs
// the scheduled jobs.
func CurrentLeader(ctx context.Context, rdb *store.Redis) (Holder, error) {
	return holder(ctx, rdb, keys.LeaderLease.DB, rdb.Keys().LeaderLease(LeaderGroup))
}

// Running reads who holds a job's lock: someone runs it now.
func Running(ctx context.Context, rdb *store.Redis, job string) (Holder, error) {
	return holder(ctx, rdb, keys.JobLock.DB, rdb.Keys().JobLock(job))
}

func holder(ctx context.Context, rdb *store.Redis, db keys.DB, key string) (Holder, error) {
	c := rdb.Client(db)
	var get *redis.StringCmd
	var ttl *redis.DurationCmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		get, ttl = p.Get(ctx, key), p.PTTL(ctx, key)
		return nil
	})
	if errors.Is(err, redis.Nil) {
		return Holder{}, nil
	}
	if err != nil {
		return Holder{}, fmt.Errorf("reconcile: read %s: %w", key, err)
	}
	return Holder{Owner: get.Val(), TTL: max(ttl.Val(), 0)}, nil
}
