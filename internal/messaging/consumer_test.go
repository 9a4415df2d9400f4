package messaging_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// 1,000 publishes from 32 goroutines: every one confirmed, every one consumed.
func TestConcurrentPublishesAreAllConfirmedAndConsumed(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainAgentBilling)
	calls := newCounter()
	b.run(t, messaging.ConsumerConfig{Prefetch: 100}, messaging.Route{
		Name: dom.Name, Queue: dom.Queue, Concurrency: 4,
		Handle: b.flow.Main(dom, messaging.Each(func(ctx context.Context, d messaging.Delivery) error { calls.see(d); return nil })),
	})
	const total, workers = 1000, 32
	var wg sync.WaitGroup
	var failed atomic.Int32
	for w := range workers {
		wg.Go(func() {
			for i := w; i < total; i += workers {
				err := b.pub.Send(context.Background(), messaging.Outgoing{
					RoutingKey: dom.RoutingKey, MessageID: fmt.Sprintf("m-%04d", i),
					Body: []byte(`{"username":"u","amountFen":"1","modelName":"m"}`),
				})
				if err != nil {
					failed.Add(1)
					t.Errorf("publish %d: %v", i, err)
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, failed.Load(), "no unconfirmed success: every Send returned only after its confirm")
	require.Eventually(t, func() bool { m, _ := calls.total(); return m == total }, 30*time.Second, poll, "not all consumed")
	time.Sleep(200 * time.Millisecond)
	messages, handled := calls.total()
	require.Equal(t, total, messages)
	require.Equal(t, total, handled, "each consumed once")
}

// Shutdown stops taking deliveries, lets the one in flight finish and be
// acked, and leaves the prefetched ones in the queue.
func TestShutdownDrainsInFlightAndLosesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainEmail)
	started := make(chan string, 10)
	release := make(chan struct{})
	var finished atomic.Int32
	stop := b.run(t, messaging.ConsumerConfig{Prefetch: 10, ShutdownTimeout: 10 * time.Second}, messaging.Route{
		Name: dom.Name, Queue: dom.Queue,
		Handle: b.flow.Main(dom, messaging.Each(func(ctx context.Context, d messaging.Delivery) error {
			started <- d.MessageID
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
			finished.Add(1)
			return nil
		})),
	})
	for i := range 5 {
		require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody), MessageID: fmt.Sprint("m-", i)}))
	}
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	time.Sleep(300 * time.Millisecond) // shutdown has begun with a handler in flight
	close(release)
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("consumer did not stop")
	}
	done := int(finished.Load())
	require.GreaterOrEqual(t, done, 1, "the message in flight finished")
	require.Equal(t, 5-done, b.depth(t, dom.Queue), "the rest went back to the queue")
	require.Zero(t, b.depth(t, dom.RetryQueue)+b.depth(t, dom.DLQ), "nothing retried or dead-lettered by the shutdown")
}

// A handler that outlives the shutdown timeout is canceled and its delivery
// requeued, not lost and not counted as a failed attempt.
func TestShutdownTimeoutRequeues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainEmail)
	started := make(chan struct{}, 1)
	stop := b.run(t, messaging.ConsumerConfig{ShutdownTimeout: 300 * time.Millisecond}, messaging.Route{
		Name: dom.Name, Queue: dom.Queue,
		Handle: b.flow.Main(dom, messaging.Each(func(ctx context.Context, d messaging.Delivery) error {
			started <- struct{}{}
			<-ctx.Done() // a handler stuck on a slow dependency
			return ctx.Err()
		})),
	})
	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody), MessageID: "m-slow"}))
	<-started
	began := time.Now()
	_ = stop()
	require.Less(t, time.Since(began), 5*time.Second)
	require.Eventually(t, func() bool { return b.depth(t, dom.Queue) == 1 }, 5*time.Second, poll, "the delivery was not requeued")
	require.Zero(t, b.depth(t, dom.RetryQueue)+b.depth(t, dom.DLQ))
}

