package messaging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/store/storetest"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// subTest is a test's queues and a publisher to them.
type subTest struct {
	t    *testing.T
	conf *conformance
	conn *amqp.Connection
}

func newSubTest(t *testing.T) *subTest {
	t.Helper()
	if testing.Short() {
		t.Skip("needs RabbitMQ")
	}
	c := newConformance(t)
	conn, _ := storetest.AMQP(t)
	return &subTest{t: t, conf: c, conn: conn}
}

// queue declares a queue of the test's own.
func (s *subTest) queue() string {
	ch, err := s.conn.Channel()
	require.NoError(s.t, err)
	defer ch.Close()
	q := conformancePrefix + watermill.NewShortUUID()
	require.NoError(s.t, s.conf.declare(ch, q))
	return q
}

func (s *subTest) publish(queue string, n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%03d", queue, i)
		require.NoError(s.t, queuePublisher{s.conf.pub}.Publish(queue, message.NewMessage(ids[i], []byte(strconv.Itoa(i)))))
	}
	return ids
}

// subscriber returns a Subscriber of cfg (URL defaulted), closed when the test ends.
func (s *subTest) subscriber(cfg SubscriberConfig) *Subscriber {
	cfg.URL = cmpOr(cfg.URL, storetest.AMQPURL())
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.Default()
	}
	sub, err := NewSubscriber(cfg, log)
	require.NoError(s.t, err)
	s.t.Cleanup(func() { _ = sub.Close() })
	return sub
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func (s *subTest) depth(queue string) int { return storetest.QueueDepth(s.t, s.conn, queue) }

// viaProxy is the broker's URL through p.
func viaProxy(t *testing.T, p *storetest.Proxy) string {
	t.Helper()

	u, err := url.Parse(storetest.AMQPURL())
	require.NoError(t, err)
	u.Host = p.Addr()
	return u.String()
}

func brokerAddr(t *testing.T) string {
	t.Helper()

	u, err := url.Parse(storetest.AMQPURL())
	require.NoError(t, err)
	return u.Host
}

func receive(t *testing.T, msgs <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m, ok := <-msgs:
		require.True(t, ok, "message channel closed")
		return m
	case <-time.After(15 * time.Second):
		t.Fatal("no message within 15 s")
		return nil
	}
}

func TestSubscriberAnswersEveryDeliveryOnce(t *testing.T) {
	t.Parallel()
	st := newSubTest(t)
	q := st.queue()
	ids := st.publish(q, 300)
	sub := st.subscriber(SubscriberConfig{Prefetch: 100, Channels: 2})
	msgs, err := sub.Subscribe(context.Background(), q)
	require.NoError(t, err)

	// Every 7th message is nacked on its first delivery: it must come back
	// (flagged redelivered), and everything else exactly once.
	seen := map[string]int{}
	var wg sync.WaitGroup
	for range len(ids) + 43 {
		m := receive(t, msgs)
		seen[m.UUID]++
		i, err := strconv.Atoi(string(m.Payload))
		require.NoError(t, err)
		d, ok := DeliveryFrom(m.Context())
		require.True(t, ok)
		raw, ok := AMQPDeliveryFrom(m.Context())
		require.True(t, ok)
		require.Equal(t, q, d.Queue)
		require.Equal(t, m.UUID, d.MessageID)
		require.Equal(t, raw.Redelivered, d.Redelivered)
		nack := i%7 == 0 && seen[m.UUID] == 1
		if i%7 == 0 {
			require.LessOrEqual(t, seen[m.UUID], 2, "message %s came again after its ack", m.UUID)
		} else {
			require.Equal(t, 1, seen[m.UUID], "message %s came again after its ack", m.UUID)
		}
		require.Equal(t, seen[m.UUID] == 2, d.Redelivered)
		wg.Go(func() { // answered concurrently and out of order, as a Router does
			if nack {
				m.Nack()
			} else {
				m.Ack()
			}
		})
	}
	wg.Wait()
	require.Len(t, seen, len(ids))
	stats := sub.Stats()
	require.Eventually(t, func() bool { return stats.Acked.Load() == int64(len(ids)) }, 15*time.Second, 10*time.Millisecond,
		"answered %d of %d", stats.Acked.Load(), len(ids))
	require.Equal(t, int64(43), stats.Nacks.Load(), "each 7th of 300 nacked once")
	frames := stats.MultipleAcks.Load() + stats.SingleAcks.Load()
	t.Logf("300 deliveries answered with %d ack frames (%d multiple) and %d nacks", frames, stats.MultipleAcks.Load(), stats.Nacks.Load())
	require.NoError(t, sub.Close())
	require.Zero(t, st.depth(q), "every delivery was acked before the connection closed")
}

