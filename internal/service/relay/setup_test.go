package relay_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/relay"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// poll is how often require.Eventually checks its condition here.
const poll = 20 * time.Millisecond

type testBundle struct {
	db     *gorm.DB
	dbName string
	conn   *amqp.Connection
	prefix string
	tp     *topology.Topology
	pub    *messaging.Publisher
	log    *slog.Logger
}

func testLogger() *slog.Logger {
	if os.Getenv("ISLE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// setup gives a test a migrated database, a topology prefix of its own
// (declared by the publisher) and a publisher.
func setup(t *testing.T) *testBundle {
	t.Helper()
	conn, prefix := storetest.AMQP(t)
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	b := &testBundle{db: storetest.MySQL(t), conn: conn, prefix: prefix, tp: tp, log: testLogger()}
	require.NoError(t, b.db.Raw("SELECT DATABASE()").Scan(&b.dbName).Error)
	b.pub = b.publisher(t)
	return b
}

func (b *testBundle) publisher(t *testing.T) *messaging.Publisher {
	t.Helper()
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{URL: storetest.AMQPURL(), Name: t.Name()},
		b.tp, messaging.NewMetrics(prometheus.NewRegistry()), b.log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

func (b *testBundle) relay(t *testing.T, pub relay.Sender, cfg relay.Config) *relay.Relay {
	t.Helper()
	r, err := relay.New(b.db, b.tp, pub, cfg, relay.NewMetrics(prometheus.NewRegistry()), b.log)
	require.NoError(t, err)
	return r
}

// run runs r until the test ends or stop is called.
func run(t *testing.T, r *relay.Relay) (stop func()) {
	t.Helper()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case <-done:
			case <-time.After(time.Minute):
				t.Errorf("relay did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func (b *testBundle) domain(t *testing.T, name string) topology.Domain {
	t.Helper()
	d, ok := b.tp.Domain(name)
	require.True(t, ok, name)
	return d
}

// insertOutbox writes n outbox rows of domain payment-receipt, in
// multi-row inserts, and returns their message ids.
func (b *testBundle) insertOutbox(t *testing.T, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for start := 0; start < n; start += 1000 {
		end := min(n, start+1000)
		var q strings.Builder
		q.WriteString("INSERT INTO outbox (message_id, domain, payload, headers, trace_id) VALUES ")
		args := make([]any, 0, 4*(end-start))
		for i := start; i < end; i++ {
			if i > start {
				q.WriteString(", ")
			}
			q.WriteString("(?, 'payment-receipt', ?, ?, ?)")
			ids[i] = uuid.NewString()
			args = append(args, ids[i], fmt.Sprintf(`{"n":%d}`, i), fmt.Sprintf(`{"x-n":"%d","x-attempt":1}`, i), "trace-"+ids[i][:8])
		}
		require.NoError(t, b.db.Exec(q.String(), args...).Error)
	}
	return ids
}

func (b *testBundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, b.db.Raw(q, args...).Scan(&n).Error)
	return n
}

// consumer counts the deliveries of a queue by message id.
type consumer struct {
	mu    sync.Mutex
	seen  map[string]int
	order []amqp.Delivery
}

// consume counts every delivery of queue, acking it, until the test ends.
func (b *testBundle) consume(t *testing.T, queue string) *consumer {
	t.Helper()
	ch, err := b.conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Qos(1000, 0, false))
	ds, err := ch.Consume(queue, "", true, false, false, false, nil)
	require.NoError(t, err)
	c := &consumer{seen: map[string]int{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range ds {
			c.mu.Lock()
			c.seen[d.MessageId]++
			c.order = append(c.order, d)
			c.mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = ch.Close(); <-done })
	return c
}

// counts returns the distinct message ids seen and the deliveries.
func (c *consumer) counts() (distinct, total int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen), len(c.order)
}

func (c *consumer) times(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[id]
}

func (c *consumer) deliveries() []amqp.Delivery {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]amqp.Delivery(nil), c.order...)
}
