// Package groupcommit groups concurrent calls into one call of a flush
// function: while one batch is flushed (a MySQL transaction commits), the
// calls that arrive queue up and go together in the next. It knows nothing
// of Isle; store's writers build on it.
package groupcommit

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/eisland/isle/internal/testsignal"
	"github.com/eisland/isle/internal/tracing"
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
	stop    chan struct{}
	exited  chan struct{}
	once    sync.Once

	queued testsignal.Signal[int] // a caller's calls were queued, how many: for tests, off otherwise
}

// batchTimeout bounds one flush; its callers' contexts do not (see run).
const batchTimeout = time.Minute

type call[Q, R any] struct {
	q    Q
	out  chan result[R]
	span trace.SpanContext // the caller's, which the flush's span links to
}

type result[R any] struct {
	r   R
	err error
}

// New starts a batcher of at most max items per flush. flush must
// return one R per Q, in order, or an error for all of them. Each flush
// runs in a span called name, linked to the span of every call it
// carries: a batch serves many traces, and belongs to none of them.
func New[Q, R any](name string, max int, flush func(ctx context.Context, qs []Q) ([]R, error)) *Batcher[Q, R] {
	b := &Batcher[Q, R]{name: name, flush: flush, max: max, in: make(chan []call[Q, R], max), stop: make(chan struct{}), exited: make(chan struct{})}
	go b.loop()
	return b
}

// Do queues q and waits for its batch's result, or ctx.
func (b *Batcher[Q, R]) Do(ctx context.Context, q Q) (R, error) {
	c := call[Q, R]{q: q, out: make(chan result[R], 1), span: trace.SpanContextFromContext(ctx)}
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
		calls[i] = call[Q, R]{q: q, out: make(chan result[R], 1), span: span}
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

func (b *Batcher[Q, R]) wait(ctx context.Context, c call[Q, R]) result[R] {
	select {
	case res := <-c.out:
		return res
	case <-b.exited:
		select {
		case res := <-c.out:
			return res
		default:
			return result[R]{err: ErrBatcherClosed}
		}
	case <-ctx.Done():
		return result[R]{err: ctx.Err()}
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
		b.run(b.fill())
	}
}

// drain runs what was queued before Close.
func (b *Batcher[Q, R]) drain() {
	for {
		batch := b.fill()
		if len(batch) == 0 {
			return
		}
		b.run(batch)
	}
}

// fill takes the next batch: the calls carried over, then those already
// queued, up to max, without waiting for more (a batch goes as soon as the
// queue is empty). What does not fit is carried to the next batch.
func (b *Batcher[Q, R]) fill() []call[Q, R] {
	batch := make([]call[Q, R], 0, b.max)
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
	if b.Observe != nil {
		b.Observe(len(batch))
	}
	qs := make([]Q, len(batch))
	for i, c := range batch {
		qs[i] = c.q
	}
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
			c.out <- result[R]{err: err}
			continue
		}
		c.out <- result[R]{r: rs[i]}
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
