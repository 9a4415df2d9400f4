package main

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// The Delivery the middleware rebuilds from a message of the watermill-amqp
// subscriber has the AMQP message_id, the headers as text (an integer retry
// count included, which watermill-amqp's DefaultMarshaler refuses), and the
// correlation id as its trace id; a delivery without an id gets one of its
// own.
func TestWatermillAMQPMessagesCarryTheDelivery(t *testing.T) {
	in := func(d amqp.Delivery) messaging.Delivery {
		msg, err := deliveryMarshaler{}.Unmarshal(d)
		require.NoError(t, err)
		var got messaging.Delivery
		require.NoError(t, messaging.RouterHandler(func(_ context.Context, d messaging.Delivery) error {
			got = d
			return nil
		})(msg))
		return got
	}
	d := in(amqp.Delivery{MessageId: "m-1", CorrelationId: "trace-1", Body: []byte(`{"a":1}`),
		Headers: amqp.Table{messaging.HeaderTypeID: "com.x.Deduction", "x-agent-billing-retry-count": int32(3)}})
	require.Equal(t, "m-1", d.MessageID)
	require.Equal(t, "trace-1", d.TraceID)
	require.Equal(t, "com.x.Deduction", d.TypeID)
	require.Equal(t, `{"a":1}`, string(d.Body))
	require.Equal(t, map[string]string{messaging.HeaderTypeID: "com.x.Deduction", "x-agent-billing-retry-count": "3"}, d.Headers,
		"the correlation id is a property, not a header")
	require.Equal(t, 3, messaging.ParseRetry(d.Headers["x-agent-billing-retry-count"]))

	require.Equal(t, "w-1", in(amqp.Delivery{Headers: amqp.Table{"_watermill_message_uuid": "w-1"}}).MessageID, "a watermill producer's id")
	a, b := in(amqp.Delivery{Body: []byte("x")}), in(amqp.Delivery{Body: []byte("x")})
	require.NotEmpty(t, a.MessageID)
	require.NotEqual(t, a.MessageID, b.MessageID, "each delivery without an id is keyed on its own")
}

// WORKER_SUBSCRIBER=watermill-amqp consumes a contract queue that carries
// arguments (the replication queue's x-max-priority) without declaring it,
// on as many channels as the topic has, each holding one delivery at a
// time: with two channels, two handlers run at once. A queue that does not
// exist is an error at Subscribe, and is not created.
func TestWatermillAMQPSubscriberConsumesTheContractsQueues(t *testing.T) {
	if testing.Short() {
		t.Skip("needs RabbitMQ")
	}
	conn, prefix := storetest.AMQP(t)
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	require.NoError(t, tp.Declare(conn))
	dom, _ := tp.Domain(topology.DomainObjectReplication)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	sub, err := newWatermillAMQPSubscriber(storetest.AMQPURL(), 10, map[string]messaging.TopicConfig{dom.Queue: {Channels: 2}}, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	_, err = sub.Subscribe(context.Background(), prefix+".no.such.queue")
	require.ErrorContains(t, err, "no subscriber of")

	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, routerLogger(log))
	require.NoError(t, err)
	var (
		mu      sync.Mutex
		seen    = map[string]messaging.Delivery{}
		release = make(chan struct{})
	)
	router.AddConsumerHandler("replication", dom.Queue, sub, messaging.RouterHandler(func(ctx context.Context, d messaging.Delivery) error {
		mu.Lock()
		seen[d.MessageID] = d
		mu.Unlock()
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- router.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	<-router.Running()
	// Subscribe returns before its consumers are registered: wait for both,
	// or the first channel's prefetch takes both messages, and hands out
	// the second only after the first is acked.
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	require.Eventually(t, func() bool {
		q, err := conn.Channel()
		require.NoError(t, err)
		defer q.Close()
		info, err := q.QueueDeclarePassive(dom.Queue, true, false, false, false, nil)
		require.NoError(t, err)
		return info.Consumers == 2
	}, 20*time.Second, 10*time.Millisecond)
	for _, id := range []string{"r-1", "r-2"} {
		require.NoError(t, ch.Publish("", dom.Queue, false, false, amqp.Publishing{MessageId: id, CorrelationId: "trace-" + id, Body: []byte("{}"),
			Headers: amqp.Table{dom.RetryHeader: int32(1)}}))
	}
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 2
	}, 20*time.Second, 10*time.Millisecond, "both deliveries in flight at once, one per channel")
	close(release)
	mu.Lock()
	require.Equal(t, "trace-r-2", seen["r-2"].TraceID)
	require.Equal(t, "1", seen["r-2"].Headers[dom.RetryHeader])
	mu.Unlock()

	missing := prefix + ".no.such.queue"
	other, err := newWatermillAMQPSubscriber(storetest.AMQPURL(), 10, map[string]messaging.TopicConfig{missing: {}}, log)
	require.NoError(t, err)
	defer other.Close()
	_, err = other.Subscribe(context.Background(), missing)
	require.ErrorContains(t, err, "NOT_FOUND")
	check, err := conn.Channel()
	require.NoError(t, err)
	defer check.Close()
	_, err = check.QueueDeclarePassive(missing, true, false, false, false, nil)
	require.Error(t, err, "the missing queue was not declared")
}
