package console_test

import (
	"context"
	"fmt"
	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/lease"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/internal/service/console"
	"github.com/eisland/isle/internal/service/dlq"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

// fleet is a seeded fleet in one process: the API serving the console
// under /admin/ (login and all), the agent-billing consumer of a worker,
// the reconciler's jobs, and the data an operator would look at: queues
// with traffic, dead messages of several domains, users with pending
// deductions, and the runs of a leader.
type fleet struct {
	*testBundle
	api       *httptest.Server
	adminJWT  string
	deadRef   string // the dead deduction of erin's req-erin-2, replayable
	deadEmail string // an email message dead twice: its second death
}

var fleetSecret = []byte("console-fleet-test-secret-0123456789")

func newFleet(t *testing.T) *fleet {
	t.Helper()
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var api delegate
	apiServer := httptest.NewServer(&api)
	t.Cleanup(apiServer.Close)
	worker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, `{"status":"ok"}`) }))
	t.Cleanup(worker.Close)
	b := setup(t, options{interval: time.Second, probes: []console.Probe{
		{Name: "api", URL: apiServer.URL + "/healthz"}, {Name: "worker", URL: worker.URL + "/healthz"},
		{Name: "relay", URL: ""}, {Name: "reconcile", URL: ""},
	}, backends: func(d *console.Backends) {
		dead := dlq.NewStore(d.DB, d.Topology)
		admin, err := rabbitadmin.New(storetest.ManagementURL(), "/")
		require.NoError(t, err)
		inflight, err := reconcile.NewBillingInFlight(d.Topology, admin, d.DB)
		require.NoError(t, err)
		dom, _ := d.Topology.Domain(topology.DomainObjectReplication)
		d.Jobs = []console.Job{
			{Job: reconcile.NewBalanceSync(d.DB, d.Redis, reconcile.BalanceSyncConfig{}, inflight, nil, quiet), Schedule: "@every 30m"},
			{Job: reconcile.NewDLQReplay(dead, d.Publisher, topology.DomainObjectReplication, 100)},
			{Job: reconcile.NewOutboxPurge(d.DB, reconcile.OutboxPurgeConfig{}, nil, quiet), Schedule: "@every 1h"},
			{Job: reconcile.NewReplicationBackfill(d.DB, dom, d.Publisher, reconcile.BackfillConfig{}, nil, quiet)},
		}
		d.Runner = reconcile.Runner{Redis: d.Redis, Runs: store.NewJobRuns(d.DB), Log: quiet, Owner: "api@console-test pid 1"}
		d.Operator = func(r *http.Request) string { p, _ := httpapi.PrincipalFrom(r.Context()); return p.Subject }
	}})
	f := &fleet{testBundle: b, api: apiServer}
	srv, err := httpapi.New(httpapi.Config{JWTSecret: fleetSecret}, httpapi.Backends{
		DB: b.db, Redis: b.redis, Publisher: b.pub, Billing: billing.New(b.db, b.redis), Topology: b.tp,
		Log: quiet, Registry: prometheus.NewRegistry(), Admin: b.console,
	})
	require.NoError(t, err)
	api.set(srv)
	f.adminJWT, err = httpapi.MintToken(fleetSecret, "root", httpapi.RoleAdmin, time.Hour, time.Now())
	require.NoError(t, err)
	runCtx, stop := context.WithCancel(ctx)
	t.Cleanup(stop)
	go b.console.Run(runCtx)

	f.startBillingConsumer(t, runCtx, quiet)
	f.seedMoney(t)
	f.seedDead(t)
	f.seedQueues(t)
	f.seedRuns(t, quiet)
	return f
}

// delegate is a handler set once its target exists.
type delegate struct {
	mu   sync.Mutex
	next http.Handler
}

func (d *delegate) set(h http.Handler) { d.mu.Lock(); d.next = h; d.mu.Unlock() }

