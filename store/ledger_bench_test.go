package store_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// BenchmarkApplyDebits is one ledger transaction of n deductions of n
// users, as the group-committing writer makes them; its allocations are
// what the worker's garbage collector pays per batch.
func BenchmarkApplyDebits(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			db := storetest.MySQL(b)
			ctx := context.Background()
			users := make([]string, n)
			for i := range users {
				users[i] = fmt.Sprintf("u%d", i)
				_, err := store.NewAccounts(db).Create(ctx, users[i], "", dec("1000000"))
				require.NoError(b, err)
			}
			l := store.NewLedger(db)
			debits := make([]store.Debit, n)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				for k := range debits {
					debits[k] = store.Debit{Username: users[k], ID: fmt.Sprintf("d%d-%d", i, k), Amount: dec("0.01"), ModelName: "m",
						InputTokens: 10, OutputTokens: 20, Source: "consumer", Ref: "r", RequestHash: "h"}
				}
				_, err := l.ApplyDebits(ctx, debits)
				require.NoError(b, err)
			}
		})
	}
}
