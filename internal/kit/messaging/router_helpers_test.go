package messaging_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store/storetest"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// answerWithin bounds the wait for a message's ack or nack, so that a test
// that went wrong fails rather than hangs.
const answerWithin = 30 * time.Second

// feeder is a watermill message.Subscriber for tests: it hands the router
// the deliveries a test feeds it, each a message built as Isle's subscriber
// builds one (uuid the message id, metadata the headers, payload the body,
// the Delivery in its context), and the test sees each one's ack or nack.
// Every message's context ends when the test calls hardStop, as the
// worker's shutdown timeout ends those of the real subscriber.
type feeder struct {
	hard     context.Context
	hardStop context.CancelFunc

	mu     sync.Mutex
	topics map[string]chan *message.Message

	done      chan struct{}
	closeOnce sync.Once
}

func newFeeder() *feeder {
	f := &feeder{topics: map[string]chan *message.Message{}, done: make(chan struct{})}
	f.hard, f.hardStop = context.WithCancel(context.Background())
	return f
}

func (f *feeder) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	in, out := make(chan *message.Message), make(chan *message.Message)
	f.mu.Lock()
	f.topics[topic] = in
	f.mu.Unlock()
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case <-f.done:
				return
			case msg := <-in:
				select {
				case out <- msg:
				case <-ctx.Done():
					msg.Nack()
					return
				case <-f.done:
					msg.Nack()
					return
				}
			}
		}
	}()
	return out, nil
}

func (f *feeder) Close() error {
	f.closeOnce.Do(func() { close(f.done) })
	return nil
}

// feed hands d to the router's handler of topic and returns its message.
func (f *feeder) feed(t *testing.T, topic string, d messaging.Delivery) *message.Message {
	t.Helper()
	msg := message.NewMessage(d.MessageID, d.Body)
	for k, v := range d.Headers {
		msg.Metadata.Set(k, v)
	}
	msg.SetContext(messaging.WithDelivery(f.hard, d))
	return f.send(t, topic, msg)
}

// send hands msg, as it is, to the router's handler of topic.
func (f *feeder) send(t *testing.T, topic string, msg *message.Message) *message.Message {
	t.Helper()
	f.mu.Lock()
	in := f.topics[topic]
	f.mu.Unlock()
	require.NotNil(t, in, "no handler subscribed %s", topic)
	select {
	case in <- msg:
	case <-time.After(answerWithin):
		t.Fatalf("the router took no message from %s", topic)
	}
	return msg
}

// acked waits until msg is acked (true) or nacked (false).
func acked(t *testing.T, msg *message.Message) bool {
	t.Helper()
	select {
	case <-msg.Acked():
		return true
	case <-msg.Nacked():
		return false
	case <-time.After(answerWithin):
		t.Fatalf("message %s neither acked nor nacked", msg.UUID)
		return false
	}
}

// handle feeds d to topic's handler and waits for its ack (true) or nack.
func (f *feeder) handle(t *testing.T, topic string, d messaging.Delivery) bool {
	t.Helper()
	return acked(t, f.feed(t, topic, d))
}

// runRouter runs a watermill router with the routes, fed by f, until the
// test ends; then the messages' contexts end first, as at a worker's
// shutdown timeout, and the router closes.
func runRouter(t *testing.T, f *feeder, routes ...testRoute) {
	t.Helper()
	stop := startRouter(t, f, 0, routes...)
	t.Cleanup(func() {
		f.hardStop()
		require.NoError(t, stop())
	})
}

// setupSlowRetry is setup without a database, with retry queues that keep
// a copy for an hour: a copy sent to the retry queue stays there for the
// test to read.
func setupSlowRetry(t *testing.T) *testBundle {
	t.Helper()
	return setupRetry(t, time.Hour)
}

// take waits for a message in queue and takes it off, as a delivery of
// queue.
func (b *testBundle) take(t *testing.T, queue string) messaging.Delivery {
	t.Helper()
	var (
		got    messaging.Delivery
		getErr error
	)
	require.Eventually(t, func() bool {
		d, ok, err := b.get(queue)
		got, getErr = d, err
		return ok || err != nil
	}, 10*time.Second, poll, "nothing in %s", queue)
	require.NoError(t, getErr)
	return got
}

// get takes the message waiting in queue off it, if there is one. It does
// not fail the test, so that a handler's goroutine may call it.
func (b *testBundle) get(queue string) (messaging.Delivery, bool, error) {
	ch, err := b.conn.Channel()
	if err != nil {
		return messaging.Delivery{}, false, err
	}
	defer ch.Close()
	d, ok, err := ch.Get(queue, true)
	return messaging.DeliveryOf(d, queue), ok, err
}

// delivery is a delivery of queue whose producer published body with the
// id and headers given, as the subscriber hands it over.
func delivery(queue, id, body string, headers amqp.Table) messaging.Delivery {
	return messaging.DeliveryOf(amqp.Delivery{MessageId: id, Body: []byte(body), Headers: headers}, queue)
}

// outcomes reads isle_messages_total of domain from reg, by outcome, and
// the number of isle_handler_duration_seconds observations.
func outcomes(t *testing.T, reg prometheus.Gatherer, domain string) (map[string]float64, uint64) {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	counts := map[string]float64{}
	var observed uint64
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["domain"] != domain {
				continue
			}
			switch f.GetName() {
			case "isle_messages_total":
				counts[labels["outcome"]] = m.GetCounter().GetValue()
			case "isle_handler_duration_seconds":
				observed = m.GetHistogram().GetSampleCount()
			}
		}
	}
	return counts, observed
}

// jsonLogger logs JSON lines to a buffer, with the ids the context carries
// (correlation.Handler), as the worker does.
func jsonLogger() (*slog.Logger, *storetest.LogBuffer) {
	logs := &storetest.LogBuffer{}
	return slog.New(correlation.Handler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))), logs
}
