package messaging_test

import (
	"context"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// A delivery without a producer's id that the broker flags as redelivered
// may be the same message as one still in its handler here (its channel
// was lost mid-run): its handler starts only once that one has returned,
// so it finds what the first applied. A fresh delivery of an equal body is
// another message and does not wait.
func TestARedeliveryWaitsForTheRunsOfItsBodyHere(t *testing.T) {
	t.Parallel()
	b := setupSlowRetry(t)
	dom := b.domain(t, topology.DomainAgentBilling)
	retry, met := messaging.RetryMiddlewareSignalled(dom, b.pub, messaging.ChainConfig{}, b.log)
	met.Init()
	var mu sync.Mutex
	var order []string
	note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
	started, release := make(chan string, 3), make(chan struct{})
	f := newFeeder()
	chain := []message.HandlerMiddleware{messaging.CorrelationMiddleware, retry, messaging.RecovererMiddleware(b.log)}
	runRouter(t, f, testRoute{queue: "billing", chain: chain, handler: func(ctx context.Context, d messaging.Delivery) error {
		name := d.Headers["x-test"]
		note(name + " starts")
		started <- name
		if name == "first" {
			<-release
		}
		note(name + " ends")
		return nil
	}})
	const body = `{"username":"alice","amountFen":"1.00000000","modelName":"m","inputTokens":1,"outputTokens":1}`
	deliver := func(name string, redelivered bool) *message.Message {
		return f.feed(t, "billing", messaging.DeliveryOf(amqp.Delivery{Body: []byte(body), Redelivered: redelivered,
			Headers: amqp.Table{"x-test": name}}, dom.Queue))
	}

	first := deliver("first", false)
	require.Equal(t, "first", <-started)
	fresh := deliver("fresh", false) // an equal message: runs beside it
	require.Equal(t, "fresh", <-started)
	require.True(t, acked(t, fresh))
	again := deliver("again", true)
	hash := met.Wait(t) // the redelivery waits for the first
	require.Equal(t, messaging.DeliveryOf(amqp.Delivery{Body: []byte(body)}, dom.Queue).MessageID, hash)
	close(release)
	require.True(t, acked(t, first))
	require.Equal(t, "again", <-started)
	require.True(t, acked(t, again))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"first starts", "fresh starts", "fresh ends", "first ends", "again starts", "again ends"}, order)
}
