package reconcile_test

import (
	"context"
	"testing"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// A Redis that comes back from an older snapshot (an RDB file, an AOF a
// second behind, a lagging replica) is behind MySQL: it misses a settled
// deduction and a paid recharge. balance-sync rebuilds it from MySQL and
// never corrects MySQL toward it — also when new charges landed on the old
// state before balance-sync ran (doc/money.md, "Redis behind MySQL").
func TestRedisBackFromASnapshotIsRebuiltNotCopied(t *testing.T) {
	t.Parallel()
	for _, traffic := range []bool{false, true} {
		name := "quiet"
		if traffic {
			name = "with-new-charges"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := newMoney(t)
			ctx := context.Background()
			_, err := store.NewAccounts(m.db).Create(ctx, "gus", "", dec("10"))
			require.NoError(t, err)
			require.Equal(t, "10.00000000", m.hot(t, "gus"))
			snap := storetest.TakeSnapshot(t, m.r)

			_, msg := m.charge(t, "gus", "r1", 3)
			require.NoError(t, m.consumer.Handle(ctx, msg))
			_, err = store.NewBalances(m.db, m.r).Credit(ctx, store.Credit{Username: "gus", ID: "order-1", Amount: dec("5")})
			require.NoError(t, err)
			require.Equal(t, "12.00000000", m.hot(t, "gus"))
			require.Equal(t, "12.00000000", m.mysqlBalance(t, "gus").StringFixed(8))

			snap.Restore(t)
			require.Equal(t, "10.00000000", m.hot(t, "gus"), "Redis went back")
			want := "12.00000000"
			if traffic {
				_, msg := m.charge(t, "gus", "r2", 1) // on the old balance: 9
				require.NoError(t, m.consumer.Handle(ctx, msg))
				want = "11.00000000"
			}

			res := m.run(t)
			require.Zero(t, res.Adjustments, "MySQL is never corrected toward an older Redis")
			require.Equal(t, 1, res.Count("rebuilt"))
			require.Equal(t, want, m.mysqlBalance(t, "gus").StringFixed(8))
			require.Equal(t, want, m.hot(t, "gus"), "Redis rebuilt from MySQL")
			require.Equal(t, want, m.ledgerSum(t, "gus", "").StringFixed(8))

			res = m.run(t)
			require.Zero(t, res.Adjustments)
			require.Zero(t, res.Count("rebuilt"), "in agreement now")
		})
	}
}