func (d *delegate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d.mu.Lock()
	next := d.next
	d.mu.Unlock()
	if next == nil {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	next.ServeHTTP(w, r)
}

// startBillingConsumer runs the worker's agent-billing consumer (and its
// DLQ consumer), as `worker -handlers agent-billing,agent-billing-dlq`.
func (f *fleet) startBillingConsumer(t *testing.T, ctx context.Context, log *slog.Logger) {
	t.Helper()
	ledger, usage := store.NewLedgerWriter(f.db, nil), store.NewUsageWriter(f.db, nil)
	t.Cleanup(func() { ledger.Close(); usage.Close() })
	sub, err := messaging.NewSubscriber(messaging.SubscriberConfig{URL: storetest.AMQPURL(), Name: "console-test-worker", FinishHeld: true}, log)
	require.NoError(t, err)
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	require.NoError(t, err)
	dom, _ := f.tp.Domain(topology.DomainAgentBilling)
	hd := handlers.Backends{DB: f.db, Redis: f.redis, Ledger: ledger, Usage: usage, Log: log, Topology: f.tp}
	for _, cons := range handlers.Consumers {
		if cons.Domain == dom.Name {
			router.AddConsumerHandler(dom.Name, dom.Queue, sub, messaging.RouterHandler(cons.New(hd, log))).
				AddMiddleware(messaging.MainChain(dom, f.pub, nil, messaging.ChainConfig{}, log)...)
		}
	}
	router.AddConsumerHandler(dom.Name+"-dlq", dom.DLQ, sub, messaging.RouterHandler(handlers.NewDeadLetters(f.db, dom, log).Handle)).
		AddMiddleware(messaging.DeadLetterChain(dom, nil, messaging.ChainConfig{}, log)...)
	done := make(chan struct{})
	go func() { defer close(done); _ = router.Run(ctx) }()
	t.Cleanup(func() { _ = router.Close(); <-done; _ = sub.Close() })
	select {
	case <-router.Running():
	case <-time.After(20 * time.Second):
		t.Fatal("the billing consumer did not start")
	}
}

// seedMoney opens accounts and charges erin three requests whose deductions
// stay pending (their messages were not consumed: the second one's died).
func (f *fleet) seedMoney(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, store.NewPrices(f.db, f.redis).Set(ctx, store.Pricing{Model: "gpt-demo", Input: decimal.RequireFromString("2000"),
		Output: decimal.RequireFromString("8000"), Enabled: true}))
	for user, balance := range map[string]string{"erin": "100", "frank": "42.5"} {
		_, err := store.NewAccounts(f.db).Create(ctx, user, user+"@example.com", decimal.RequireFromString(balance))
		require.NoError(t, err)
	}
	svc := billing.New(f.db, f.redis)
	for i, tokens := range []billing.Tokens{{Input: 1200, Output: 300}, {Input: 5400, Output: 2100}, {Input: 800, Output: 90}} {
		id := fmt.Sprint("req-erin-", i+1)
		ch, err := svc.Charge(ctx, billing.Request{ID: id, Username: "erin", Model: "gpt-demo", Tokens: tokens})
		require.NoError(t, err)
		if i != 1 {
			continue
		}
		body, err := topology.Encode(topology.AgentBillingDeduct{DeductionID: id, Username: "erin", AmountFen: ch.Deducted.StringFixed(8),
			ModelName: "gpt-demo", InputTokens: int32(tokens.Input), OutputTokens: int32(tokens.Output), PendingRef: ch.Ref, RequestHash: ch.RequestHash,
			LastError: "apply deduction req-erin-2: dial tcp 10.0.3.7:3306: connect: connection refused"})
		require.NoError(t, err)
		id1 := f.deadMessage(t, topology.DomainAgentBilling, "msg-"+id, string(body), "apply deduction req-erin-2: dial tcp 10.0.3.7:3306: connect: connection refused", time.Now().Add(-4*time.Minute))
		f.deadRef = fmt.Sprint(topology.DomainAgentBilling, "/", id1)
	}
}

