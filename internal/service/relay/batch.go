package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// item is one claimed row on its way to the broker.
type item struct {
	id       uint64
	attempts int // claims so far, this one included
	out      messaging.Outgoing
	err      error // why it was not published; nil once confirmed
	task     *taskSource
}

// markTimeout bounds the statements that mark a batch's rows.
const markTimeout = 10 * time.Second

// batch claims, publishes and marks one batch of t.
func (r *Relay) batch(ctx context.Context, t *table) (TableResult, error) {
	claim := fmt.Sprintf("%s/%d", r.cfg.Owner, r.nonce.Add(1))
	items, err := t.claim(ctx, r.out, claim, r.cfg.BatchSize, r.cfg.Lease)
	if err != nil {
		return TableResult{}, fmt.Errorf("relay: %w", err)
	}
	if len(items) == 0 {
		return TableResult{}, nil
	}
	// The rows are this claim's until the lease ends: publish them even if
	// ctx ends meanwhile, rather than leave them to the lease, but not
	// after it (another relay may have them by then); then mark them.
	pubCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Lease)
	defer cancel()
	res := TableResult{Claimed: len(items)}
	if t.prepare != nil {
		if err := t.prepare(pubCtx, r.out, items); err != nil {
			for _, it := range items {
				it.err = cmp.Or(it.err, err)
			}
		}
	}
	r.publish(pubCtx, items)
	ctx, cancelMark := context.WithTimeout(context.WithoutCancel(ctx), markTimeout)
	defer cancelMark()
	var ok, failed []*item
	for _, it := range items {
		if it.err == nil {
			ok = append(ok, it)
		} else {
			failed = append(failed, it)
		}
	}
	var errs []error
	if len(ok) > 0 {
		ids := make([]uint64, len(ok))
		for i, it := range ok {
			ids[i] = it.id
		}
		marked, err := r.out.MarkPublished(ctx, t.name, claim, ids)
		if err != nil {
			errs = append(errs, fmt.Errorf("relay: %w", err))
		} else {
			res.Published = marked
			res.Fenced = len(ids) - marked
		}
	}
	for _, it := range failed {
		why := messaging.Clip(it.err.Error(), 1000)
		parked := errors.As(it.err, new(unpublishable))
		var held bool
		var err error
		if parked {
			r.log.ErrorContext(ctx, "outbox row parked: it cannot be published as it is; mend it, then replay it (islectl outbox replay)",
				"table", t.name, "id", it.id, "attempts", it.attempts, "err", it.err)
			held, err = r.out.Park(ctx, t.name, claim, it.id, why)
		} else {
			wait := r.backoff(it.attempts)
			r.log.WarnContext(ctx, "outbox row not published", "table", t.name, "id", it.id, "attempts", it.attempts, "retry_in", wait, "err", it.err)
			held, err = r.out.Retry(ctx, t.name, claim, it.id, why, wait)
		}
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("relay: %w", err))
		case !held:
			res.Fenced++ // another relay's claim now
		case parked:
			res.Parked++
		default:
			res.Failed++
		}
	}
	r.m.batch(t.name, res)
	if len(errs) > 0 {
		return res, errs[0] // the rows concerned go again when the lease ends
	}
	return res, nil
}

// publish sends the items not failed yet, up to Concurrency at once, each
// waiting for its confirm.
func (r *Relay) publish(ctx context.Context, items []*item) {
	sem := make(chan struct{}, r.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, it := range items {
		if it.err != nil {
			continue
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			// The row's traceparent is the span of the transaction that
			// wrote it: the publish continues that trace (doc/tracing.md).
			it.err = r.pub.Send(otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier(it.out.Headers)), it.out)
		}()
	}
	wg.Wait()
}

// backoff is the wait after a failed publish, the row's attempts-th:
// BackoffBase doubled at each attempt after the first, at most BackoffMax.
func (r *Relay) backoff(attempts int) time.Duration {
	d := r.cfg.BackoffBase
	for i := 1; i < attempts && d < r.cfg.BackoffMax; i++ {
		d *= 2
	}
	return min(d, r.cfg.BackoffMax)
}
