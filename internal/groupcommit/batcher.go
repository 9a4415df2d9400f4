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
	flush   func(ctx context.Context, qs []Q) ([]R, error)
	max     int
	in      chan call[Q, R]
	stop    chan struct{}
	exited  chan struct{}
	once    sync.Once
}

// batchTimeout bounds one flush; its callers' contexts do not (see run).
const batchTimeout = time.Minute

type call[Q, R any] struct {
	q   Q
	out chan result[R]
}

type result[R any] struct {
	r   R
	err error
}

// New starts a batcher of at most max items per flush. flush must
// return one R per Q, in order, or an error for all of them.
func New[Q, R any](max int, flush func(ctx context.Context, qs []Q) ([]R, error)) *Batcher[Q, R] {
	b := &Batcher[Q, R]{flush: flush, max: max, in: make(chan call[Q, R], max), stop: make(chan struct{}), exited: make(chan struct{})}
	go b.loop()
	return b
}

// Do queues q and waits for its batch's result, or ctx.
func (b *Batcher[Q, R]) Do(ctx context.Context, q Q) (R, error) {
	c := call[Q, R]{q: q, out: make(chan result[R], 1)}
	var zero R
	select {
	case b.in <- c:
	case <-b.stop:
		return zero, ErrBatcherClosed
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	select {
	case res := <-c.out:
		return res.r, res.err
	case <-b.exited:
		select {
		case res := <-c.out:
			return res.r, res.err
		default:
			return zero, ErrBatcherClosed
		}
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// Close stops taking calls; batches already taken are finished first.
func (b *Batcher[Q, R]) Close() {
	b.once.Do(func() { close(b.stop) })
	<-b.exited
}

func (b *Batcher[Q, R]) loop() {
	defer close(b.exited)
	batch := make([]call[Q, R], 0, b.max)
	for {
		select {
		case c := <-b.in:
			batch = append(batch[:0], c)
		case <-b.stop:
			b.drain()
			return
		}
		b.run(b.fill(batch))
	}
}

// drain runs what was queued before Close.
func (b *Batcher[Q, R]) drain() {
	for {
		batch := b.fill(make([]call[Q, R], 0, b.max))
		if len(batch) == 0 {
			return
		}
		b.run(batch)
	}
}

// fill adds the calls already queued to batch, up to max, without waiting
// for more: a batch goes as soon as the queue is empty.
func (b *Batcher[Q, R]) fill(batch []call[Q, R]) []call[Q, R] {
	for len(batch) < b.max {
		select {
		case c := <-b.in:
			batch = append(batch, c)
		default:
			return batch
		}
	}
	return batch
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
	rs, err := b.flush(ctx, qs)
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