// seedDead stores dead messages of several domains, one of them dead twice
// (replayed once, dead again).
func (f *fleet) seedDead(t *testing.T) {
	t.Helper()
	now := time.Now()
	type dead struct {
		domain, id, body, err string
		ago                   time.Duration
	}
	for _, d := range []dead{
		{topology.DomainEmail, "msg-mail-7", `{"traceId":"9f2c","email":"ann@example.com","scene":"LOGIN","code":"482913","createdAtEpochSeconds":1767000000}`, "smtp: 451 4.7.1 greylisted, try again later", 3 * time.Hour},
		{topology.DomainPaymentNotify, "msg-pay-3", `{"notifyId":"N20260512001","channel":"ALIPAY","outTradeNo":"ORD-77812","transactionId":"2026051222001","tradeState":"SUCCESS","verifyOk":true}`, "permanent: order ORD-77812 not found", 50 * time.Minute},
		{topology.DomainMiniGameScore, "msg-score-9", `{"submitId":"s-991","userId":1042,"gameId":"tetris","score":128400,"durationMs":512000,"moves":913}`, "permanent: session s-991 expired", 25 * time.Minute},
		{topology.DomainObjectReplication, "msg-obj-41", `{"taskId":41,"traceId":"c41a"}`, "copy avatar 41: source store: 503 Service Unavailable", 12 * time.Minute},
		{topology.DomainPaymentReceipt, "msg-rcpt-2", `{"email":"bob@example.com","outTradeNo":"ORD-77790","channel":"WECHAT","amountFen":1990,"currency":"CNY","productCode":"pro-month"}`, "mailer: 550 5.1.1 mailbox unavailable", 8 * time.Minute},
		{topology.DomainEmail, "msg-mail-8", `{"traceId":"77aa","email":"carl@example.org","scene":"REGISTER","code":"118202","createdAtEpochSeconds":1767000300}`, "smtp: 421 4.4.2 connection timed out", 90 * time.Second},
	} {
		f.deadMessage(t, d.domain, d.id, d.body, d.err, now.Add(-d.ago))
	}
	first := f.deadMessage(t, topology.DomainEmail, "msg-mail-5", `{"traceId":"5e5e","email":"dora@example.net","scene":"RESET_PASSWORD","code":"300111","createdAtEpochSeconds":1767000500}`, "smtp: 421 4.4.2 connection timed out", now.Add(-2*time.Hour))
	d, _ := f.tp.Domain(topology.DomainEmail)
	require.NoError(t, f.db.Exec("UPDATE "+d.DLQTable+" SET replayed_at = ?, replay_count = 1 WHERE id = ?", now.Add(-110*time.Minute).UTC(), first).Error)
	second := f.deadMessage(t, topology.DomainEmail, "msg-mail-5", `{"traceId":"5e5e","email":"dora@example.net","scene":"RESET_PASSWORD","code":"300111","createdAtEpochSeconds":1767000500,"x":1}`, "smtp: 550 5.1.1 mailbox unavailable", now.Add(-100*time.Minute))
	f.deadEmail = fmt.Sprint(topology.DomainEmail, "/", second)
}

// seedQueues puts messages where nothing consumes them, over a few
// seconds, as traffic would: the email queue fills to 40, a score waits in
// its DLQ (no DLQ consumer runs for it).
func (f *fleet) seedQueues(t *testing.T) {
	t.Helper()
	ch, err := f.conn.Channel()
	require.NoError(t, err)
	email, _ := f.tp.Domain(topology.DomainEmail)
	score, _ := f.tp.Domain(topology.DomainMiniGameScore)
	for range 3 {
		require.NoError(t, ch.Publish(score.Exchange, score.DLQKey, false, false, amqp.Publishing{Body: []byte(`{"submitId":"s-1"}`)}))
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer ch.Close()
		for i := range 40 {
			if err := ch.Publish(email.Exchange, email.RoutingKey, false, false, amqp.Publishing{Body: fmt.Appendf(nil, `{"email":"u%d@example.com"}`, i)}); err != nil {
				t.Errorf("publish email %d: %v", i, err)
				return
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	t.Cleanup(func() { <-done })
}

// seedRuns makes a leader that ran the scheduled jobs once.
func (f *fleet) seedRuns(t *testing.T, log *slog.Logger) {
	t.Helper()
	ctx := context.Background()
	l := lease.New(f.redis.Client(keys.LeaderLease.DB), f.redis.Keys().LeaderLease(reconcile.LeaderGroup), 10*time.Minute)
	held, err := l.Acquire(ctx)
	require.NoError(t, err)
	require.True(t, held)
	runner := reconcile.Runner{Redis: f.redis, Runs: store.NewJobRuns(f.db), Log: log, Owner: "reconcile@isle-1 pid 4242, lease " + l.Owner()}
	_, err = runner.Run(ctx, reconcile.NewOutboxPurge(f.db, reconcile.OutboxPurgeConfig{}, nil, log), reconcile.StartedBySchedule)
	require.NoError(t, err)
	admin, err := rabbitadmin.New(storetest.ManagementURL(), "/")
	require.NoError(t, err)
	inflight, err := reconcile.NewBillingInFlight(f.tp, admin, f.db)
	require.NoError(t, err)
	_, err = runner.Run(ctx, reconcile.NewBalanceSync(f.db, f.redis, reconcile.BalanceSyncConfig{}, inflight, nil, log), reconcile.StartedBySchedule)
	require.NoError(t, err)
}
