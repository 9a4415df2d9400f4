package messaging_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// proxied is a publisher whose connection runs through a fault proxy.
func proxied(t *testing.T, b *testBundle, cfg messaging.PublisherConfig) (*messaging.Publisher, *storetest.Proxy) {
	t.Helper()
	proxy := storetest.NewProxy(t, "127.0.0.1:5672")
	cfg.URL = strings.Replace(storetest.AMQPURL(), "127.0.0.1:5672", proxy.Addr(), 1)
	cfg.Name = t.Name()
	pub, err := messaging.NewPublisher(cfg, b.tp, b.metrics, b.log)
	require.NoError(t, err)
	return pub, proxy
}

// flowWithin bounds the waits for publishes to go through, so that a test
// whose publisher is stuck fails rather than hangs.
const flowWithin = 30 * time.Second

// load publishes from n goroutines until stop is called, counting results.
type load struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	lastOK     time.Time     // when the latest confirmed publish began
	confirmed  chan struct{} // closed, and replaced, at each confirmed publish
	stop       func()
}

func startLoad(t *testing.T, pub *messaging.Publisher, routingKey string, n int) *load {
	t.Helper()

	l := &load{confirmed: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				began := time.Now()
				err := pub.Send(ctx, messaging.Outgoing{RoutingKey: routingKey, Body: []byte(`{"modelName":"m"}`), MessageID: fmt.Sprintf("w%02d-%d", w, i)})
				if errors.Is(err, messaging.ErrPublisherClosed) {
					l.failed.Add(1)
					return // refused at once, and for good
				}
				if err != nil {
					l.failed.Add(1) // waited for a channel up to the timeout, or was in flight at a cut
					continue
				}
				l.ok.Add(1)
				l.mu.Lock()
				if began.After(l.lastOK) {
					l.lastOK = began
				}
				close(l.confirmed)
				l.confirmed = make(chan struct{})
				l.mu.Unlock()
			}
		})
	}
	l.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(l.stop)
	return l
}

// now returns the start of the latest confirmed publish, the count of
// confirmed publishes, and a channel closed at the next confirm.
func (l *load) now() (time.Time, int64, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastOK, l.ok.Load(), l.confirmed
}

// recovered waits until a publish that began after since is confirmed, at
// most within, and says how long after since that was.
func (l *load) recovered(since time.Time, within time.Duration) (time.Duration, bool) {
	timeout := time.After(within)
	for {
		last, _, next := l.now()
		if last.After(since) {
			return time.Since(since), true
		}
		select {
		case <-next:
		case <-timeout:
			return 0, false
		}
	}
}

// flowing waits until n more publishes are confirmed: publishing works,
// with publishes in flight.
func (l *load) flowing(t *testing.T, n int64) {
	t.Helper()
	_, from, _ := l.now()
	timeout := time.After(flowWithin)
	for {
		_, ok, next := l.now()
		if ok >= from+n {
			return
		}
		select {
		case <-next:
		case <-timeout:
			t.Fatalf("%d publishes confirmed of %d within %v", ok-from, n, flowWithin)
		}
	}
}

// A connection loss under concurrent publishing does not kill publishing:
// it works again within 5 s of each of 10 cuts in a row, each made while
// publishes are in flight, and every confirmed message is in its queue.
func TestPublishingRecoversAfterEveryConnectionCut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainAgentUsageStats)
	pub, proxy := proxied(t, b, messaging.PublisherConfig{Timeout: 2 * time.Second, Channels: 4})
	l := startLoad(t, pub, dom.RoutingKey, 32)

	var took []string
	for cut := range 10 {
		l.flowing(t, 100) // publishes in flight when the cut comes
		at := time.Now()
		proxy.Cut()
		d, ok := l.recovered(at, 5*time.Second)
		require.True(t, ok, "cut %d: no publish confirmed within 5 s", cut+1)
		took = append(took, d.Round(time.Millisecond).String())
	}
	l.stop()
	t.Logf("recovery after each cut: %s; confirmed %d, failed %d", strings.Join(took, " "), l.ok.Load(), l.failed.Load())
	require.NoError(t, pub.Close())
	require.GreaterOrEqual(t, b.depth(t, dom.Queue), int(l.ok.Load()), "every confirmed message is in the queue")
}

