// Package groupcommit groups concurrent calls into one call of a flush
// function: while one batch is flushed (a MySQL transaction commits), the
// calls that arrive queue up and go together in the next. It knows nothing
// of Isle; store's writers build on it.
package groupcommit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eisland/isle/internal/kit/testsignal"
	"github.com/eisland/isle/internal/kit/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// ErrBatcherClosed is returned by Do after Close.
var ErrBatcherClosed = errors.New("groupcommit: batcher closed")

// Batcher groups concurrent calls into one call of flush: while one batch
// commits, the calls that arrive queue up and go together in the next. With N
// handlers calling Do at once, one transaction carries up to N items instead
// of N transactions — the group commit that keeps a per-message MySQL
// transaction from being the fleet's ceiling. It adds no delay of its own: a
// lone call is flushed at once.
type Batcher[Q, R any] struct {
	// Observe, when set before the first Do, is told the size of each batch.
	Observe func(n int)
	name    string // of each flush's span
	flush   func(ctx context.Context, qs []Q) ([]R, error)
	max     int
	in      chan []call[Q, R] // one caller's calls: one for Do, all of them for DoAll
	carry   []call[Q, R]      // calls taken from in that the last batch had no room for; loop only
	batch   []call[Q, R]      // the batch being filled and flushed, its array reused; loop only
	qs      []Q               // the items flush is given, its array reused; loop only
	stop    chan struct{}
	exited  chan struct{}
	once    sync.Once

	queued testsignal.Signal[int] // a caller's calls were queued, how many: for tests, off otherwise
}

// batchTimeout bounds one flush; its callers' contexts do not (see run).
const batchTimeout = time.Minute

type call[Q, R any] struct {
	q    Q
	w    *waiter[R]
	span trace.SpanContext // the caller's, which the flush's span links to
}

// waiter is where a call's result comes, and whether its flush began or its
// caller gave up, whichever came first.
type waiter[R any] struct {
	out   chan result[R]
	state atomic.Int32 // callQueued, callTaken or callAbandoned
}

// States of a call: queued until a flush takes it or its caller gives up
// (its context ended); a call given up is never flushed, and one taken is
// answered by its flush, which its caller waits for.
const (
	callQueued int32 = iota
	callTaken
	callAbandoned
)

func newCall[Q, R any](q Q, span trace.SpanContext) call[Q, R] {
	return call[Q, R]{q: q, w: &waiter[R]{out: make(chan result[R], 1)}, span: span}
}

type result[R any] struct {
	r   R
	err error
}

// New starts a batcher of at most max items per flush. flush must
// return one R per Q, in order, or an error for all of them, and keep no
// reference to qs once it returned: the batcher fills the same array for
// the next flush rather than allocate one per flush. Each flush
// runs in a span called name, linked to the span of every call it
// carries: a batch serves many traces, and belongs to none of them.
func New[Q, R any](name string, max int, flush func(ctx context.Context, qs []Q) ([]R, error)) *Batcher[Q, R] {
	b := &Batcher[Q, R]{name: name, flush: flush, max: max, in: make(chan []call[Q, R], max), stop: make(chan struct{}), exited: make(chan struct{})}
	go b.loop()
	return b
}

// Do queues q and waits for its batch's result. When ctx ends before a
// flush took q, q is dropped and ctx's error returned: an error from Do
// means q was not committed, or its flush failed. Once a flush has q, Do
// waits for it (bounded by the flush's own timeout), whatever ctx does.
func (b *Batcher[Q, R]) Do(ctx context.Context, q Q) (R, error) {
	c := newCall[Q, R](q, trace.SpanContextFromContext(ctx))
	if err := b.enqueue(ctx, []call[Q, R]{c}); err != nil {
		var zero R
		return zero, err
	}
	res := b.wait(ctx, c)
	return res.r, res.err
}

// DoAll queues every q at once, so that they go in as few flushes as max
// allows (sharing them with other callers'), and waits for their results:
// one R or one error per q, in order. If ctx ends before they are queued,
// each gets ctx's error.
func (b *Batcher[Q, R]) DoAll(ctx context.Context, qs []Q) ([]R, []error) {
	rs, errs := make([]R, len(qs)), make([]error, len(qs))
	calls := make([]call[Q, R], len(qs))
	span := trace.SpanContextFromContext(ctx)
	for i, q := range qs {
		calls[i] = newCall[Q, R](q, span)
	}
	if err := b.enqueue(ctx, calls); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return rs, errs
	}
	for i, c := range calls {
		res := b.wait(ctx, c)
		rs[i], errs[i] = res.r, res.err
	}
	return rs, errs
}

