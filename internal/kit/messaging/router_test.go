package messaging_test

// The worker's way of consuming, end to end: a watermill Router running
// each route's handler behind its chain, fed by Isle's Subscriber.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/internal/kit/groupcommit"
	"github.com/eisland/isle/internal/kit/messaging"
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
	w := b.run(t, messaging.SubscriberConfig{Prefetch: 100, Channels: 4},
		b.main(dom, func(ctx context.Context, d messaging.Delivery) error { calls.see(d); return nil }))
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
	// Stopped, the subscriber gives back what it holds unanswered: a message
	// handled twice is counted by now, and one that would come again is in
	// the queue.
	require.NoError(t, w.stop())
	messages, handled := calls.total()
	require.Equal(t, total, messages)
	require.Equal(t, total, handled, "each consumed once")
	require.Zero(t, b.depth(t, dom.Queue), "each acked")
}

// heldBack is a message.Subscriber that hands the router the first message
// of each subscription at once and the others only once gate closes: until
// then they stay with the Subscriber, as deliveries its channel holds (the
// broker sent them, within the prefetch) that a reader has not taken yet.
type heldBack struct {
	*messaging.Subscriber
	gate <-chan struct{}
}

func (h heldBack) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	in, err := h.Subscriber.Subscribe(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make(chan *message.Message)
	go func() {
		defer close(out)
		if msg, ok := <-in; ok {
			out <- msg
			select {
			case <-h.gate:
			case <-ctx.Done():
			}
		}
		for msg := range in {
			out <- msg
		}
	}()
	return out, nil
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
	sub := b.subscriber(t, messaging.SubscriberConfig{Prefetch: 10, ShutdownTimeout: 10 * time.Second})
	stop := startRouter(t, heldBack{sub, sub.Draining()}, 10*time.Second, b.main(dom, func(ctx context.Context, d messaging.Delivery) error {
		started <- d.MessageID
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		finished.Add(1)
		return nil
	}))
	for i := range 5 {
		require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody), MessageID: fmt.Sprint("m-", i)}))
	}
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case <-sub.Draining(): // shutdown has begun with a handler in flight
	case <-time.After(15 * time.Second):
		t.Fatal("no drain")
	}
	close(release)
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(15 * time.Second):
		t.Fatal("the router did not stop")
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
	w := b.run(t, messaging.SubscriberConfig{ShutdownTimeout: 300 * time.Millisecond}, b.main(dom, func(ctx context.Context, d messaging.Delivery) error {
		started <- struct{}{}
		<-ctx.Done() // a handler stuck on a slow dependency
		return ctx.Err()
	}))
	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody), MessageID: "m-slow"}))
	<-started
	began := time.Now()
	_ = w.stop()
	require.Less(t, time.Since(began), 5*time.Second)
	require.Eventually(t, func() bool { return b.depth(t, dom.Queue) == 1 }, 5*time.Second, poll, "the delivery was not requeued")
	require.Zero(t, b.depth(t, dom.RetryQueue)+b.depth(t, dom.DLQ))
}

func TestNoGoroutineLeaksAfterShutdown(t *testing.T) {
	b := setup(t)
	dom := b.domain(t, topology.DomainEmail)
	before := goleak.IgnoreCurrent()
	w := b.run(t, messaging.SubscriberConfig{Channels: 3}, b.main(dom, func(context.Context, messaging.Delivery) error { return nil }))
	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody)}))
	require.NoError(t, w.stop())
	goleak.VerifyNone(t, before)
}

