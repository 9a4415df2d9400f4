package messaging_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// A handler still at work when its subscriber's connection is lost has its
// context ended: the delivery can no longer be acked, and the broker gives
// it to a consumer again. When the handler then fails, no copy goes to the
// retry queue, or the message would live twice (the redelivery and the
// copy; for a message without an id each under a key of its own).
func TestAHandlerWhoseChannelIsLostStopsAndLeavesNoCopy(t *testing.T) {
	t.Parallel()
	b := setupSlowRetry(t)
	dom := b.domain(t, topology.DomainEmail)
	proxy := storetest.NewProxy(t, "127.0.0.1:5672")
	url := strings.Replace(storetest.AMQPURL(), "127.0.0.1:5672", proxy.Addr(), 1)

	var calls atomic.Int64
	first := make(chan struct{})
	firstEnded := make(chan error, 1) // why the first handler's context ended, or nil
	again := make(chan messaging.Delivery, 1)
	release := make(chan struct{})
	h := func(ctx context.Context, d messaging.Delivery) error {
		if calls.Add(1) > 1 {
			again <- d
			return nil
		}
		close(first)
		select {
		case <-ctx.Done():
			firstEnded <- context.Cause(ctx)
		case <-release:
			firstEnded <- nil
		}
		return errors.New("failed after its channel was gone")
	}
	b.run(t, messaging.SubscriberConfig{URL: url}, b.main(dom, h))
	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte(emailBody)}))

	<-first
	proxy.Cut()
	d := <-again // the broker has it back and delivers it again
	require.True(t, d.Redelivered)
	close(release)
	cause := <-firstEnded
	require.ErrorIs(t, cause, messaging.ErrChannelLost, "the first handler's context ended with its channel")

	require.Eventually(t, func() bool {
		counts, _ := outcomes(t, b.reg, dom.Name)
		return counts[messaging.OutcomeRequeued]+counts[messaging.OutcomeRetried] > 0
	}, answerWithin, poll, "the first delivery's failure was not dealt with")
	counts, _ := outcomes(t, b.reg, dom.Name)
	require.Zero(t, counts[messaging.OutcomeRetried], "a copy of a delivery that can no longer be acked")
	require.Zero(t, b.depth(t, dom.RetryQueue), "nothing in the retry queue")
	require.EqualValues(t, 2, calls.Load())
}
