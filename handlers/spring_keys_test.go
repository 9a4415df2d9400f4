package handlers_test

import (
	"context"
	"errors"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// springFleet runs the agent-billing and usage consumers as the worker does
// (a watermill Router over Isle's Subscriber, the retry chain, the
// group-committing writers) against the test's RabbitMQ,
// MySQL and Redis, and publishes as the Spring producers do: a __TypeId__
// header, no message_id, no deductionId, no requestId.
type springFleet struct {
	db   *gorm.DB
	conn *amqp.Connection
	tp   *topology.Topology
	ch   *amqp.Channel
	seen *seenDeliveries
	fail *failOnce // the ledger's first call for a user fails after its commit
	hold *holdOnce // a body's first delivery is handled, then answered as not done
	pub  *messaging.Publisher
	stop func()
}

// seenDeliveries records every delivery the consumers handled.
type seenDeliveries struct {
	mu sync.Mutex
	ds []messaging.Delivery
}

func (s *seenDeliveries) add(d messaging.Delivery) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ds = append(s.ds, d)
}

func (s *seenDeliveries) where(ok func(messaging.Delivery) bool) []messaging.Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []messaging.Delivery
	for _, d := range s.ds {
		if ok(d) {
			out = append(out, d)
		}
	}
	return out
}

// failOnce applies a user's first debits and then answers an error, as
// when the commit's answer is lost: the retry middleware makes retry
// copies.
type failOnce struct {
	handlers.Ledger
	mu   sync.Mutex
	user string
	done bool
}

func (f *failOnce) ApplyDebits(ctx context.Context, ds []store.Debit) ([]store.DebitResult, []error) {
	res, errs := f.Ledger.ApplyDebits(ctx, ds)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, d := range ds {
		if d.Username == f.user && !f.done && errs[i] == nil && res[i].Applied {
			f.done = true
			errs[i] = errors.New("the commit's answer was lost")
		}
	}
	return res, errs
}

// holdOnce lets a body's first delivery be handled, then answers it as not
// done, outside the retry chain: the router nacks it, and the broker
// delivers it again flagged as redelivered, as after a worker that died
// between its commit and its ack.
type holdOnce struct {
	mu     sync.Mutex
	body   map[string]bool // bodies still to hold once
	bounce map[string]bool // bodies still to give back once unhandled, as a worker dying before its commit
}

func (h *holdOnce) middleware(next message.HandlerFunc) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		d, _ := messaging.DeliveryFrom(msg.Context())
		body := string(d.Body)
		h.mu.Lock()
		if h.bounce[body] && !d.Redelivered {
			delete(h.bounce, body)
			h.mu.Unlock()
			return nil, errors.New("the worker died before its commit")
		}
		h.mu.Unlock()
		out, err := next(msg)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.body[body] && !d.Redelivered {
			delete(h.body, body)
			return nil, errors.New("the worker died before its ack")
		}
		return out, err
	}
}