// A subscription whose consumer the broker cancels (its queue deleted, a
// quorum leader change) hands no phantom delivery to a handler, and
// consumes again once the queue is back.
func TestCancelledConsumerHandsNoPhantomAndResumes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainEmail)
	var mu sync.Mutex
	var seen []messaging.Delivery
	w := b.run(t, messaging.SubscriberConfig{}, b.mainAndDLQ(dom, func(ctx context.Context, d messaging.Delivery) error {
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

	consumeFailed := w.sub.ConsumeFailed()
	consumeFailed.Init()
	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.QueueDelete(dom.Queue, false, false, false)
	require.NoError(t, err)
	// The subscriber sees its cancel, and tries the missing queue.
	require.ErrorContains(t, consumeFailed.Wait(t), dom.Queue)
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

// batcherWaiters counts the goroutines of t's handlers that wait for their
// answer from a groupcommit batcher: a call waits only once it is queued.
func batcherWaiters(t *testing.T) int {
	t.Helper()

	var stacks string
	for size := 1 << 20; stacks == ""; size *= 2 {
		buf := make([]byte, size)
		if n := runtime.Stack(buf, true); n < size {
			stacks = string(buf[:n])
		}
	}
	mine := "messaging_test." + t.Name() + ".func"
	n := 0
	for _, g := range strings.Split(stacks, "\n\n") {
		if strings.Contains(g, "groupcommit.(*Batcher[...]).wait(") && strings.Contains(g, mine) {
			n++
		}
	}
	return n
}

// The Router's handlers take one delivery each, many at once, and those in
// flight together meet in one group commit (as the billing and usage
// consumers' calls do in the shared writers): while a commit is held, the
// calls behind it queue up and go together in the next, up to the
// batcher's maximum. Each delivery is still answered on its own merits: the
// done ones acked, the failed ones through the retry queue, nothing twice,
// nothing left, nothing nacked.
func TestConcurrentHandlersMeetInOneGroupCommitAndAckEachDelivery(t *testing.T) {
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
	largest, first := 0, 0
	held, open := make(chan struct{}), make(chan struct{})
	var once sync.Once
	commit := groupcommit.New("test", 50, func(_ context.Context, ds []messaging.Delivery) ([]error, error) {
		once.Do(func() {
			first = len(ds)
			close(held)
			<-open
		})
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
		return errs, nil
	})
	t.Cleanup(commit.Close)
	w := b.run(t, messaging.SubscriberConfig{Channels: 2}, b.main(dom, func(ctx context.Context, d messaging.Delivery) error {
		err, commitErr := commit.Do(ctx, d)
		return cmp.Or(commitErr, err)
	}))
	<-held
	require.Eventually(t, func() bool { return batcherWaiters(t) >= first+2 }, 10*time.Second, poll,
		"handlers in flight queue behind the held commit")
	close(open)

	require.Eventually(t, func() bool { m, c := calls.total(); return m == total && c == total+total/10 }, 30*time.Second, poll)
	// Stopped, the subscriber gives back what it holds unanswered: a call
	// beyond these is counted by now, and a delivery still to come is in a
	// queue.
	require.NoError(t, w.stop())
	messages, handled := calls.total()
	require.Equal(t, total, messages)
	require.Equal(t, total+total/10, handled, "each once, the failed ones twice")
	require.Equal(t, 1, calls.get("m-001"))
	require.Equal(t, 2, calls.get("m-017"))
	mu.Lock()
	require.Greater(t, largest, 1, "the calls in flight together are committed together")
	require.LessOrEqual(t, largest, 50)
	mu.Unlock()
	require.Zero(t, b.depth(t, dom.Queue)+b.depth(t, dom.RetryQueue)+b.depth(t, dom.DLQ), "everything acked")
	stats := w.sub.Stats()
	require.Eventually(t, func() bool { return stats.Acked.Load() == total+total/10 }, 10*time.Second, poll,
		"each delivery acked once, the copies too: %d", stats.Acked.Load())
	require.Zero(t, stats.Nacks.Load())
}

// A subscriber whose connection is cut consumes again by itself; what was
// in flight is redelivered, so every message is handled at least once and
// none is lost.
func TestConsumerResumesAfterConnectionCuts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainAgentUsageStats)
	proxy := storetest.NewProxy(t, "127.0.0.1:5672")
	calls := newCounter()
	w := b.run(t, messaging.SubscriberConfig{
		URL:      strings.Replace(storetest.AMQPURL(), "127.0.0.1:5672", proxy.Addr(), 1),
		Channels: 2, Prefetch: 40,
	}, b.main(dom, func(ctx context.Context, d messaging.Delivery) error {
		calls.see(d)
		time.Sleep(time.Millisecond)
		return nil
	}))
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
	require.NoError(t, w.stop())
}

// A subscriber that finishes what it holds (FinishHeld) hands out, on a
// drain, the deliveries its channel prefetched rather than give them back:
// given back, a message without an id would come back flagged as
// redelivered, which a consumer keying such messages by delivery must take
// for one it may have handled (doc/money.md).
func TestDrainHandlesWhatAFinishingRouteHolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainAgentBilling)
	started, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	calls := newCounter()
	var redelivered atomic.Int32
	sub := b.subscriber(t, messaging.SubscriberConfig{Prefetch: 10, ShutdownTimeout: time.Minute, FinishHeld: true})
	stop := startRouter(t, heldBack{sub, sub.Draining()}, time.Minute, b.main(dom, func(ctx context.Context, d messaging.Delivery) error {
		calls.see(d)
		if d.Redelivered {
			redelivered.Add(1)
		}
		once.Do(func() { close(started); <-release })
		return nil
	}))

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
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	select {
	case <-sub.Draining():
	case <-time.After(time.Minute):
		t.Fatal("no drain")
	}
	close(release)
	select {
	case err := <-stopped:
		require.NoError(t, err)
	case <-time.After(time.Minute):
		t.Fatal("the router did not stop")
	}
	messages, handled := calls.total()
	require.Equal(t, 5, messages, "every delivery the channel held was handled")
	require.Equal(t, 5, handled)
	require.Zero(t, redelivered.Load())
	require.Zero(t, b.depth(t, dom.Queue), "none given back")
}
