package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// The fleet's gate sees a deduction message while it waits in the billing
// queue (the broker's statistics catch up within seconds), and while a
// dead one that may still apply waits in the DLQ table to be replayed;
// with neither, nothing is in flight.
func TestBillingInFlightSeesQueuedAndDeadMessages(t *testing.T) {
	t.Parallel()
	conn, prefix := storetest.AMQP(t)
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	require.NoError(t, tp.Declare(conn))
	db := storetest.MySQL(t)
	admin, err := rabbitadmin.New(storetest.ManagementURL(), "/")
	require.NoError(t, err)
	gate, err := reconcile.NewBillingInFlight(tp, admin, db)
	require.NoError(t, err)
	ctx := context.Background()
	// A queue the broker has not counted yet (just declared, or statistics
	// off) is not taken for empty: the gate cannot tell. The broker's
	// statistics tick every few seconds, so a tick may land between the
	// declaration and this call (CI saw it once): then it must say empty.
	if w, err := gate.DeductionsInFlight(ctx); err == nil {
		require.Empty(t, w.String(), "just declared, counted already: empty")
	} else {
		require.ErrorIs(t, err, rabbitadmin.ErrNoStatistics)
	}
	why := func() string {
		w, err := gate.DeductionsInFlight(ctx)
		if err != nil {
			return "error: " + err.Error()
		}
		return w.String()
	}
	require.Eventually(t, func() bool { return why() == "" }, 20*time.Second, 250*time.Millisecond, "counted, and empty")

	d, _ := tp.Domain(topology.DomainAgentBilling)
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, ch.PublishWithContext(ctx, d.Exchange, d.RoutingKey, false, false, amqp.Publishing{Body: []byte(`{"username":"u","amountFen":"1"}`)}))
	require.Eventually(t, func() bool { return why() != "" }, 20*time.Second, 250*time.Millisecond, "a queued message is seen")
	require.Contains(t, why(), d.Queue)
	_, err = ch.QueuePurge(d.Queue, false)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return why() == "" }, 20*time.Second, 250*time.Millisecond, "an empty queue is seen")

	// A dead message waits in the DLQ queue until the DLQ consumer stores it
	// (that worker down, or the message refused by the database).
	require.NoError(t, ch.PublishWithContext(ctx, d.Exchange, d.DLQKey, false, false, amqp.Publishing{Body: []byte(`{"username":"u","amountFen":"1"}`)}))
	require.Eventually(t, func() bool { return why() != "" }, 20*time.Second, 250*time.Millisecond, "a message in the DLQ queue is seen")
	require.Contains(t, why(), d.DLQ)
	_, err = ch.QueuePurge(d.DLQ, false)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return why() == "" }, 20*time.Second, 250*time.Millisecond)

	// A stored dead message holds back the user it may still charge (one
	// that can never apply holds nobody: TestOneDeadMessageStopsEveryCorrection).
	_, err = store.NewAccounts(db).Create(ctx, "u", "", dec("5"))
	require.NoError(t, err)
	_, err = store.NewDeadLetters(db).Save(ctx, d.DLQTable, &store.DeadLetter{DedupKey: "k1", Queue: d.DLQ, MessageID: "m1", Subject: "u",
		Body: []byte(`{"username":"u","amountFen":"1","modelName":"m"}`), Headers: "{}", DeadAt: time.Now()})
	require.NoError(t, err)
	require.Contains(t, why(), "DLQ")
	require.Contains(t, why(), "u by agent-billing/")
}
