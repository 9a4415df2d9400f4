package messaging_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eisland/isle/internal/messaging"
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

// load publishes from n goroutines until stop is called, counting results;
// lastOK holds the start time (UnixNano) of the latest confirmed publish.
type load struct {
	ok, failed atomic.Int64
	lastOK     atomic.Int64
	stop       func()
}

func startLoad(t *testing.T, pub *messaging.Publisher, routingKey string, n int) *load {
	l := &load{}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range n {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				began := time.Now()
				err := pub.Send(ctx, messaging.Outgoing{RoutingKey: routingKey, Body: []byte(`{"modelName":"m"}`), MessageID: fmt.Sprintf("w%02d-%d", w, i)})
				if err != nil {
					l.failed.Add(1)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				l.ok.Add(1)
				for {
					last := l.lastOK.Load()
					if began.UnixNano() <= last || l.lastOK.CompareAndSwap(last, began.UnixNano()) {
						break
					}
				}
			}
		})
	}
	l.stop = func() { cancel(); wg.Wait() }
	t.Cleanup(l.stop)
	return l
}

// recovered waits until a publish that began after since is confirmed.
func (l *load) recovered(since time.Time, within time.Duration) (time.Duration, bool) {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if l.lastOK.Load() > since.UnixNano() {
			return time.Since(since), true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return 0, false
}

// Issue 8, item 5: a connection loss under concurrent publishing no longer
// kills publishing; it works again within 5 s of each of 10 cuts in a row,
// and every confirmed message is in its queue.
func TestPublishingRecoversAfterEveryConnectionCut(t *testing.T) {
	t.Parallel()
	b := setup(t)
	dom := b.domain(t, topology.DomainAgentUsageStats)
	pub, proxy := proxied(t, b, messaging.PublisherConfig{Timeout: 2 * time.Second, Channels: 4})
	l := startLoad(t, pub, dom.RoutingKey, 32)
	_, ok := l.recovered(time.Now().Add(-time.Hour), 5*time.Second)
	require.True(t, ok, "no publish before the first cut")

	var took []string
	for cut := range 10 {
		time.Sleep(200 * time.Millisecond) // publishes in flight when the cut comes
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
	time.Sleep(200 * time.Millisecond)
	proxy.Down()
	time.Sleep(500 * time.Millisecond)

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
	began := time.Now()
	require.Error(t, pub.Send(context.Background(), messaging.Outgoing{RoutingKey: dom.RoutingKey, Body: []byte("{}")}))
	require.Less(t, time.Since(began), 100*time.Millisecond, "a closed publisher refuses at once")
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

	time.Sleep(200 * time.Millisecond)
	down := time.Now()
	proxy.Down()
	require.Eventually(t, func() bool { return ping() != nil }, 5*time.Second, poll, "readiness stayed green with the connection down")
	t.Logf("readiness failed %v after the connection went down: %v", time.Since(down).Round(time.Millisecond), ping())
	time.Sleep(time.Second)
	require.Error(t, ping(), "readiness passed while the broker was unreachable")

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
		time.Sleep(100 * time.Millisecond)
		proxy.Cut()
	}
	proxy.Down()
	time.Sleep(300 * time.Millisecond)
	require.NoError(t, pub.Close())
	l.stop()
	proxy.Up()
	goleak.VerifyNone(t, before, goleak.IgnoreTopFunction("time.Sleep"))
}
