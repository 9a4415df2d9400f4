package messaging_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// A broker that stops answering yields an error within the timeout, never a
// hang; when it answers again, publishing works again.
func TestStuckBrokerYieldsAnErrorInTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	proxy := storetest.NewProxy(t, "127.0.0.1:5672")
	url := strings.Replace(storetest.AMQPURL(), "127.0.0.1:5672", proxy.Addr(), 1)
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{URL: url, Timeout: 400 * time.Millisecond, Channels: 2}, b.tp, nil, b.log)
	require.NoError(t, err)
	defer pub.Close()
	dom := b.domain(t, topology.DomainEmail)
	out := messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody)}
	require.NoError(t, pub.Send(context.Background(), out))

	proxy.Pause()
	for range 3 { // more callers than channels: none hangs
		began := time.Now()
		err := pub.Send(context.Background(), out)
		require.ErrorIs(t, err, messaging.ErrUnconfirmed)
		require.Less(t, time.Since(began), 2*time.Second)
	}
	proxy.Resume()
	require.Eventually(t, func() bool { return pub.Send(context.Background(), out) == nil }, 10*time.Second, poll, "publishing did not recover")
}

func TestUnknownRoutingKeyIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	err := b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: "nowhere", Body: []byte("{}")})
	require.ErrorContains(t, err, `routing key "nowhere" is not in the topology`)
}

// What Isle publishes carries what a Spring consumer needs.
func TestPublishedProperties(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainObjectReplication)
	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{
		RoutingKey: dom.RoutingKey, Body: []byte(`{"taskId":7}`), MessageID: "m-props", TypeID: dom.TypeID,
		TraceID: "trace-9", Priority: 9, Headers: map[string]string{dom.RetryHeader: "2"},
	}))
	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	// The condition runs on a goroutine of its own: it only fetches, and
	// the test goroutine asserts.
	var d amqp.Delivery
	var got bool
	require.Eventually(t, func() bool {
		d, got, err = ch.Get(dom.Queue, true)
		return got || err != nil
	}, 5*time.Second, poll, "message not in the queue")
	require.NoError(t, err)
	require.True(t, got)
	require.Equal(t, "application/json", d.ContentType)
	require.EqualValues(t, 2, d.DeliveryMode, "persistent")
	require.Equal(t, "m-props", d.MessageId)
	require.EqualValues(t, 9, d.Priority)
	require.Equal(t, "trace-9", d.CorrelationId)
	require.Equal(t, dom.TypeID, d.Headers["__TypeId__"])
	require.Equal(t, "trace-9", d.Headers["x-trace-id"])
	require.Equal(t, int32(2), d.Headers[dom.RetryHeader], "retry counts are int32, as Spring sends them")
}

// A message no queue takes is an error, not a silent confirm.
func TestUnroutablePublishIsAnError(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainEmail)
	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.QueueDelete(dom.Queue, false, false, false)
	require.NoError(t, err)
	err = b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody)})
	require.ErrorContains(t, err, "unroutable")
	require.NotErrorIs(t, err, messaging.ErrUnconfirmed, "the broker did answer")
	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RetryKey, Body: []byte(emailBody)}), "other keys still publish")
}

// An exchange deleted under a running publisher closes the channel that
// published to it; the publisher declares the topology again and publishes.
func TestDeletedExchangeIsDeclaredAgain(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainMiniGameScore)
	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, ch.ExchangeDelete(dom.Exchange, false, false))
	out := messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(`{"submitId":"s"}`)}
	require.Error(t, b.pub.Send(context.Background(), out), "the exchange is gone")
	require.Eventually(t, func() bool { return b.pub.Send(context.Background(), out) == nil }, 5*time.Second, poll, "not declared again")
	require.NoError(t, b.pub.Ping(context.Background()))
}

// The watermill face of the publisher routes by topic and keeps the
// Marshaler's header rules.
func TestWatermillPublisherRoutesByTopic(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainEmail)
	msg := message.NewMessage("m-wm", []byte(emailBody))
	msg.Metadata.Set(dom.RetryHeader, "1")
	msg.Metadata.Set("x-death", "dropped")
	require.NoError(t, b.pub.Watermill().Publish(dom.RoutingKey, msg))
	require.ErrorContains(t, b.pub.Watermill().Publish("nowhere", msg), "not in the topology")
	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	var d amqp.Delivery
	var got bool
	require.Eventually(t, func() bool {
		d, got, err = ch.Get(dom.Queue, true)
		return got || err != nil
	}, 5*time.Second, poll, "message not in the queue")
	require.NoError(t, err)
	require.Equal(t, "m-wm", d.MessageId)
	require.Equal(t, int32(1), d.Headers[dom.RetryHeader])
	require.NotContains(t, d.Headers, "x-death")
}

// PublishAll answers each record on its own, in order: confirmed ones nil,
// one the contract refuses (an invalid record) and one the broker cannot
// route their own errors, without failing the others; every confirmed
// message is in its queue.
func TestPublishAllAnswersEachRecord(t *testing.T) {
	t.Parallel()
	b := setup(t)
	usage, email := b.domain(t, topology.DomainAgentUsageStats), b.domain(t, topology.DomainEmail)
	ch, err := b.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.QueueDelete(email.Queue, false, false, false)
	require.NoError(t, err)

	var pubs []messaging.Publication
	for i := range 50 {
		pubs = append(pubs, messaging.Publication{Msg: topology.AgentUsageStats{RequestID: fmt.Sprint("u:r", i), ModelName: "m"},
			Options: messaging.Options{MessageID: fmt.Sprint("usage-", i)}})
	}
	pubs[10].Msg = topology.AgentUsageStats{RequestID: "u:bad"} // no model: invalid
	pubs[20] = messaging.Publication{Msg: topology.EmailCodeDispatch{Email: "a@example.com", Scene: "LOGIN", Code: "123456", CreatedAtEpochSeconds: 1}}
	errs := b.pub.PublishAll(context.Background(), pubs)
	require.Len(t, errs, 50)
	for i, err := range errs {
		switch i {
		case 10:
			require.ErrorContains(t, err, "modelName")
		case 20:
			require.ErrorContains(t, err, "unroutable")
		default:
			require.NoError(t, err, i)
		}
	}
	require.Eventually(t, func() bool { return b.depth(t, usage.Queue) == 48 }, 5*time.Second, poll, "48 confirmed usages queued")
}