// A handler that takes its time holds back neither the acks of the
// messages behind it nor, after a connection loss, the consuming of other
// topics: the subscriber reconnects without waiting for it.
func TestSlowHandlerHoldsBackNoAckAndNoReconnect(t *testing.T) {
	t.Parallel()
	st := newSubTest(t)
	slow, other := st.queue(), st.queue()
	proxy := storetest.NewProxy(t, brokerAddr(t))
	sub := st.subscriber(SubscriberConfig{URL: viaProxy(t, proxy), Prefetch: 20})
	slowMsgs, err := sub.Subscribe(context.Background(), slow)
	require.NoError(t, err)
	otherMsgs, err := sub.Subscribe(context.Background(), other)
	require.NoError(t, err)

	ids := st.publish(slow, 10)
	held := receive(t, slowMsgs)
	require.Equal(t, ids[0], held.UUID)
	for range 9 {
		receive(t, slowMsgs).Ack()
	}
	require.Eventually(t, func() bool { return sub.Stats().Acked.Load() == 9 }, 15*time.Second, 10*time.Millisecond,
		"the 9 acks behind the held message went out")

	proxy.Cut() // the held message's handler is still at work
	st.publish(other, 1)
	m := receive(t, otherMsgs)
	require.Equal(t, other+"-000", m.UUID, "the other topic consumes again while the slow handler runs")
	m.Ack()
	again := receive(t, slowMsgs)
	require.Equal(t, ids[0], again.UUID, "only the held message comes back: the 9 others were acked")
	d, _ := DeliveryFrom(again.Context())
	require.True(t, d.Redelivered)
	again.Ack()
	held.Ack() // late, on the lost channel: dropped
	require.Eventually(t, func() bool { return st.depth(slow) == 0 }, 15*time.Second, 10*time.Millisecond)
	select {
	case m := <-slowMsgs:
		t.Fatalf("unexpected delivery %s", m.UUID)
	case <-time.After(200 * time.Millisecond):
	}
}

// Close waits for the messages handed out and sends their acks before the
// connection closes; with FinishHeld what the channel held is handed out
// too, so nothing goes back to the queue to come again as redelivered.
func TestCloseFinishesWhatWasHandedOutAndHeld(t *testing.T) {
	t.Parallel()
	st := newSubTest(t)
	q := st.queue()
	ids := st.publish(q, 20)
	sub := st.subscriber(SubscriberConfig{Prefetch: 20, FinishHeld: true})
	msgs, err := sub.Subscribe(context.Background(), q)
	require.NoError(t, err)
	first := receive(t, msgs)
	closed := make(chan struct{})
	go func() {
		_ = sub.Close()
		close(closed)
	}()
	got := map[string]bool{first.UUID: true}
	for m := range msgs { // closes once the held deliveries are handed out
		got[m.UUID] = true
		m.Ack()
	}
	require.Len(t, got, len(ids), "every prefetched delivery was handed out")
	select {
	case <-closed:
		t.Fatal("Close returned while a message handed out was unanswered")
	case <-time.After(100 * time.Millisecond):
	}
	require.NoError(t, first.Context().Err(), "a message's context lives until it is answered")
	first.Ack()
	<-closed
	require.Zero(t, st.depth(q), "all 20 acked before the connection closed")
}
