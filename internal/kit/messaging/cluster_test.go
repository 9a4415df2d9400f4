package messaging_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// urlAt is the test broker's URL with its address replaced by addr.
func urlAt(addr string) string {
	return strings.Replace(storetest.AMQPURL(), "127.0.0.1:5672", addr, 1)
}

// next waits for the next message of msgs and acks it.
func next(t *testing.T, msgs <-chan *message.Message) *message.Message {
	t.Helper()
	select {
	case m := <-msgs:
		m.Ack()
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message consumed")
		return nil
	}
}

// With a list of addresses whose first is a closed port, the publisher and
// the subscriber connect to the next one: a publish is confirmed, and the
// subscriber consumes it.
func TestAddressListSkipsAClosedPort(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs RabbitMQ")
	}
	b := setupRetry(t, retryDelay)
	urls := []string{urlAt("127.0.0.1:1"), storetest.AMQPURL()}
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{URLs: urls, Name: t.Name()}, b.tp, nil, b.log)
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.Ping(context.Background()))
	dom := b.domain(t, topology.DomainEmail)
	require.NoError(t, pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody), MessageID: "cluster-1"}))

	sub := b.subscriber(t, messaging.SubscriberConfig{URLs: urls})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msgs, err := sub.Subscribe(ctx, dom.Queue)
	require.NoError(t, err)
	require.Equal(t, "cluster-1", next(t, msgs).UUID)
}

// No address answering is an error at start that names every address tried,
// and no password.
func TestAddressListAllClosed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs RabbitMQ")
	}
	b := setupRetry(t, retryDelay)
	_, err := messaging.NewPublisher(messaging.PublisherConfig{URLs: []string{urlAt("127.0.0.1:1"), urlAt("127.0.0.1:2")}}, b.tp, nil, b.log)
	require.ErrorContains(t, err, "127.0.0.1:1")
	require.ErrorContains(t, err, "127.0.0.1:2")
	require.NotContains(t, err.Error(), "guest:guest")
}

// When the connection to the first address is lost and that address stays
// down, the publisher and the subscriber move to the next one.
func TestAddressListMovesOnAfterALoss(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs RabbitMQ")
	}
	b := setupRetry(t, retryDelay)
	proxy := storetest.NewProxy(t, "127.0.0.1:5672")
	urls := []string{urlAt(proxy.Addr()), storetest.AMQPURL()}
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{URLs: urls, Name: t.Name(), Timeout: time.Second}, b.tp, nil, b.log)
	require.NoError(t, err)
	defer pub.Close()
	sub := b.subscriber(t, messaging.SubscriberConfig{URLs: urls})
	dom := b.domain(t, topology.DomainEmail)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msgs, err := sub.Subscribe(ctx, dom.Queue)
	require.NoError(t, err)
	require.NoError(t, pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody), MessageID: "before"}))
	require.Equal(t, "before", next(t, msgs).UUID)

	proxy.Down() // the first address is gone for good
	require.Eventually(t, func() bool {
		return pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody), MessageID: "after"}) == nil
	}, 20*time.Second, poll, "the publisher did not move to the next address")
	for {
		if next(t, msgs).UUID == "after" { // a failed Send may still have arrived: skip its copies
			return
		}
	}
}
