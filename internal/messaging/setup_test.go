package messaging_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/messaging"
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
	conn    *amqp.Connection
	tp      *topology.Topology
	db      *gorm.DB
	pub     *messaging.Publisher
	flow    *messaging.Flow
	metrics *messaging.Metrics
	log     *slog.Logger
}

func testLogger(t *testing.T) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// setup gives a test its own exchange prefix with short retry delays, a
// database for dead messages, and a publisher.
func setup(t *testing.T) *testBundle {
	t.Helper()
	conn, prefix := storetest.AMQP(t)
	retry := map[string]topology.RetryPolicy{}
	for _, name := range topology.DomainNames() {
		if p, ok := topology.SeedRetry(name); ok {
			retry[name] = topology.RetryPolicy{MaxRetries: p.MaxRetries, Delay: retryDelay}
		}
	}
	tp, err := topology.New(topology.Config{Prefix: prefix, Retry: retry})
	require.NoError(t, err)
	log := testLogger(t)
	m := messaging.NewMetrics(prometheus.NewRegistry())
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{URL: storetest.AMQPURL(), Name: t.Name()}, tp, m, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	return &testBundle{
		conn: conn, tp: tp, db: storetest.MySQL(t), pub: pub, metrics: m, log: log,
		flow: messaging.NewFlow(messaging.ChainConfig{RequeueDelay: 50 * time.Millisecond}, pub, m, log),
	}
}

func (b *testBundle) domain(t *testing.T, name string) topology.Domain {
	t.Helper()
	d, ok := b.tp.Domain(name)
	require.True(t, ok, name)
	return d
}

// run starts a consumer with the routes and stops it when the test ends.
func (b *testBundle) run(t *testing.T, cfg messaging.ConsumerConfig, routes ...messaging.Route) (stop func() error) {
	t.Helper()
	cfg.URL = storetest.AMQPURL()
	c, err := messaging.NewConsumer(cfg, b.log)
	require.NoError(t, err)
	for _, r := range routes {
		c.Add(r)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	select {
	case <-c.Running():
	case err := <-done:
		t.Fatalf("consumer: %v", err)
	}
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(time.Minute):
				t.Errorf("consumer did not stop")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// mainAndDLQ are the routes of one domain: h on the main queue, and the real
// DLQ consumer storing dead messages in MySQL.
func (b *testBundle) mainAndDLQ(dom topology.Domain, h messaging.HandlerFunc) []messaging.Route {
	return []messaging.Route{
		{Name: dom.Name, Queue: dom.Queue, Handle: b.flow.Main(dom, messaging.Each(h))},
		{Name: dom.Name + "-dlq", Queue: dom.DLQ, Handle: b.flow.DLQ(dom, messaging.Each(handlers.NewDeadLetters(b.db, dom, b.log).Handle))},
	}
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