func newSpringFleet(t *testing.T) *springFleet {
	t.Helper()
	conn, prefix := storetest.AMQP(t)
	retry := map[string]topology.RetryPolicy{}
	for _, name := range topology.DomainNames() {
		if p, ok := topology.SeedRetry(name); ok {
			retry[name] = topology.RetryPolicy{MaxRetries: p.MaxRetries, Delay: 100 * time.Millisecond}
		}
	}
	tp, err := topology.New(topology.Config{Prefix: prefix, Retry: retry})
	require.NoError(t, err)
	require.NoError(t, tp.Declare(conn))
	f := &springFleet{db: storetest.MySQL(t), conn: conn, tp: tp, seen: &seenDeliveries{}, hold: &holdOnce{body: map[string]bool{}, bounce: map[string]bool{}}}
	rdb := storetest.Redis(t)
	m := messaging.NewMetrics(prometheus.NewRegistry())
	f.pub, err = messaging.NewPublisher(messaging.PublisherConfig{URL: storetest.AMQPURL(), Name: t.Name()}, tp, m, quiet)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.pub.Close() })
	ledger, usage := store.NewLedgerWriter(f.db, nil), store.NewUsageWriter(f.db, nil)
	t.Cleanup(func() { ledger.Close(); usage.Close() })
	f.fail = &failOnce{Ledger: ledger, user: "carol"}
	for _, u := range []string{"ann", "bob", "carol"} {
		_, err := store.NewAccounts(f.db).Create(context.Background(), u, "", decimal.RequireFromString("100"))
		require.NoError(t, err)
	}
	sub, err := messaging.NewSubscriber(messaging.SubscriberConfig{URL: storetest.AMQPURL(), Name: t.Name(), Prefetch: 20, FinishHeld: true}, quiet)
	require.NoError(t, err)
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: time.Minute}, watermill.NopLogger{})
	require.NoError(t, err)
	backends := handlers.Backends{DB: f.db, Redis: rdb, Ledger: f.fail, Usage: usage, Log: quiet}
	for _, c := range handlers.Consumers {
		if c.Domain != topology.DomainAgentBilling && c.Domain != topology.DomainAgentUsageStats {
			continue
		}
		dom, _ := tp.Domain(c.Domain)
		h := c.New(backends, quiet)
		seen := func(ctx context.Context, d messaging.Delivery) error {
			err := h(ctx, d)
			f.seen.add(d)
			return err
		}
		rh := router.AddConsumerHandler(c.Domain, dom.Queue, sub, messaging.RouterHandler(seen))
		rh.AddMiddleware(append([]message.HandlerMiddleware{f.hold.middleware},
			messaging.MainChain(dom, f.pub, m, messaging.ChainConfig{RequeueDelay: 10 * time.Millisecond}, quiet)...)...)
	}
	done := make(chan error, 1)
	go func() { done <- router.Run(context.Background()) }()
	select {
	case <-router.Running():
	case err := <-done:
		t.Fatalf("router: %v", err)
	}
	var once sync.Once
	f.stop = func() {
		once.Do(func() {
			_ = router.Close()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("router: %v", err)
				}
			case <-time.After(time.Minute):
				t.Errorf("router did not stop")
			}
			_ = sub.Close()
		})
	}
	t.Cleanup(f.stop)
	f.ch, err = conn.Channel()
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.ch.Close() })
	return f
}

// publish sends body to domain's main queue as Spring AMQP's Jackson
// converter does: no message_id.
func (f *springFleet) publish(t *testing.T, domain, body string) {
	t.Helper()
	d, _ := f.tp.Domain(domain)
	require.NoError(t, f.ch.Publish(d.Exchange, d.RoutingKey, false, false, amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent,
		Headers: amqp.Table{messaging.HeaderTypeID: "com.eisland.server.agent.mq." + map[string]string{
			topology.DomainAgentBilling: "AgentBillingDeductMessage", topology.DomainAgentUsageStats: "AgentUsageStatsMessage"}[domain]},
		Body: []byte(body),
	}))
}

func (f *springFleet) rows(t *testing.T, user string) []store.LedgerEntry {
	t.Helper()
	var rows []store.LedgerEntry
	require.NoError(t, f.db.Where("username = ? AND kind = ?", user, store.LedgerDeduct).Order("id").Find(&rows).Error)
	return rows
}

func (f *springFleet) requests(t *testing.T, model string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, f.db.Raw("SELECT COALESCE(SUM(request_count), 0) FROM agent_usage_stats WHERE model_name = ?", model).Scan(&n).Error)
	return n
}

const wait, tick = 30 * time.Second, 20 * time.Millisecond

