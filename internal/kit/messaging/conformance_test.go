package messaging

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/tests"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// conformanceFeatures are what Isle's Publisher and Subscriber offer, as
// Watermill's universal suite names them: messages persist in their queues;
// order is not kept (a subscription hands out up to its prefetch at once,
// and a nack requeues); a queue is a work queue, not a log or a set of
// consumer groups.
var conformanceFeatures = tests.Features{
	Persistent:        true,
	GuaranteedOrder:   false,
	ConsumerGroups:    false,
	GenerateTopicFunc: func(tc tests.TestContext) string { return conformancePrefix + string(tc.TestID) },
}

const conformancePrefix = "isle-conformance."

// conformanceSkips are the suite's tests that do not apply, and why; each
// skips itself on the features above.
var conformanceSkips = map[string]string{
	"TestNoAck":                            "needs one unacked message at a time; a Subscriber hands out up to its prefetch (GuaranteedOrder false)",
	"TestPublishSubscribeInOrder":          "order is not kept across a subscription's concurrent handlers and requeues (GuaranteedOrder false)",
	"TestNewSubscriberReceivesOldMessages": "a queue is a work queue: a consumed message is gone, not replayed to a new subscriber",
	"TestConsumerGroups":                   "RabbitMQ queues have no consumer groups; each domain's queue is its one group",
	"TestReconnect":                        "restarts RabbitMQ: it runs in the fault tier (scripts/chaos, TestWatermillReconnect)",
}

// TestWatermillConformance runs Watermill's universal Pub/Sub suite against
// Isle's Subscriber and Publisher on the real broker.
func TestWatermillConformance(t *testing.T) {
	if testing.Short() {
		t.Skip("needs RabbitMQ")
	}
	for name, why := range conformanceSkips {
		t.Logf("skipped: %s: %s", name, why)
	}
	c := newConformance(t)
	tests.TestPubSub(t, conformanceFeatures, c.pubSub, nil)
}

// conformance is one publisher shared by the suite's many constructions,
// and the queues the suite's topics got.
type conformance struct {
	t      *testing.T
	pub    *Publisher
	mu     sync.Mutex
	topics map[string]bool
}

func newConformance(t *testing.T) *conformance {
	t.Helper()

	conn, prefix := storetest.AMQP(t)
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pub, err := NewPublisher(PublisherConfig{URL: storetest.AMQPURL(), Name: t.Name()}, tp, NewMetrics(prometheus.NewRegistry()), log)
	require.NoError(t, err)
	c := &conformance{t: t, pub: pub, topics: map[string]bool{}}
	t.Cleanup(func() {
		_ = pub.Close()
		ch, err := conn.Channel()
		if err != nil {
			return
		}
		defer ch.Close()
		c.mu.Lock()
		defer c.mu.Unlock()
		for q := range c.topics {
			_, _ = ch.QueueDelete(q, false, false, false)
		}
	})
	return c
}

// pubSub is the suite's constructor: a Subscriber of its own each time
// (the suite closes them), and the shared Publisher sending to the default
// exchange, which routes to the queue named by the topic.
func (c *conformance) pubSub(t *testing.T) (message.Publisher, message.Subscriber) {
	t.Helper()

	sub, err := NewSubscriber(SubscriberConfig{
		URL: storetest.AMQPURL(), Name: "isle-conformance", ShutdownTimeout: 2 * time.Second,
		Initialize: c.declare,
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	return queuePublisher{c.pub}, sub
}

// declare makes the suite's topic a durable queue, deleted when the test ends.
func (c *conformance) declare(ch *amqp.Channel, topic string) error {
	if !strings.HasPrefix(topic, conformancePrefix) {
		c.t.Errorf("topic %q is not the suite's", topic)
	}
	c.mu.Lock()
	c.topics[topic] = true
	c.mu.Unlock()
	_, err := ch.QueueDeclare(topic, true, false, false, false, nil)
	return err
}

// queuePublisher sends to the queue named by the topic, through the default
// exchange, with the Publisher's confirms and marshaling: the suite's
// topics are not in the topology, whose routing keys Publisher.Watermill
// takes.
type queuePublisher struct{ p *Publisher }

func (q queuePublisher) Publish(topic string, msgs ...*message.Message) error {
	for _, msg := range msgs {
		if err := q.p.publish(context.WithoutCancel(msg.Context()), "", topic, msg); err != nil {
			return err
		}
	}
	return nil
}

// Close leaves the shared Publisher open: the suite closes one per construction.
func (queuePublisher) Close() error { return nil }
