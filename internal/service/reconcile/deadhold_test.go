package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/internal/service/dlq"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// gated is a money bundle whose balance-sync asks the fleet's real gate:
// the billing queues' depths from the broker's management API, and the
// stored dead billing messages.
type gated struct {
	*money
	tp   *topology.Topology
	dom  topology.Domain
	gate *reconcile.BillingInFlight
	reg  *prometheus.Registry
	conn *amqp.Connection
}

func newGated(t *testing.T) *gated {
	t.Helper()
	m := newMoney(t)
	conn, prefix := storetest.AMQP(t)
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	require.NoError(t, tp.Declare(conn))
	admin, err := rabbitadmin.New(storetest.ManagementURL(), "/")
	require.NoError(t, err)
	gate, err := reconcile.NewBillingInFlight(tp, admin, m.db)
	require.NoError(t, err)
	dom, _ := tp.Domain(topology.DomainAgentBilling)
	g := &gated{money: m, tp: tp, dom: dom, gate: gate, reg: prometheus.NewRegistry(), conn: conn}
	m.sync = reconcile.NewBalanceSync(m.db, m.r, reconcile.BalanceSyncConfig{PendingAge: -1, Quiet: -1, ConfirmDelay: -1}, gate, reconcile.NewMetrics(g.reg), discard)
	// The broker counts a queue a few seconds after it is declared; until
	// then the gate cannot tell.
	require.Eventually(t, func() bool {
		_, err := gate.DeductionsInFlight(context.Background())
		return err == nil
	}, 30*time.Second, 250*time.Millisecond, "the broker counts the billing queues")
	return g
}

// item is what isle_reconcile_items_total counted of balance-sync's item.
func (g *gated) item(t *testing.T, item string) float64 {
	t.Helper()
	mfs, err := g.reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != "isle_reconcile_items_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["job"] == "balance-sync" && labels["item"] == item {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// storeDead stores a dead billing message as the DLQ consumer does, and
// returns its name (agent-billing/12).
func (g *gated) storeDead(t *testing.T, messageID, body, deadReason string) string {
	t.Helper()
	headers := `{"x-agent-billing-retry-count":3,"` + messaging.HeaderDeadReason + `":"` + deadReason + `"}`
	dl := &store.DeadLetter{DedupKey: store.DeadLetterKey(g.dom.DLQ, messageID, 0, []byte(body)), Queue: g.dom.DLQ, MessageID: messageID,
		Body: []byte(body), Headers: headers, RetryCount: 3, DeadAt: time.Now()}
	saved, err := store.NewDeadLetters(g.db).Save(context.Background(), g.dom.DLQTable, dl)
	require.NoError(t, err)
	require.True(t, saved)
	return dlq.Ref{Domain: g.dom.Name, ID: dl.ID}.String()
}

// One dead message stops every correction: it did, while any billing
// message was stored dead and not replayed. Now a dead message that can
// never apply (a truncated body, a user with no account, one refused as
// permanent) holds nobody back, and one that may still apply holds back
// its own user alone.
func TestOneDeadMessageStopsEveryCorrection(t *testing.T) {
	t.Parallel()
	g := newGated(t)
	ctx := context.Background()
	for _, u := range []string{"yan", "xia"} {
		_, err := store.NewAccounts(g.db).Create(ctx, u, "", dec("10"))
		require.NoError(t, err)
		require.Equal(t, "10.00000000", g.hot(t, u))
	}
	exhausted := "retries exhausted (3 of 3)"
	g.storeDead(t, "dead-truncated", `{"username":"yan","amountFen":"1.0`, "permanent: topology: decode AgentBillingDeductMessage: unexpected end of JSON input")
	g.storeDead(t, "dead-nobody", `{"username":"nobody","amountFen":"1.00000000","modelName":"spring-model"}`, exhausted)
	g.storeDead(t, "dead-refused", `{"username":"yan","amountFen":"3.00000000","modelName":"spring-model"}`, "permanent: deduction msg:dead-refused: refused")

	// yan: a Spring record without deduction id that the consumer applied
	// while Redis was not touched: MySQL has a deduction Redis never took.
	msg := topology.AgentBillingDeduct{Username: "yan", AmountFen: "2.00000000", ModelName: "spring-model"}
	require.NoError(t, g.consumer.Handle(messaging.WithDelivery(ctx, messaging.Delivery{MessageID: "spring-y1"}), msg))
	require.Equal(t, "8.00000000", g.mysqlBalance(t, "yan").StringFixed(8))
	// xia: a Spring producer took 1.5 in Redis; its message died after its
	// retries and waits in the DLQ table. A replay still applies it.
	xmsg, xctx := g.foreignDeduct(t, "xia", "spring-x1", "1.50000000")
	xia := g.storeDead(t, "spring-x1", `{"username":"xia","amountFen":"1.50000000","modelName":"spring-model"}`, exhausted)

	// The gate judges each stored message.
	h, err := g.gate.DeductionsInFlight(ctx)
	require.NoError(t, err)
	require.Empty(t, h.All)
	require.Equal(t, map[string][]string{"xia": {xia}}, h.Held())
	require.Len(t, h.Dead, 4)
	for i, want := range []string{"cannot be decoded", `no account named "nobody"`, "refused as permanent: deduction msg:dead-refused: refused", exhausted} {
		require.Contains(t, h.Dead[i].Why, want)
	}

	res := g.run(t)
	require.Equal(t, 2, res.DriftFound)
	require.Equal(t, 1, res.Rebuilt, "yan is rebuilt from MySQL: no stored message may still move its money; %s", res)
	require.Equal(t, 1, res.Deferred, "xia waits for its dead message: %s", res)
	require.Equal(t, 1, res.DeferredDead)
	require.Equal(t, []reconcile.Deferral{{User: "xia", Messages: []string{xia}}}, res.Deferrals)
	require.Equal(t, "8.00000000", g.hot(t, "yan"))
	require.Equal(t, "10.00000000", g.mysqlBalance(t, "xia").StringFixed(8), "xia is not adjusted while its message may land")
	require.Contains(t, res.String(), "deferred 1 (xia by "+xia+"), busy 0")
	require.Equal(t, 1.0, g.item(t, "deferred_dead"))
	require.Equal(t, 1.0, g.item(t, "deferred"))

	// The replay lands; xia agrees without an ADJUST.
	claimed, err := store.NewDeadLetters(g.db).ClaimReplay(ctx, g.dom.DLQTable, refID(t, xia), false)
	require.NoError(t, err)
	require.True(t, claimed)
	require.NoError(t, g.consumer.Handle(xctx, xmsg))
	res = g.run(t)
	require.Zero(t, res.DriftFound, "%s", res)
	require.Zero(t, res.Deferred)
	require.Equal(t, "8.50000000", g.mysqlBalance(t, "xia").StringFixed(8))
	require.True(t, g.ledgerSum(t, "xia", "ADJUST").IsZero())

	// yan drifts again. A gate that cannot read the queues' depths holds
	// every drift back, and the result says so.
	msg = topology.AgentBillingDeduct{Username: "yan", AmountFen: "1.00000000", ModelName: "spring-model"}
	require.NoError(t, g.consumer.Handle(messaging.WithDelivery(ctx, messaging.Delivery{MessageID: "spring-y2"}), msg))
	down, err := rabbitadmin.New("http://guest:guest@127.0.0.1:1", "/")
	require.NoError(t, err)
	blind, err := reconcile.NewBillingInFlight(g.tp, down, g.db)
	require.NoError(t, err)
	out, err := reconcile.NewBalanceSync(g.db, g.r, reconcile.BalanceSyncConfig{PendingAge: -1, Quiet: -1, ConfirmDelay: -1}, blind, nil, discard).RunOnce(ctx)
	require.NoError(t, err)
	br := out.(reconcile.BalanceResult)
	require.Equal(t, 1, br.DeferredUnknown, "%s", br)
	require.Len(t, br.Deferrals, 1)
	require.Equal(t, "yan", br.Deferrals[0].User)
	require.Contains(t, br.Deferrals[0].Why, "cannot tell whether a deduction message may still arrive: depth of "+g.dom.Queue)
	require.Contains(t, br.String(), "deferred 1 (yan: cannot tell")

	// A message in the billing queue cannot be read per user without
	// consuming it: while it waits, every drift waits.
	ch, err := g.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, ch.PublishWithContext(ctx, g.dom.Exchange, g.dom.RoutingKey, false, false, amqp.Publishing{Body: []byte(`{"username":"zed","amountFen":"1"}`)}))
	require.Eventually(t, func() bool { h, err := g.gate.DeductionsInFlight(ctx); return err == nil && h.All != "" }, 30*time.Second, 250*time.Millisecond)
	res = g.run(t)
	require.Equal(t, 1, res.DeferredInFlight, "%s", res)
	require.Zero(t, res.Rebuilt)
	require.Contains(t, res.String(), "deferred 1 (yan: "+g.dom.Queue+" holds 1 messages (0 unacknowledged)")
	require.Equal(t, 1.0, g.item(t, "deferred_in_flight"))
	require.Equal(t, "8.00000000", g.hot(t, "yan"))

	_, err = ch.QueuePurge(g.dom.Queue, false)
	require.NoError(t, err)
	require.Eventually(t, func() bool { h, err := g.gate.DeductionsInFlight(ctx); return err == nil && h.All == "" }, 30*time.Second, 250*time.Millisecond)
	res = g.run(t)
	require.Equal(t, 1, res.Rebuilt, "%s", res)
	require.Zero(t, res.Deferred)
	require.Equal(t, "7.00000000", g.hot(t, "yan"))
	require.Equal(t, "7.00000000", g.mysqlBalance(t, "yan").StringFixed(8))
}