func TestNoGoroutineLeaksAfterShutdown(t *testing.T) {
	b := setup(t)
	dom := b.domain(t, topology.DomainEmail)
	before := goleak.IgnoreCurrent()
	stop := b.run(t, messaging.ConsumerConfig{}, messaging.Route{Name: dom.Name, Queue: dom.Queue, Concurrency: 3,
		Handle: b.flow.Main(dom, messaging.Each(func(context.Context, messaging.Delivery) error { return nil }))})
	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody)}))
	require.NoError(t, stop())
	goleak.VerifyNone(t, before, goleak.IgnoreTopFunction("time.Sleep"))
}

// A consumer the broker cancels (its queue deleted, a quorum leader change)
// hands no phantom delivery to a handler, and consumes again once the queue
// is back.
func TestCancelledConsumerHandsNoPhantomAndResumes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainEmail)
	var mu sync.Mutex
	var seen []messaging.Delivery
	b.run(t, messaging.ConsumerConfig{}, b.mainAndDLQ(dom, func(ctx context.Context, d messaging.Delivery) error {
		mu.Lock()
		seen = append(seen, d)
		mu.Unlock()
		return nil
	})...)
	handled := func(id string) bool {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range seen {
			if d.MessageID == id {
				return true
			}
		}
		return false
	}
	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody), MessageID: "m-before"}))
	require.Eventually(t, func() bool { return handled("m-before") }, 5*time.Second, poll, "not consumed before the cancel")

	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.QueueDelete(dom.Queue, false, false, false)
	require.NoError(t, err)
	time.Sleep(time.Second) // the consumer sees its cancel, and retries a missing queue
	require.NoError(t, b.tp.Declare(b.conn))
	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody), MessageID: "m-after"}))
	require.Eventually(t, func() bool { return handled("m-after") }, 10*time.Second, poll, "not consumed after the queue came back")

	mu.Lock()
	defer mu.Unlock()
	for _, d := range seen {
		require.NotEmpty(t, d.Body, "a handler got a phantom delivery: %+v", d)
	}
	require.Len(t, seen, 2)
	require.Empty(t, b.deadLetters(t, dom), "nothing dead-lettered")
}

// A batching route gets what its channel holds in batches of up to Batch,
// and each delivery is settled on its own merits: the done ones acked (one
// multiple ack when the whole batch is), the failed ones through the retry
// queue, nothing twice, nothing left.
func TestBatchRouteTakesBatchesAndSettlesEachDelivery(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainAgentBilling)
	const total = 600
	for i := range total {
		require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{
			RoutingKey: dom.RoutingKey, MessageID: fmt.Sprintf("m-%03d", i), Body: []byte(`{"username":"u","amountFen":"1","modelName":"m"}`),
		}))
	}
	calls := newCounter()
	var mu sync.Mutex
	largest := 0
	b.run(t, messaging.ConsumerConfig{}, messaging.Route{
		Name: dom.Name, Queue: dom.Queue, Concurrency: 2, Batch: 50,
		Handle: b.flow.Main(dom, func(ctx context.Context, ds []messaging.Delivery) []error {
			mu.Lock()
			largest = max(largest, len(ds))
			mu.Unlock()
			errs := make([]error, len(ds))
			for i, d := range ds {
				// Every tenth fails its first attempt: it comes back from the retry queue.
				if calls.see(d) == 1 && strings.HasSuffix(d.MessageID, "7") {
					errs[i] = errors.New("first attempt refused")
				}
			}
			return errs
		}),
	})
	require.Eventually(t, func() bool { m, c := calls.total(); return m == total && c == total+total/10 }, 30*time.Second, poll)
	time.Sleep(3 * retryDelay)
	messages, handled := calls.total()
	require.Equal(t, total, messages)
	require.Equal(t, total+total/10, handled, "each once, the failed ones twice")
	require.Equal(t, 1, calls.get("m-001"))
	require.Equal(t, 2, calls.get("m-017"))
	mu.Lock()
	require.Greater(t, largest, 1, "a queue that holds many is taken in batches")
	require.LessOrEqual(t, largest, 50)
	mu.Unlock()
	require.Zero(t, b.depth(t, dom.Queue)+b.depth(t, dom.RetryQueue)+b.depth(t, dom.DLQ), "everything acked")
}

