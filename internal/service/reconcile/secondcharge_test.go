package reconcile_test

import (
	"context"
	"testing"

	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// charge is one /v1/agent/usage call of 1 fen per input token, and the
// deduction message the API publishes for it.
func (m *money) charge(t *testing.T, user, id string, tokens int64) (billing.Charge, topology.AgentBillingDeduct) {
	t.Helper()
	c, err := m.svc.Charge(context.Background(), billing.Request{ID: id, Username: user, Model: "m", Tokens: billing.Tokens{Input: tokens}})
	require.NoError(t, err)
	return c, topology.AgentBillingDeduct{DeductionID: id, Username: user, AmountFen: c.Deducted.StringFixed(8), ModelName: "m",
		InputTokens: int32(tokens), PendingRef: c.Ref, RequestHash: c.RequestHash}
}

// forget drops a deduction's idempotency markers, as their expiry (7 days)
// or a Redis loss that restored only the newest markers does.
func (m *money) forget(t *testing.T, user, id string) {
	t.Helper()
	c := m.r.Client(keys.DBAgentBilling)
	require.NoError(t, c.Del(context.Background(), m.r.Keys().AgentDeduction(user, id),
		m.r.Keys().AgentSettled(user, store.SettleDeduction, id)).Err())
}

// hot is the user's hot balance, initialised from MySQL if missing.
func (m *money) hot(t *testing.T, user string) string {
	t.Helper()
	bal, err := m.svc.Balance(context.Background(), user)
	require.NoError(t, err)
	return bal.StringFixed(8)
}

// A request id charged again after Redis forgot its marker — the ledger
// row is settled, the new pending record is not its own — is refunded to
// the hot balance, whoever finds it: the consumer of the second message,
// or balance-sync when that message is lost. The user pays once.
func TestSecondChargeAfterMarkerLossIsRefunded(t *testing.T) {
	t.Parallel()
	for _, finder := range []string{"consumer", "reconciler"} {
		t.Run(finder, func(t *testing.T) {
			t.Parallel()
			m := newMoney(t)
			ctx := context.Background()
			_, err := store.NewAccounts(m.db).Create(ctx, "dora", "", dec("10"))
			require.NoError(t, err)
			_, first := m.charge(t, "dora", "r1", 3)
			require.NoError(t, m.consumer.Handle(ctx, first))
			require.Equal(t, "7.00000000", m.hot(t, "dora"))

			m.forget(t, "dora", "r1")
			c, second := m.charge(t, "dora", "r1", 3)
			require.False(t, c.Replayed, "Redis cannot know: its marker is gone")
			require.Equal(t, "4.00000000", m.hot(t, "dora"), "taken again...")

			if finder == "consumer" {
				require.NoError(t, m.consumer.Handle(ctx, second))
			} else {
				res := m.run(t)
				require.Equal(t, 1, res.Count("refunded"))
			}
			require.Equal(t, "7.00000000", m.hot(t, "dora"), "...and given back")
			require.Equal(t, "7.00000000", m.mysqlBalance(t, "dora").StringFixed(8))
			pending, err := store.NewBalances(nil, m.r).Pending(ctx, "dora")
			require.NoError(t, err)
			require.Empty(t, pending)
			c, _ = m.charge(t, "dora", "r1", 3)
			require.True(t, c.Replayed, "the marker is back")
			require.Equal(t, "7.00000000", m.hot(t, "dora"))
			require.Zero(t, m.run(t).Adjustments)
		})
	}
}

// A pending record that comes back with an older Redis snapshot, after its
// deduction was applied and settled, is the row's own: the snapshot's
// balance has the deduction taken, so the record is only cleared, never
// refunded.
func TestPendingRecordBackFromASnapshotIsOnlyCleared(t *testing.T) {
	t.Parallel()
	for _, finder := range []string{"consumer", "reconciler"} {
		t.Run(finder, func(t *testing.T) {
			t.Parallel()
			m := newMoney(t)
			ctx := context.Background()
			_, err := store.NewAccounts(m.db).Create(ctx, "ezra", "", dec("10"))
			require.NoError(t, err)
			_, msg := m.charge(t, "ezra", "r1", 3)
			snap := storetest.TakeSnapshot(t, m.r) // r1 is pending in it
			require.NoError(t, m.consumer.Handle(ctx, msg))
			snap.Restore(t)
			require.Equal(t, "7.00000000", m.hot(t, "ezra"))

			if finder == "consumer" {
				require.NoError(t, m.consumer.Handle(ctx, msg), "a redelivery")
			} else {
				res := m.run(t)
				require.Zero(t, res.Count("refunded"))
			}
			require.Equal(t, "7.00000000", m.hot(t, "ezra"), "not refunded")
			require.Equal(t, "7.00000000", m.mysqlBalance(t, "ezra").StringFixed(8))
			pending, err := store.NewBalances(nil, m.r).Pending(ctx, "ezra")
			require.NoError(t, err)
			require.Empty(t, pending, "cleared")
			require.Zero(t, m.run(t).Adjustments)
			require.Equal(t, "7.00000000", m.hot(t, "ezra"))
		})
	}
}

// A deduction balance-sync writes before its message arrives has the
// request's model and token counts: the pending record carries them, and a
// row written without them (from a record of an older build) gets them
// when the message lands.
func TestReconcilerRowsHaveModelAndTokens(t *testing.T) {
	t.Parallel()
	m := newMoney(t)
	ctx := context.Background()
	_, err := store.NewAccounts(m.db).Create(ctx, "finn", "", dec("10"))
	require.NoError(t, err)
	_, msg := m.charge(t, "finn", "r1", 3)
	// r0: a pending record of an older build, with no usage in it.
	require.NoError(t, m.r.Client(keys.DBAgentBilling).HSet(ctx, m.r.Keys().AgentPending("finn"), "r0", "1.00000000|1700000000000").Err())
	require.NoError(t, m.r.Client(keys.DBAgentBilling).IncrByFloat(ctx, m.r.Keys().AgentBalance("finn"), -1).Err())
	require.Equal(t, 2, m.run(t).PendingApplied)

	row := func(id string) (string, uint32) {
		var e store.LedgerEntry
		require.NoError(t, m.db.Where("username = 'finn' AND entry_id = ?", id).Take(&e).Error)
		if e.ModelName == nil || e.InputTokens == nil {
			return "", 0
		}
		return *e.ModelName, *e.InputTokens
	}
	model, in := row("r1")
	require.Equal(t, "m", model, "from the pending record")
	require.EqualValues(t, 3, in)
	model, _ = row("r0")
	require.Empty(t, model)

	require.NoError(t, m.consumer.Handle(ctx, msg), "r1's message, late: nothing to fill")
	require.NoError(t, m.consumer.Handle(ctx, topology.AgentBillingDeduct{DeductionID: "r0", Username: "finn", AmountFen: "1", ModelName: "old-model", InputTokens: 7, OutputTokens: 2}))
	model, in = row("r0")
	require.Equal(t, "old-model", model, "filled when the message lands")
	require.EqualValues(t, 7, in)
	require.Equal(t, "6.00000000", m.mysqlBalance(t, "finn").StringFixed(8), "charged once each")
}

// A ledger row written before refs existed (or by a worker of an older
// build) has none. A pending record that has one was drawn by a charge
// made after refs existed: never the row's own. With the markers gone, a
// retry of such an id is a second charge and is refunded — not cleared
// and counted, which kept the money and left Redis counting one entry more
// than MySQL, so balance-sync refused to touch the user again.
func TestSecondChargeOfARowWithoutARefIsRefunded(t *testing.T) {
	t.Parallel()
	m := newMoney(t)
	ctx := context.Background()
	_, err := store.NewAccounts(m.db).Create(ctx, "ida", "", dec("10"))
	require.NoError(t, err)
	_, first := m.charge(t, "ida", "r1", 3)
	first.PendingRef, first.RequestHash = "", "" // as an API of an older build published it
	require.NoError(t, m.consumer.Handle(ctx, first))
	require.Equal(t, "7.00000000", m.hot(t, "ida"))

	m.forget(t, "ida", "r1")
	_, second := m.charge(t, "ida", "r1", 3)
	require.Equal(t, "4.00000000", m.hot(t, "ida"))
	require.NoError(t, m.consumer.Handle(ctx, second))
	require.Equal(t, "7.00000000", m.hot(t, "ida"), "refunded")
	res := m.run(t)
	require.Zero(t, res.Errors)
	require.Zero(t, res.DriftFound)
}

// A deduction's row committed while Redis had no balance is in the
// initialisation that reads MySQL next. A charge of the same id made after
// that (its marker lost again) is a second charge, even though the row was
// never settled: when the row's message lands, it is refunded, not taken
// for the row's own pending record (which charged twice and counted the
// row twice in Redis).
func TestSecondChargeAfterAnInitThatReadTheRowIsRefunded(t *testing.T) {
	t.Parallel()
	m := newMoney(t)
	ctx := context.Background()
	_, err := store.NewAccounts(m.db).Create(ctx, "jo", "", dec("30"))
	require.NoError(t, err)
	_, first := m.charge(t, "jo", "r1", 5)
	storetest.Wipe(t, m.r) // Redis lost the balance and the pending record
	amount, _ := first.Amount()
	_, err = store.NewLedger(m.db).ApplyDebits(ctx, []store.Debit{{Username: "jo", ID: "r1", Amount: amount, Source: "consumer",
		Ref: first.PendingRef, RequestHash: first.RequestHash}}) // a worker committed it, then died before settling
	require.NoError(t, err)
	require.Equal(t, "25.00000000", m.hot(t, "jo"), "initialised from MySQL, r1 included")

	m.forget(t, "jo", "r1")
	c, _ := m.charge(t, "jo", "r1", 5)
	require.False(t, c.Replayed)
	require.Equal(t, "20.00000000", m.hot(t, "jo"), "charged again")
	require.NoError(t, m.consumer.Handle(ctx, first), "r1's message, redelivered")
	require.Equal(t, "25.00000000", m.hot(t, "jo"), "the second charge refunded")
	require.Equal(t, "25.00000000", m.mysqlBalance(t, "jo").StringFixed(8))
	res := m.run(t)
	require.Zero(t, res.Errors, "Redis counts what MySQL counts")
	require.Zero(t, res.DriftFound)
}