// A message refused as permanent before its user's account existed may
// have been refused for want of it: a replay would now apply it, so it
// holds that user back. Refused by an account that existed, it holds
// nobody.
func TestDeadMessageRefusedBeforeItsAccountExistedHoldsIt(t *testing.T) {
	t.Parallel()
	g := newGated(t)
	ctx := context.Background()
	refused := "permanent: deduction msg:r: store: no such user: late"
	early := g.storeDead(t, "r", `{"username":"late","amountFen":"1.00000000","modelName":"spring-model"}`, refused)
	_, err := store.NewAccounts(g.db).Create(ctx, "late", "", dec("10"))
	require.NoError(t, err)
	require.NoError(t, g.db.Exec("UPDATE user_account SET created_at = ? WHERE username = 'late'", time.Now().Add(time.Minute).UTC()).Error)
	_, err = store.NewAccounts(g.db).Create(ctx, "old", "", dec("10"))
	require.NoError(t, err)
	require.NoError(t, g.db.Exec("UPDATE user_account SET created_at = ? WHERE username = 'old'", time.Now().Add(-time.Hour).UTC()).Error)
	g.storeDead(t, "o", `{"username":"old","amountFen":"1.00000000","modelName":"spring-model"}`, "permanent: deduction msg:o: refused")

	h, err := g.gate.DeductionsInFlight(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"late": {early}}, h.Held())
	require.Contains(t, h.Dead[1].Why, "refused as permanent")
}

func refID(t *testing.T, ref string) uint64 {
	t.Helper()
	r, err := dlq.ParseRef(ref)
	require.NoError(t, err)
	return r.ID
}
