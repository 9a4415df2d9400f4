package relay

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/store"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"gorm.io/gorm"
)

// item is one claimed row on its way to the broker.
type item struct {
	id       uint64
	attempts int // claims so far, this one included
	out      messaging.Outgoing
	err      error // why it was not published; nil once confirmed
	task     *taskSource
}

// claimSQL is doc/outbox.md's claim: the rows due, in the claim index's
// order, skipping those another relay holds locked.
func claimSQL(table string) string {
	return "SELECT id FROM " + table + " WHERE published_at IS NULL AND available_at <= NOW(6)" +
		" ORDER BY available_at, id LIMIT ? FOR UPDATE SKIP LOCKED"
}

// markTimeout bounds the statements that mark a batch's rows.
const markTimeout = 10 * time.Second

// readCommitted is the claim's isolation: at REPEATABLE READ the locking
// read would also lock gaps, and business inserts would wait for it.
var readCommitted = &sql.TxOptions{Isolation: sql.LevelReadCommitted}

// batch claims, publishes and marks one batch of t.
func (r *Relay) batch(ctx context.Context, t *table) (TableResult, error) {
	claim := fmt.Sprintf("%s/%d", r.cfg.Owner, r.nonce.Add(1))
	items, err := r.claim(ctx, t, claim)
	if err != nil || len(items) == 0 {
		return TableResult{}, err
	}
	// The rows are this claim's until the lease ends: publish them even if
	// ctx ends meanwhile, rather than leave them to the lease, but not
	// after it (another relay may have them by then); then mark them.
	pubCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.Lease)
	defer cancel()
	res := TableResult{Claimed: len(items)}
	if t.prepare != nil {
		if err := t.prepare(pubCtx, r.db, items); err != nil {
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
		mark := r.db.WithContext(ctx).Exec("UPDATE "+t.name+" SET published_at = NOW(6) WHERE id IN ? AND claimed_by = ?", ids, claim)
		if mark.Error != nil {
			errs = append(errs, fmt.Errorf("relay: mark %d rows of %s published: %w", len(ids), t.name, mark.Error))
		} else {
			res.Published = int(mark.RowsAffected)
			res.Fenced = len(ids) - res.Published
		}
	}
	for _, it := range failed {
		var fail *gorm.DB
		parked := errors.As(it.err, new(unpublishable))
		if parked {
			r.log.ErrorContext(ctx, "outbox row parked: it cannot be published as it is; mend it, then replay it (islectl outbox replay)",
				"table", t.name, "id", it.id, "attempts", it.attempts, "err", it.err)
			fail = r.db.WithContext(ctx).Exec("UPDATE "+t.name+" SET last_error = ?, claimed_by = NULL, parked_at = NOW(6),"+
				" available_at = ? WHERE id = ? AND claimed_by = ?",
				messaging.Clip(it.err.Error(), 1000), store.OutboxParkedUntil, it.id, claim)
		} else {
			wait := r.backoff(it.attempts)
			r.log.WarnContext(ctx, "outbox row not published", "table", t.name, "id", it.id, "attempts", it.attempts, "retry_in", wait, "err", it.err)
			fail = r.db.WithContext(ctx).Exec("UPDATE "+t.name+" SET last_error = ?, claimed_by = NULL,"+
				" available_at = NOW(6) + INTERVAL ? MICROSECOND WHERE id = ? AND claimed_by = ?",
				messaging.Clip(it.err.Error(), 1000), wait.Microseconds(), it.id, claim)
		}
		switch {
		case fail.Error != nil:
			errs = append(errs, fmt.Errorf("relay: record the failure of %s %d: %w", t.name, it.id, fail.Error))
		case fail.RowsAffected == 0:
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

// claim takes up to BatchSize rows of t due now, in a short READ COMMITTED
// transaction: it locks them, skipping rows other relays hold, leases them
// to claim and reads them.
func (r *Relay) claim(ctx context.Context, t *table, claim string) ([]*item, error) {
	var items []*item
	err := r.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var ids []uint64
		if err := tx.Raw(claimSQL(t.name), r.cfg.BatchSize).Scan(&ids).Error; err != nil {
			return err
		}
		if len(ids) == 0 {
			return nil
		}
		if err := tx.Exec("UPDATE "+t.name+" SET claimed_by = ?, attempts = attempts + 1,"+
			" available_at = NOW(6) + INTERVAL ? MICROSECOND WHERE id IN ?", claim, r.cfg.Lease.Microseconds(), ids).Error; err != nil {
			return err
		}
		var err error
		items, err = t.load(tx, ids)
		return err
	}, readCommitted)
	if err != nil {
		return nil, fmt.Errorf("relay: claim %s: %w", t.name, err)
	}
	return items, nil
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
