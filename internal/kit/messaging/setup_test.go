package messaging_test

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// retryDelay is the retry queues' TTL in these tests.
const retryDelay = 150 * time.Millisecond

// poll is how often require.Eventually checks its condition in these tests.
const poll = 20 * time.Millisecond

type testBundle struct {
	conn     *amqp.Connection
	tp       *topology.Topology
	db       *gorm.DB
	pub      *messaging.Publisher
	chainCfg messaging.ChainConfig // of the chains main and mainAndDLQ build
	metrics  *messaging.Metrics
	reg      *prometheus.Registry // of metrics
	log      *slog.Logger
}

func testLogger(t *testing.T) *slog.Logger {
	t.Helper()

	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// setup gives a test its own exchange prefix with short retry delays, a
// database for dead messages, and a publisher.
func setup(t *testing.T) *testBundle {
	t.Helper()
	b := setupRetry(t, retryDelay)
	b.db = storetest.MySQL(t)
	b.chainCfg = messaging.ChainConfig{RequeueDelay: 50 * time.Millisecond}
	return b
}

// setupRetry gives a test its own exchange prefix, whose retry queues keep
// a copy for delay, and a publisher.
func setupRetry(t *testing.T, delay time.Duration) *testBundle {
	t.Helper()
	conn, prefix := storetest.AMQP(t)
	retry := map[string]topology.RetryPolicy{}
	for _, name := range topology.DomainNames() {
		if p, ok := topology.SeedRetry(name); ok {
			retry[name] = topology.RetryPolicy{MaxRetries: p.MaxRetries, Delay: delay}
		}
	}
	tp, err := topology.New(topology.Config{Prefix: prefix, Retry: retry})
	require.NoError(t, err)
	log := testLogger(t)
	reg := prometheus.NewRegistry()
	m := messaging.NewMetrics(reg)
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{URL: storetest.AMQPURL(), Name: t.Name()}, tp, m, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	return &testBundle{conn: conn, tp: tp, pub: pub, metrics: m, reg: reg, log: log}
}

func (b *testBundle) domain(t *testing.T, name string) topology.Domain {
	t.Helper()
	d, ok := b.tp.Domain(name)
	require.True(t, ok, name)
	return d
}

// testRoute is one handler of a test's Router, as the worker adds one per
// route: handler consumes queue behind chain (outermost first). The name
// is the queue's unless set.
type testRoute struct {
	name    string
	queue   string
	handler messaging.HandlerFunc
	chain   []message.HandlerMiddleware
}

// main is the route of dom's main queue: h behind MainChain.
func (b *testBundle) main(dom topology.Domain, h messaging.HandlerFunc) testRoute {
	return testRoute{name: dom.Name, queue: dom.Queue, handler: h, chain: messaging.MainChain(dom, b.pub, b.metrics, b.chainCfg, b.log)}
}

// mainAndDLQ are the routes of one domain: h on the main queue, and the real
// DLQ consumer storing dead messages in MySQL.
func (b *testBundle) mainAndDLQ(dom topology.Domain, h messaging.HandlerFunc) []testRoute {
	return []testRoute{b.main(dom, h), {
		name: dom.Name + "-dlq", queue: dom.DLQ, handler: handlers.NewDeadLetters(b.db, dom, b.log).Handle,
		chain: messaging.DeadLetterChain(dom, b.metrics, b.chainCfg, b.log),
	}}
}

// subscriber returns a Subscriber of cfg, its URL and name defaulted, closed
// when the test ends.
func (b *testBundle) subscriber(t *testing.T, cfg messaging.SubscriberConfig) *messaging.Subscriber {
	t.Helper()
	cfg.URL = cmp.Or(cfg.URL, storetest.AMQPURL())
	cfg.Name = cmp.Or(cfg.Name, t.Name())
	sub, err := messaging.NewSubscriber(cfg, b.log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Close() })
	return sub
}

// testWorker is a Router running a test's routes over a Subscriber.
type testWorker struct {
	sub  *messaging.Subscriber
	stop func() error // see startRouter
}

// run runs the routes on a watermill Router fed by a Subscriber of cfg, as
// the worker does, and stops them when the test ends.
func (b *testBundle) run(t *testing.T, cfg messaging.SubscriberConfig, routes ...testRoute) *testWorker {
	t.Helper()
	sub := b.subscriber(t, cfg)
	return &testWorker{sub: sub, stop: startRouter(t, sub, cfg.ShutdownTimeout, routes...)}
}

// startRouter runs a watermill Router with the routes, each consuming its
// queue through sub, and returns once it runs. Its stop, also called when
// the test ends, stops it as a worker's SIGTERM does: it closes the Router
// (which closes sub, and waits up to closeTimeout for the handlers in
// flight; 0: watermill's default), waits for Run to return, and closes sub.
// It returns what went wrong on the way.
func startRouter(t *testing.T, sub message.Subscriber, closeTimeout time.Duration, routes ...testRoute) (stop func() error) {
	t.Helper()
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: closeTimeout}, nil)
	require.NoError(t, err)
	for _, rt := range routes {
		r.AddConsumerHandler(cmp.Or(rt.name, rt.queue), rt.queue, sub, messaging.RouterHandler(rt.handler)).AddMiddleware(rt.chain...)
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(context.Background()) }()
	select {
	case <-r.Running():
	case err := <-done:
		t.Fatalf("router: %v", err)
	}
	var (
		once    sync.Once
		stopErr error
	)
	stop = func() error {
		once.Do(func() {
			closeErr := r.Close()
			select {
			case runErr := <-done:
				stopErr = errors.Join(closeErr, runErr)
			case <-time.After(time.Minute):
				stopErr = errors.New("the router did not stop")
			}
			stopErr = errors.Join(stopErr, sub.Close())
		})
		return stopErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func (b *testBundle) deadLetters(t *testing.T, dom topology.Domain) []store.DeadLetter {
	t.Helper()
	rows, err := store.NewDeadLetters(b.db).List(context.Background(), dom.DLQTable, store.DeadLetterFilter{})
	require.NoError(t, err)
	return rows
}

// depth is a queue's ready message count.
func (b *testBundle) depth(t *testing.T, queue string) int {
	t.Helper()
	return storetest.QueueDepth(t, b.conn, queue)
}

// counter counts handler calls per message id.
type counter struct {
	mu    sync.Mutex
	calls map[string]int
	last  map[string]messaging.Delivery
}

func newCounter() *counter {
	return &counter{calls: map[string]int{}, last: map[string]messaging.Delivery{}}
}

func (c *counter) see(d messaging.Delivery) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[d.MessageID]++
	c.last[d.MessageID] = d
	return c.calls[d.MessageID]
}

func (c *counter) get(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[id]
}

func (c *counter) total() (messages, calls int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, n := range c.calls {
		calls += n
	}
	return len(c.calls), calls
}