func (b *Batcher[Q, R]) enqueue(ctx context.Context, cs []call[Q, R]) error {
	if err := ctx.Err(); err != nil {
		return err // a select would pick a free slot as readily as the end
	}
	select {
	case b.in <- cs:
		b.queued.Send(len(cs))
		return nil
	case <-b.stop:
		return ErrBatcherClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// wait returns c's result. If ctx ends first, c is given up unless a flush
// took it already: then the flush's result is waited for, so that an error
// returned always means the call was not committed (or its flush failed).
func (b *Batcher[Q, R]) wait(ctx context.Context, c call[Q, R]) result[R] {
	select {
	case res := <-c.w.out:
		return res
	case <-b.exited:
	case <-ctx.Done():
		if c.w.state.CompareAndSwap(callQueued, callAbandoned) {
			return result[R]{err: ctx.Err()}
		}
		select {
		case res := <-c.w.out:
			return res
		case <-b.exited:
		}
	}
	select {
	case res := <-c.w.out:
		return res
	default:
		return result[R]{err: ErrBatcherClosed}
	}
}

// Close stops taking calls; batches already taken are finished first.
func (b *Batcher[Q, R]) Close() {
	b.once.Do(func() { close(b.stop) })
	<-b.exited
}

func (b *Batcher[Q, R]) loop() {
	defer close(b.exited)
	for {
		if len(b.carry) == 0 {
			select {
			case cs := <-b.in:
				b.carry = cs
			case <-b.stop:
				b.drain()
				return
			}
		}
		b.flushBatch(b.fill())
	}
}

// flushBatch runs batch, then lets go of what it refers to (its callers'
// items and waiters) while the array waits for the next batch.
func (b *Batcher[Q, R]) flushBatch(batch []call[Q, R]) {
	b.run(b.take(batch))
	clear(batch)
}

// take keeps the calls of batch whose callers still wait, marking them taken
// so that their callers wait for the flush; the others are dropped.
func (b *Batcher[Q, R]) take(batch []call[Q, R]) []call[Q, R] {
	kept := batch[:0]
	for _, c := range batch {
		if c.w.state.CompareAndSwap(callQueued, callTaken) {
			kept = append(kept, c)
		}
	}
	return kept
}

// drain runs what was queued before Close.
func (b *Batcher[Q, R]) drain() {
	for {
		batch := b.fill()
		if len(batch) == 0 {
			return
		}
		b.flushBatch(batch)
	}
}

// fill takes the next batch: the calls carried over, then those already
// queued, up to max, without waiting for more (a batch goes as soon as the
// queue is empty). What does not fit is carried to the next batch.
func (b *Batcher[Q, R]) fill() []call[Q, R] {
	if b.batch == nil {
		b.batch = make([]call[Q, R], 0, b.max)
	}
	batch := b.batch[:0]
	for {
		if len(b.carry) == 0 {
			select {
			case cs := <-b.in:
				b.carry = cs
			default:
				return batch
			}
		}
		n := min(len(b.carry), b.max-len(batch))
		batch = append(batch, b.carry[:n]...)
		b.carry = b.carry[n:]
		if len(batch) == b.max {
			return batch
		}
	}
}

func (b *Batcher[Q, R]) run(batch []call[Q, R]) {
	if len(batch) == 0 {
		return
	}
	if b.Observe != nil {
		b.Observe(len(batch))
	}
	qs := b.qs[:0]
	for _, c := range batch {
		qs = append(qs, c.q)
	}
	b.qs = qs
	defer clear(qs)
	// The callers' contexts may end while the batch commits; the commit
	// itself runs to its end so that its outcome is known.
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	ctx, span := b.startSpan(ctx, batch)
	rs, err := b.flush(ctx, qs)
	tracing.End(span, err)
	if err == nil && len(rs) != len(qs) {
		err = errors.New("groupcommit: flush returned the wrong number of results")
	}
	if err != nil && len(batch) > 1 {
		// One bad item must not fail the others: go again one by one, so
		// only the calls that fail alone get an error.
		for _, c := range batch {
			b.run([]call[Q, R]{c})
		}
		return
	}
	for i, c := range batch {
		if err != nil {
			c.w.out <- result[R]{err: err}
			continue
		}
		c.w.out <- result[R]{r: rs[i]}
	}
}

// startSpan starts the span of one flush, linked to its callers' spans.
func (b *Batcher[Q, R]) startSpan(ctx context.Context, batch []call[Q, R]) (context.Context, trace.Span) {
	var links []trace.Link
	for _, c := range batch {
		if c.span.IsValid() {
			links = append(links, trace.Link{SpanContext: c.span})
		}
	}
	ctx, span := tracing.Tracer().Start(ctx, b.name, trace.WithLinks(links...))
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("batch.size", len(batch)))
	}
	return ctx, span
}
