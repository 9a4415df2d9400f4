package messaging_test

import (
	"context"
	"strings"
	"testing"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// Close while the subscriber is reconnecting leaves no connection behind:
// the one whose dial was under way when Close began is closed too.
func TestCloseDuringAReconnectLeavesNoConnection(t *testing.T) {
	b := setup(t)
	dom := b.domain(t, topology.DomainEmail)
	proxy := storetest.NewProxy(t, "127.0.0.1:5672")
	before := goleak.IgnoreCurrent()
	url := strings.Replace(storetest.AMQPURL(), "127.0.0.1:5672", proxy.Addr(), 1)
	sub, err := messaging.NewSubscriber(messaging.SubscriberConfig{URL: url, Name: t.Name()}, b.log)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err = sub.Subscribe(ctx, dom.Queue)
	require.NoError(t, err)

	dialing := sub.Reconnecting()
	dialing.Init()
	proxy.Pause() // the next dial's handshake is held
	proxy.Cut()
	dialing.Wait(t)
	closed := make(chan error, 1)
	go func() { closed <- sub.Close() }()
	<-sub.Draining()
	proxy.Resume() // the dial completes after Close began
	require.NoError(t, <-closed)
	goleak.VerifyNone(t, before)
}
