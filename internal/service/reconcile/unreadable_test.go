package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/stretchr/testify/require"
)

// One user whose Redis data cannot be read is reported and skipped; every
// other user is still settled, applied and compared. Before, the bad entry
// (the oldest, so at the head of every batch) failed the whole pipeline and
// nobody after it was ever settled.
func TestOneUnreadableUserDoesNotStallBalanceSync(t *testing.T) {
	t.Parallel()
	m := newMoney(t)
	ctx := context.Background()
	rc := m.r.Client(keys.DBAgentBilling)
	for _, u := range []string{"bad", "good", "oddpending", "ok"} {
		_, err := store.NewAccounts(m.db).Create(ctx, u, "", dec("10"))
		require.NoError(t, err)
		_, err = m.svc.Balance(ctx, u)
		require.NoError(t, err)
	}
	// bad: a ledger entry written first (the oldest unsettled one), whose
	// settling finds a balance no script can read.
	_, err := store.NewLedger(m.db).ApplyDebits(ctx, []store.Debit{{Username: "bad", ID: "b1", Amount: dec("1"), OccurredAt: time.Now()}})
	require.NoError(t, err)
	require.NoError(t, rc.Set(ctx, m.r.Keys().AgentBalance("bad"), "ten fen", 0).Err())
	// good: an entry written after it, left unsettled by a crash.
	_, err = store.NewLedger(m.db).ApplyDebits(ctx, []store.Debit{{Username: "good", ID: "g1", Amount: dec("2"), OccurredAt: time.Now()}})
	require.NoError(t, err)
	// oddpending: a pending entry nobody wrote; ok: a pending deduction whose message was lost.
	require.NoError(t, rc.HSet(ctx, m.r.Keys().AgentPending("oddpending"), "x1", "not|a|record|at|all").Err())
	_, err = m.svc.Charge(ctx, billing.Request{ID: "o1", Username: "ok", Model: "m", Tokens: billing.Tokens{Input: 3}})
	require.NoError(t, err)

	res, err := m.sync.RunOnce(ctx)
	require.NoError(t, err, "one user's bad data is not the run's failure")
	r := res.(interface{ Count(string) int })
	require.Equal(t, 1, r.Count("settled"), "good's entry is settled")
	require.Equal(t, 1, r.Count("pending_applied"), "ok's pending deduction is applied")
	require.Equal(t, 3, r.Count("unreadable"), "bad (settle and compare) and oddpending are reported")
	require.Equal(t, "8.00000000", m.mysqlBalance(t, "good").StringFixed(8))
	bal, err := store.NewBalances(nil, m.r).Balance(ctx, "good")
	require.NoError(t, err)
	require.Equal(t, "8.00000000", bal.StringFixed(8), "good's Redis side is done")
	require.Equal(t, "7.00000000", m.mysqlBalance(t, "ok").StringFixed(8))
	var unsettled int64
	require.NoError(t, m.db.Raw("SELECT COUNT(*) FROM agent_ledger WHERE settled_at IS NULL").Scan(&unsettled).Error)
	require.EqualValues(t, 1, unsettled, "only bad's entry waits")
}

// A Redis balance with more than 8 decimals (written by hand, or by a
// producer that formats more) is compared rounded to 8 places: no ADJUST
// row of 0.00000000 on every run.
func TestCompareRoundsRedisToEightPlaces(t *testing.T) {
	t.Parallel()
	m := newMoney(t)
	ctx := context.Background()
	_, err := store.NewAccounts(m.db).Create(ctx, "fine", "", dec("10"))
	require.NoError(t, err)
	_, err = m.svc.Balance(ctx, "fine")
	require.NoError(t, err)
	require.NoError(t, m.r.Client(keys.DBAgentBilling).Set(ctx, m.r.Keys().AgentBalance("fine"), "10.000000001", 0).Err())
	for range 2 {
		res := m.run(t)
		require.Zero(t, res.DriftFound)
		require.Zero(t, res.Adjustments)
	}
	var rows int64
	require.NoError(t, m.db.Raw("SELECT COUNT(*) FROM agent_ledger WHERE kind = 'ADJUST'").Scan(&rows).Error)
	require.Zero(t, rows)
}

// One user whose rebuild fails (here its initialisation meets a key of the
// wrong type) is counted as an error; the others are still rebuilt.
func TestOneFailedRebuildDoesNotStopTheOthers(t *testing.T) {
	t.Parallel()
	m := newMoney(t)
	ctx := context.Background()
	rc := m.r.Client(keys.DBAgentBilling)
	for _, u := range []string{"broken", "fine"} {
		_, err := store.NewAccounts(m.db).Create(ctx, u, "", dec("10"))
		require.NoError(t, err)
		// A balance a Spring producer initialised: no entry count, so it is rebuilt.
		require.NoError(t, rc.Set(ctx, m.r.Keys().AgentBalance(u), "10.00000000", 0).Err())
	}
	require.NoError(t, rc.Set(ctx, m.r.Keys().AgentBalanceLate("broken"), "not a hash", 0).Err())

	res, err := m.sync.RunOnce(ctx)
	require.NoError(t, err)
	r := res.(interface{ Count(string) int })
	require.Equal(t, 1, r.Count("errors"), "broken")
	require.Equal(t, 1, r.Count("rebuilt"), "fine")
	h, err := store.NewBalances(nil, m.r).Hot(ctx, []string{"fine"})
	require.NoError(t, err)
	require.True(t, h["fine"].EntriesKnown, "fine was rebuilt")
}
