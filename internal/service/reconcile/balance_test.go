package reconcile_test

import (
	"context"
	"testing"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// A deduction whose message never arrives is charged by the reconciler,
// exactly once.
func TestLostMessageIsChargedOnce(t *testing.T) {
	t.Parallel()
	m := newMoney(t)
	ctx := context.Background()
	_, err := store.NewAccounts(m.db).Create(ctx, "lost", "", dec("10"))
	require.NoError(t, err)
	c, err := m.svc.Charge(ctx, billing.Request{ID: "r1", Username: "lost", Model: "m", Tokens: billing.Tokens{Input: 3}})
	require.NoError(t, err)
	require.Equal(t, "3.00000000", c.Deducted.StringFixed(8))
	// The message is lost: no consumer ever sees it.

	res := m.run(t)
	require.Equal(t, 1, res.PendingApplied)
	require.Equal(t, "7.00000000", m.mysqlBalance(t, "lost").StringFixed(8))
	res = m.run(t)
	require.Zero(t, res.PendingApplied, "not twice")
	require.Zero(t, res.DriftFound)
	require.Equal(t, "7.00000000", m.mysqlBalance(t, "lost").StringFixed(8))
	bal, err := m.svc.Balance(ctx, "lost")
	require.NoError(t, err)
	require.Equal(t, "7.00000000", bal.StringFixed(8))

	// The message turns up after all: nothing changes.
	require.NoError(t, m.consumer.Handle(ctx, topology.AgentBillingDeduct{DeductionID: "r1", Username: "lost", AmountFen: "3", ModelName: "m"}))
	require.Equal(t, "7.00000000", m.mysqlBalance(t, "lost").StringFixed(8))
	bal, _ = m.svc.Balance(ctx, "lost")
	require.Equal(t, "7.00000000", bal.StringFixed(8))
}

// The usage of a charge whose deduction message is lost while its usage
// message arrives is counted once: the reconciler counts a pending
// record's usage under the key the usage consumer gives the API's usage
// message.
func TestLostDeductionsUsageIsCountedOnce(t *testing.T) {
	t.Parallel()
	m := newMoney(t)
	ctx := context.Background()
	_, err := store.NewAccounts(m.db).Create(ctx, "half", "", dec("10"))
	require.NoError(t, err)
	_, err = m.svc.Charge(ctx, billing.Request{ID: "r1", Username: "half", Model: "m", Tokens: billing.Tokens{Input: 3}})
	require.NoError(t, err)
	usage := store.NewUsageWriter(m.db, nil)
	defer usage.Close()
	recorder := handlers.NewUsageRecorder(usage, store.NewUsageStats(m.db, m.r), discard)
	require.NoError(t, recorder.Handle(ctx, topology.AgentUsageStats{RequestID: "half:r1", ModelName: "m", InputTokens: 3}))

	res := m.run(t)
	require.Equal(t, 1, res.PendingApplied)
	require.Zero(t, res.UsageCounted, "the consumer counted it")
	var events int64
	require.NoError(t, m.db.Model(&store.UsageEvent{}).Count(&events).Error)
	require.EqualValues(t, 1, events)
}

// A quiet user whose balances differ gets an ADJUST row naming both values;
// a busy one is left alone.
func TestDriftIsCorrectedThroughTheLedger(t *testing.T) {
	t.Parallel()
	m := newMoney(t)
	ctx := context.Background()
	for _, u := range []string{"drift", "busy"} {
		_, err := store.NewAccounts(m.db).Create(ctx, u, "", dec("10"))
		require.NoError(t, err)
		_, err = m.svc.Balance(ctx, u)
		require.NoError(t, err)
	}
	// Someone edited Redis by hand.
	require.NoError(t, m.r.Client(keys.DBAgentBilling).Set(ctx, m.r.Keys().AgentBalance("drift"), "9.50000000", 0).Err())
	// busy has a deduction on its way.
	_, err := m.svc.Charge(ctx, billing.Request{ID: "b1", Username: "busy", Model: "m", Tokens: billing.Tokens{Input: 1}})
	require.NoError(t, err)
	m.sync = newMoneySync(m, false)

	res := m.run(t)
	require.Equal(t, 2, res.UsersScanned)
	require.Equal(t, 1, res.DriftFound)
	require.Equal(t, 1, res.Adjustments)
	require.Equal(t, 1, res.Busy)
	require.Equal(t, "9.50000000", m.mysqlBalance(t, "drift").StringFixed(8))
	require.Equal(t, "-0.50000000", m.ledgerSum(t, "drift", store.LedgerAdjust).StringFixed(8))
	var reason string
	require.NoError(t, m.db.Raw("SELECT reason FROM agent_ledger WHERE username = 'drift' AND kind = 'ADJUST'").Scan(&reason).Error)
	require.Equal(t, "balance-sync: redis 9.50000000, mysql 10.00000000", reason)
	require.Equal(t, "10.00000000", m.mysqlBalance(t, "busy").StringFixed(8), "a busy user is not compared")

	res = m.run(t)
	require.Zero(t, res.DriftFound, "in agreement now")
}
