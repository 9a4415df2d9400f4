package messaging

import (
	"context"
	"sync"

	"github.com/eisland/isle/internal/kit/testsignal"
)

// bodyRuns are the deliveries of one queue without a producer's id that
// are in their handler now, by body hash (Delivery.MessageID). A delivery
// the broker flags as redelivered may be the same message as one still at
// work here (its channel was lost while the handler ran): it waits for
// those to finish before its own handler runs, so that what they applied
// is committed when it looks for it (doc/money.md, "Messages without
// ids"). Fresh deliveries of equal bodies are distinct messages and run
// side by side. One per RetryMiddleware: all the deliveries of a queue in
// a process meet there.
type bodyRuns struct {
	mu  sync.Mutex
	by  map[string][]chan struct{} // each run's end, closed when it leaves
	met testsignal.Signal[string]  // a redelivery waits for runs of its body: for tests, off otherwise
}

// enter registers d's run, after the runs of its body already at work when
// d is a redelivery; it returns the run's leave, or ctx's error while it
// waited.
func (b *bodyRuns) enter(ctx context.Context, d Delivery) (leave func(), err error) {
	if !d.idless {
		return func() {}, nil
	}
	key := d.MessageID
	b.mu.Lock()
	if d.Redelivered {
		if earlier := b.by[key]; len(earlier) > 0 {
			earlier = append([]chan struct{}(nil), earlier...)
			b.mu.Unlock()
			b.met.Send(key)
			for _, done := range earlier {
				select {
				case <-done:
				case <-ctx.Done():
					return nil, context.Cause(ctx)
				}
			}
			b.mu.Lock()
		}
	}
	if b.by == nil {
		b.by = map[string][]chan struct{}{}
	}
	done := make(chan struct{})
	b.by[key] = append(b.by[key], done)
	b.mu.Unlock()
	return func() { b.leave(key, done) }, nil
}

func (b *bodyRuns) leave(key string, done chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	runs := b.by[key]
	for i, c := range runs {
		if c == done {
			runs = append(runs[:i], runs[i+1:]...)
			break
		}
	}
	if len(runs) == 0 {
		delete(b.by, key)
	} else {
		b.by[key] = runs
	}
	close(done)
}
