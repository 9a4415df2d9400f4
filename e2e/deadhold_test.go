package e2e_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// One dead message stops every correction, with the binaries: a truncated
// deduct message dies in the DLQ table (refused as permanent by the
// worker, stored by its DLQ consumer), and a Spring record without
// deductionId is applied to MySQL while Redis was not touched. balance-sync
// reported "drift found 1, deferred 1" run after run; the dead message can
// never apply, so now the user is rebuilt from MySQL.
func TestOneDeadMessageStopsEveryCorrectionWithTheBinaries(t *testing.T) {
	t.Parallel()
	f := newBillingFleet(t, map[string]string{"yan": "10"})
	f.env["BALANCE_SYNC_CONFIRM_DELAY"] = "0"
	start(t, f.env, "worker").waitFor(t, 30*time.Second, "worker started")
	ctx := context.Background()
	_, err := store.NewBalances(f.db, f.rdb).Ensure(ctx, "yan")
	require.NoError(t, err)

	d, _ := f.tp.Domain(topology.DomainAgentBilling)
	ch, err := f.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	for id, body := range map[string]string{
		"cut-1":     `{"username":"yan","amountFen":"1.0`,
		"spring-y1": `{"username":"yan","amountFen":"2.00000000","modelName":"spring-model"}`,
	} {
		require.NoError(t, ch.PublishWithContext(ctx, d.Exchange, d.RoutingKey, false, false, amqp.Publishing{
			ContentType: "application/json", MessageId: id, Headers: amqp.Table{"__TypeId__": d.TypeID}, Body: []byte(body),
		}))
	}
	require.Eventually(t, func() bool {
		var dead int64
		require.NoError(t, f.db.Table(d.DLQTable).Count(&dead).Error)
		acct, err := store.NewAccounts(f.db).Get(ctx, "yan")
		require.NoError(t, err)
		return dead == 1 && acct.BalanceFen.StringFixed(8) == "8.00000000"
	}, 30*time.Second, 100*time.Millisecond, "the cut message is stored dead, the Spring one applied to MySQL")
	admin, err := rabbitadmin.New(storetest.ManagementURL(), "/")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		for _, q := range []string{d.Queue, d.RetryQueue, d.DLQ} {
			if depth, err := admin.Depth(ctx, q); err != nil || depth.Messages() > 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 250*time.Millisecond, "the broker counts the billing queues empty")

	out := f.reconcileOnce(t, "balance-sync")
	require.Contains(t, out, "drift found 1", out)
	require.Contains(t, out, "rebuilt 1", out)
	require.Contains(t, out, "deferred 0", out)
	bal, err := store.NewBalances(nil, f.rdb).Balance(ctx, "yan")
	require.NoError(t, err)
	require.Equal(t, "8.00000000", bal.StringFixed(8), "Redis is rebuilt from MySQL")
}
