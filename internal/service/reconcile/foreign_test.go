package reconcile_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// springDeduct is what the Spring producers run on a hot balance (their
// AgentBalanceRedisService): take min(balance, amount) with Lua numbers,
// print 8 places, keep no record. Isle's own scripts never run it.
var springDeduct = redis.NewScript(`
local bal = redis.call('GET', KEYS[1])
if not bal then return '-1' end
local cur = tonumber(bal)
if cur <= 0 then return '-3' end
local took = math.min(cur, tonumber(ARGV[1]))
redis.call('SET', KEYS[1], string.format('%.8f', cur - took))
return string.format('%.8f', took)`)

// foreignDeduct takes amount from user's hot balance as a Spring producer
// does, and returns the message it publishes: no deduction id, an AMQP
// message id only.
func (m *money) foreignDeduct(t *testing.T, user, messageID, amount string) (topology.AgentBillingDeduct, context.Context) {
	t.Helper()
	took, err := springDeduct.Run(context.Background(), m.r.Client(keys.DBAgentBilling), []string{m.r.Keys().AgentBalance(user)}, amount).Text()
	require.NoError(t, err)
	require.NotContains(t, []string{"-1", "-3"}, took)
	ctx := messaging.WithDelivery(context.Background(), messaging.Delivery{MessageID: messageID})
	return topology.AgentBillingDeduct{Username: user, AmountFen: took, ModelName: "spring-model"}, ctx
}

// heldBack is an in-flight gate a test opens and closes.
type heldBack struct{ held atomic.Bool }

func (h *heldBack) DeductionsInFlight(context.Context) (reconcile.Holds, error) {
	if h.held.Load() {
		return reconcile.Holds{All: "a message is held back"}, nil
	}
	return reconcile.Holds{}, nil
}

// A deduction a Spring producer took in Redis, whose message is held back
// past the quiet period (a backlog, a worker down, retries, the DLQ), is
// not corrected by balance-sync: when the message lands, MySQL moves once.
// Once nothing can arrive any more, a Redis that holds deductions MySQL
// never got (a lost message) is what MySQL is brought to.
func TestForeignDeductionHeldBackMovesMySQLOnce(t *testing.T) {
	t.Parallel()
	m := newMoney(t)
	gate := &heldBack{}
	m.sync = newMoneySyncGated(m, gate)
	ctx := context.Background()
	_, err := store.NewAccounts(m.db).Create(ctx, "hal", "", dec("10"))
	require.NoError(t, err)
	require.Equal(t, "10.00000000", m.hot(t, "hal"))

	msg, mctx := m.foreignDeduct(t, "hal", "spring-1", "4.00000000")
	gate.held.Store(true)
	res := m.run(t)
	require.Zero(t, res.Adjustments, "the message may still arrive")
	require.Equal(t, 1, res.Count("deferred"))
	require.Equal(t, "10.00000000", m.mysqlBalance(t, "hal").StringFixed(8))

	gate.held.Store(false)
	require.NoError(t, m.consumer.Handle(mctx, msg))
	require.Equal(t, "6.00000000", m.mysqlBalance(t, "hal").StringFixed(8), "MySQL moved once")
	res = m.run(t)
	require.Zero(t, res.Adjustments)
	require.Zero(t, res.DriftFound)
	require.Equal(t, "6.00000000", m.hot(t, "hal"))

	m.foreignDeduct(t, "hal", "spring-2", "1.50000000") // its message is lost
	res = m.run(t)
	require.Equal(t, 1, res.Adjustments, "nothing can arrive: Redis knows a deduction MySQL never got")
	require.Equal(t, "4.50000000", m.mysqlBalance(t, "hal").StringFixed(8))
	require.Equal(t, "4.50000000", m.ledgerSum(t, "hal", "").StringFixed(8))
}
