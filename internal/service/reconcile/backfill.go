package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// Defaults of BackfillConfig.
const (
	BackfillStuckAfterDefault  = 10 * time.Minute
	BackfillBatchDefault       = 200 // object-replication.backfill-batch-size
	BackfillConcurrencyDefault = 16
)

// BackfillConfig configures replication-backfill. Zero fields take the defaults.
type BackfillConfig struct {
	// StuckAfter is how long a pending or failed task goes without an
	// update before its message counts as lost: longer than a message
	// waits in the queue, a copy takes, and the retry delay.
	StuckAfter time.Duration
	Batch      int // tasks republished at most per run, lowest id first
	// MaxAttempts leaves tasks with this many attempts or more alone: they
	// used up their retries and their message is in the DLQ, for dlq-replay
	// or an operator. Default: the domain's MaxRetries + 1, the attempts of
	// one message with all its retries.
	MaxAttempts int
	Concurrency int // publishes in flight at once
}

// Sender publishes one message and waits for the broker's confirm
// (*messaging.Publisher).
type Sender interface {
	Send(ctx context.Context, out messaging.Outgoing) error
}

// ReplicationBackfill is the replication-backfill job
// (OBJECT_REPLICATION_BACKFILL_*, off by default, doc/config.md): it
// republishes the ObjectReplicationMessage of replication tasks stuck
// pending or failed for longer than StuckAfter, whose message was lost
// (a broker that lost it, a retry queue deleted, a publish the relay
// thought confirmed). Each message has the id and priority the relay gave
// it, so a consumer sees a duplicate, never a second task; it skips tasks
// already done. A task confirmed republished has its updated_at touched,
// its status kept; a task whose publish failed is left as it was, for the
// next run. A done task is never republished.
type ReplicationBackfill struct {
	tasks *store.Objects
	pub   Sender
	dom   topology.Domain
	cfg   BackfillConfig
	m     *Metrics
	log   *slog.Logger
}

// NewReplicationBackfill returns the job publishing to dom, the
// object-replication domain. A missing dependency is a wiring bug: it panics.
func NewReplicationBackfill(db *gorm.DB, dom topology.Domain, pub Sender, cfg BackfillConfig, m *Metrics, log *slog.Logger) *ReplicationBackfill {
	if db == nil || pub == nil || log == nil || dom.RoutingKey == "" {
		panic("reconcile: NewReplicationBackfill: missing dependency")
	}
	cfg.StuckAfter = cmp.Or(cfg.StuckAfter, BackfillStuckAfterDefault)
	cfg.Batch = cmp.Or(cfg.Batch, BackfillBatchDefault)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, dom.Retry.MaxRetries+1)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, BackfillConcurrencyDefault)
	return &ReplicationBackfill{tasks: store.NewObjects(db), pub: pub, dom: dom, cfg: cfg, m: m, log: log}
}

// Name is "replication-backfill".
func (j *ReplicationBackfill) Name() string { return "replication-backfill" }

// BackfillResult is what one run of replication-backfill did.
type BackfillResult struct {
	StuckAfter  time.Duration
	Scanned     int // stuck tasks found (at most the batch)
	Republished int // published and confirmed, then touched
	Failed      int // not published: left as they were
}

func (r BackfillResult) String() string {
	return fmt.Sprintf("tasks stuck over %s: scanned %d, republished %d, failed to publish %d",
		r.StuckAfter, r.Scanned, r.Republished, r.Failed)
}

// LogValue implements slog.LogValuer.
func (r BackfillResult) LogValue() slog.Value {
	return slog.GroupValue(slog.Duration("stuck_after", r.StuckAfter), slog.Int("scanned", r.Scanned),
		slog.Int("republished", r.Republished), slog.Int("failed", r.Failed))
}

// RunOnce republishes up to Batch stuck tasks, lowest id first. A failed
// publish makes the run an error (after the others were tried), so the
// runs metric shows the broker refusing.
func (j *ReplicationBackfill) RunOnce(ctx context.Context) (Result, error) {
	res := BackfillResult{StuckAfter: j.cfg.StuckAfter}
	tasks, err := j.tasks.StuckTasks(ctx, j.cfg.StuckAfter, j.cfg.MaxAttempts, j.cfg.Batch)
	if err != nil {
		return res, fmt.Errorf("reconcile: backfill: %w", err)
	}
	res.Scanned = len(tasks)
	j.m.add(j.Name(), "tasks_scanned", len(tasks))

	errs := j.publish(ctx, tasks)
	var sent []uint64
	var firstErr error
	for i, t := range tasks {
		if errs[i] == nil {
			sent = append(sent, t.ID)
			continue
		}
		res.Failed++
		firstErr = cmp.Or(firstErr, errs[i])
		j.log.DebugContext(ctx, "backfill: publish failed", "task", t.ID, "err", errs[i])
	}
	res.Republished = len(sent)
	j.m.add(j.Name(), "tasks_republished", res.Republished)
	j.m.add(j.Name(), "publish_failures", res.Failed)
	// The touch runs even if ctx ended: the messages went out.
	touchCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := j.tasks.TouchTasks(touchCtx, sent); err != nil {
		// The next run republishes them again: duplicates, which the
		// consumer tells by the task's status.
		return res, fmt.Errorf("reconcile: backfill: %w", err)
	}
	if firstErr != nil {
		return res, fmt.Errorf("reconcile: backfill: %d of %d publishes failed, first: %w", res.Failed, res.Scanned, firstErr)
	}
	return res, nil
}

// publish sends each task's message, Concurrency at once, each waiting for
// its confirm; errs[i] is task i's outcome.
func (j *ReplicationBackfill) publish(ctx context.Context, tasks []store.ReplicationTask) []error {
	errs := make([]error, len(tasks))
	sem := make(chan struct{}, j.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, t := range tasks {
		out, err := j.message(t)
		if err != nil {
			errs[i] = err
			continue
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = ctx.Err()
			continue
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = j.pub.Send(ctx, out)
		}()
	}
	wg.Wait()
	return errs
}

// message is task's ObjectReplicationMessage as the relay publishes it
// (same message id, priority and trace id), with the task's last error.
func (j *ReplicationBackfill) message(t store.ReplicationTask) (messaging.Outgoing, error) {
	id := int64(t.ID)
	if id <= 0 {
		return messaging.Outgoing{}, errors.New("reconcile: backfill: task id out of range")
	}
	m := topology.ObjectReplication{TaskID: &id, TraceID: t.TraceID}
	if t.LastError != nil {
		m.LastError = *t.LastError
	}
	body, err := topology.Encode(m)
	if err != nil {
		return messaging.Outgoing{}, fmt.Errorf("reconcile: backfill: task %d: %w", t.ID, err)
	}
	return messaging.Outgoing{
		RoutingKey: j.dom.RoutingKey, Body: body, TypeID: j.dom.TypeID, TraceID: t.TraceID,
		MessageID: store.ReplicationMessageID(t.ID),
		Priority:  min(t.Priority, uint8(j.dom.MaxPriority)),
	}, nil
}