// A consumer whose connection is cut consumes again by itself; what was in
// flight is redelivered, so every message is handled at least once and
// none is lost.
func TestConsumerResumesAfterConnectionCuts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainAgentUsageStats)
	proxy := storetest.NewProxy(t, "127.0.0.1:5672")
	calls := newCounter()
	c, err := messaging.NewConsumer(messaging.ConsumerConfig{
		URL: strings.Replace(storetest.AMQPURL(), "127.0.0.1:5672", proxy.Addr(), 1), Name: t.Name(),
	}, b.log)
	require.NoError(t, err)
	c.Add(messaging.Route{Name: dom.Name, Queue: dom.Queue, Concurrency: 2, Batch: 20,
		Handle: b.flow.Main(dom, messaging.Each(func(ctx context.Context, d messaging.Delivery) error {
			calls.see(d)
			time.Sleep(time.Millisecond)
			return nil
		}))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	<-c.Running()
	sent := 0
	for cut := range 3 {
		for range 200 {
			require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, MessageID: fmt.Sprintf("m-%04d", sent), Body: []byte(`{"modelName":"m"}`)}))
			sent++
		}
		proxy.Cut()
		t.Logf("cut %d after %d messages", cut+1, sent)
	}
	require.Eventually(t, func() bool { m, _ := calls.total(); return m == sent }, 30*time.Second, poll, "every message handled after the cuts")
	require.Eventually(t, func() bool { return b.depth(t, dom.Queue) == 0 }, 10*time.Second, poll, "and acked")
	cancel()
	require.NoError(t, <-done)
}

// A route that finishes what it holds (FinishHeld) handles, on a drain,
// the deliveries its channel prefetched rather than give them back: given
// back, a message without an id would come back flagged as redelivered,
// which a consumer keying such messages by delivery must take for one it
// may have handled (doc/money.md).
func TestDrainHandlesWhatAFinishingRouteHolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainAgentBilling)
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	calls := newCounter()
	var redelivered atomic.Int32
	c, err := messaging.NewConsumer(messaging.ConsumerConfig{URL: storetest.AMQPURL(), Prefetch: 10, ShutdownTimeout: time.Minute}, b.log)
	require.NoError(t, err)
	c.Add(messaging.Route{Name: dom.Name, Queue: dom.Queue, FinishHeld: true,
		Handle: b.flow.Main(dom, messaging.Each(func(ctx context.Context, d messaging.Delivery) error {
			calls.see(d)
			if d.Redelivered {
				redelivered.Add(1)
			}
			once.Do(func() { close(started); <-release })
			return nil
		}))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(cancel)
	<-c.Running()

	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	for i := range 5 {
		require.NoError(t, ch.Publish(dom.Exchange, dom.RoutingKey, false, false, amqp.Publishing{
			ContentType: "application/json", Headers: amqp.Table{messaging.HeaderTypeID: dom.TypeID},
			Body: fmt.Appendf(nil, `{"username":"u","amountFen":"%d","modelName":"m"}`, i+1),
		}))
	}
	<-started
	require.Eventually(t, func() bool { return b.depth(t, dom.Queue) == 0 }, 10*time.Second, poll, "the others prefetched")
	cancel()
	select {
	case <-c.Draining():
	case <-time.After(time.Minute):
		t.Fatal("no drain")
	}
	close(release)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the consumer did not stop")
	}
	messages, handled := calls.total()
	require.Equal(t, 5, messages, "every delivery the channel held was handled")
	require.Equal(t, 5, handled)
	require.Zero(t, redelivered.Load())
	require.Zero(t, b.depth(t, dom.Queue), "none given back")
}