// Two real charges a Spring producer sends with byte-identical bodies (the
// same user, model and tokens: ordinary traffic) and no ids are two
// deductions, and two identical usage messages are two requests; a
// redelivery of one already applied (the broker's redelivered flag, after a
// worker died between its commit and its ack) applies nothing, and neither
// does a retry copy Isle made of one (it carries the id Isle gave the
// delivery).
func TestTwoSpringChargesWithEqualBodiesBothApply(t *testing.T) {
	t.Parallel()
	f := newSpringFleet(t)
	const charge = `{"username":"ann","amountFen":"1.5","modelName":"spring-m","inputTokens":3,"outputTokens":1}`
	const usage = `{"modelName":"spring-u","inputTokens":3,"outputTokens":1,"costMicroFen":150000000}`
	f.publish(t, topology.DomainAgentBilling, charge)
	f.publish(t, topology.DomainAgentUsageStats, usage)
	require.Eventually(t, func() bool { return len(f.rows(t, "ann")) == 1 && f.requests(t, "spring-u") == 1 }, wait, tick)
	f.publish(t, topology.DomainAgentBilling, charge)
	f.publish(t, topology.DomainAgentUsageStats, usage)
	require.Eventually(t, func() bool { return len(f.rows(t, "ann")) == 2 && f.requests(t, "spring-u") == 2 }, wait, tick,
		"the second charge and the second request count")
	rows := f.rows(t, "ann")
	require.NotEqual(t, rows[0].EntryID, rows[1].EntryID)
	require.Regexp(t, `^msg:sha256:[0-9a-f]{32}:[0-9a-f]{16}$`, rows[0].EntryID, "the body's hash, and a part of the delivery's own")
	require.Equal(t, rows[0].EntryID[:len(rows[0].EntryID)-16], rows[1].EntryID[:len(rows[1].EntryID)-16], "one body")
	require.Equal(t, "97.00000000", account(t, f.db, "ann"))

	// Redelivered after the commit: applied once, counted once.
	const bobs = `{"username":"bob","amountFen":"2","modelName":"spring-m","inputTokens":5,"outputTokens":5}`
	const bobUsage = `{"modelName":"spring-r","inputTokens":5,"outputTokens":5,"costMicroFen":200000000}`
	f.hold.mu.Lock()
	f.hold.body[bobs], f.hold.body[bobUsage] = true, true
	f.hold.mu.Unlock()
	f.publish(t, topology.DomainAgentBilling, bobs)
	f.publish(t, topology.DomainAgentUsageStats, bobUsage)
	redelivered := func(body string) func(messaging.Delivery) bool {
		return func(d messaging.Delivery) bool { return d.Redelivered && string(d.Body) == body }
	}
	require.Eventually(t, func() bool {
		return len(f.seen.where(redelivered(bobs))) == 1 && len(f.seen.where(redelivered(bobUsage))) == 1
	}, wait, tick, "the held deliveries came back flagged")
	require.Len(t, f.rows(t, "bob"), 1, "the redelivery applied nothing")
	require.Equal(t, "98.00000000", account(t, f.db, "bob"))
	require.EqualValues(t, 1, f.requests(t, "spring-r"), "nor counted the usage again")

	// Redelivered before any commit: applied, once.
	const dans = `{"username":"bob","amountFen":"3","modelName":"spring-m","inputTokens":9,"outputTokens":9}`
	f.hold.mu.Lock()
	f.hold.bounce[dans] = true
	f.hold.mu.Unlock()
	f.publish(t, topology.DomainAgentBilling, dans)
	require.Eventually(t, func() bool { return len(f.seen.where(redelivered(dans))) == 1 }, wait, tick)
	require.Len(t, f.rows(t, "bob"), 2, "a redelivery of a message never applied applies")
	require.Equal(t, "95.00000000", account(t, f.db, "bob"))

	// A retry copy Isle made: it carries the id the first delivery had.
	const carols = `{"username":"carol","amountFen":"4","modelName":"spring-m","inputTokens":7,"outputTokens":1}`
	f.publish(t, topology.DomainAgentBilling, carols)
	retried := func(d messaging.Delivery) bool { return d.Retry == 1 && string(d.Body) != carols && d.MessageID != "" }
	require.Eventually(t, func() bool { return len(f.seen.where(retried)) == 1 }, wait, tick, "the retry copy was handled")
	first := f.seen.where(func(d messaging.Delivery) bool { return string(d.Body) == carols })
	require.Len(t, first, 1)
	copy := f.seen.where(retried)[0]
	require.Equal(t, first[0].Key(), copy.MessageID, "the copy's message_id is the id Isle gave the delivery")
	require.Equal(t, copy.MessageID, copy.Key())
	rows = f.rows(t, "carol")
	require.Len(t, rows, 1, "the retry applied nothing")
	require.Equal(t, store.ForeignKey(copy.MessageID, 128), rows[0].EntryID)
	require.Equal(t, "96.00000000", account(t, f.db, "carol"))
}

func account(t *testing.T, db *gorm.DB, user string) string {
	t.Helper()
	u, err := store.NewAccounts(db).Get(context.Background(), user)
	require.NoError(t, err)
	return u.BalanceFen.StringFixed(8)
}