// Close returns, without panicking, while the broker is unreachable and
// publishes are waiting; it can be called again, and Send then fails at once.
func TestCloseDuringOutageNeverPanics(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainAgentUsageStats)
	pub, proxy := proxied(t, b, messaging.PublisherConfig{Timeout: time.Second, Channels: 4})
	l := startLoad(t, pub, dom.RoutingKey, 8)
	l.flowing(t, 50)
	reconnectFailed := pub.ReconnectFailed()
	reconnectFailed.Init()
	proxy.Down()
	require.Error(t, reconnectFailed.Wait(t)) // the outage is seen; the 8 publishers wait for a channel

	closed := make(chan any, 1)
	go func() {
		defer func() { closed <- recover() }()
		_ = pub.Close()
	}()
	select {
	case p := <-closed:
		require.Nil(t, p, "Close panicked")
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	l.stop()
	require.NotPanics(t, func() { _ = pub.Close() })
	// Refused at once: a publish that waited would fail with ErrUnconfirmed
	// after its timeout.
	err := pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte("{}")})
	require.ErrorIs(t, err, messaging.ErrPublisherClosed, "a closed publisher refuses at once")
}

// Readiness (Ping) follows the publisher's own connection: it fails while
// that connection is down, and once it passes again, publishing works.
func TestReadinessFollowsThePublishersConnection(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainAgentUsageStats)
	pub, proxy := proxied(t, b, messaging.PublisherConfig{Timeout: time.Second, Channels: 4})
	defer pub.Close()
	l := startLoad(t, pub, dom.RoutingKey, 8)
	ping := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		return pub.Ping(ctx)
	}
	require.NoError(t, ping())

	l.flowing(t, 50)
	reconnectFailed := pub.ReconnectFailed()
	reconnectFailed.Init()
	down := time.Now()
	proxy.Down()
	require.Eventually(t, func() bool { return ping() != nil }, 5*time.Second, poll, "readiness stayed green with the connection down")
	t.Logf("readiness failed %v after the connection went down: %v", time.Since(down).Round(time.Millisecond), ping())
	for attempt := range 3 {
		require.Error(t, reconnectFailed.Wait(t))
		require.Error(t, ping(), "readiness passed while the broker was unreachable, after %d failed reconnects", attempt+1)
	}

	up := time.Now()
	proxy.Up()
	require.Eventually(t, func() bool { return ping() == nil }, 10*time.Second, poll, "readiness did not recover")
	t.Logf("readiness passed %v after the broker was reachable again", time.Since(up).Round(time.Millisecond))
	for i := range 5 {
		require.NoError(t, pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte("{}"), MessageID: fmt.Sprint("ready-", i)}),
			"readiness passed, but publishing fails")
	}
	l.stop()
}

// Close after cuts and an outage leaves no goroutine behind: no reconnect
// loop, channel or confirm listener outlives the publisher.
func TestPublisherLeavesNoGoroutinesAfterClose(t *testing.T) {
	b := setup(t)
	dom := b.domain(t, topology.DomainAgentUsageStats)
	proxy := storetest.NewProxy(t, "127.0.0.1:5672")
	before := goleak.IgnoreCurrent()
	url := strings.Replace(storetest.AMQPURL(), "127.0.0.1:5672", proxy.Addr(), 1)
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{URL: url, Timeout: 500 * time.Millisecond, Channels: 3}, b.tp, nil, b.log)
	require.NoError(t, err)
	l := startLoad(t, pub, dom.RoutingKey, 8)
	for range 3 {
		l.flowing(t, 20) // connected again since the last cut
		proxy.Cut()
	}
	reconnectFailed := pub.ReconnectFailed()
	reconnectFailed.Init()
	proxy.Down()
	require.Error(t, reconnectFailed.Wait(t)) // Close comes while the link tries to reconnect
	require.NoError(t, pub.Close())
	l.stop()
	proxy.Up()
	goleak.VerifyNone(t, before)
}
