package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// Paging by dead_at walks every matching row once, newest first, however
// many died at the same instant; the filters select by state, message id
// and error text, and Count agrees with them.
func TestDeadLettersPageByDeadAt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dead := store.NewDeadLetters(storetest.MySQL(t))
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for i := range 25 {
		errText := fmt.Sprintf("ledger down %d", i)
		if i%5 == 0 {
			errText = "permanent: 100%_sure"
		}
		dl := &store.DeadLetter{
			DedupKey: store.DeadLetterKey("q.dlq", fmt.Sprint("m-", i%10), i, nil), Queue: "q.dlq",
			MessageID: fmt.Sprint("m-", i%10), Body: []byte("{}"), Headers: "{}", LastError: &errText,
			DeadAt: base.Add(time.Duration(i/3) * time.Second), // three rows per instant
		}
		saved, err := dead.Save(ctx, dlqTable, dl)
		require.NoError(t, err)
		require.True(t, saved)
	}
	markReplayed(t, ctx, dead, 3, 4)

	var got []uint64
	f := store.DeadLetterFilter{ByDeadAt: true, Limit: 4, SizesOnly: true}
	for {
		rows, err := dead.List(ctx, dlqTable, f)
		require.NoError(t, err)
		for _, r := range rows {
			if len(got) > 0 {
				require.Less(t, r.ID, got[len(got)-1], "newest first, by dead_at then id")
			}
			got = append(got, r.ID)
		}
		if len(rows) < f.Limit {
			break
		}
		last := rows[len(rows)-1]
		f.Before = store.DeadLetterCursor{At: last.DeadAt, ID: last.ID}
	}
	require.Len(t, got, 25, "each row once")

	count := func(f store.DeadLetterFilter) int64 {
		n, err := dead.Count(ctx, dlqTable, f)
		require.NoError(t, err)
		rows, err := dead.List(ctx, dlqTable, f)
		require.NoError(t, err)
		require.Len(t, rows, int(n))
		return n
	}
	require.EqualValues(t, 25, count(store.DeadLetterFilter{}))
	require.EqualValues(t, 5, count(store.DeadLetterFilter{ErrorContains: "100%_sure"}), "% and _ match themselves")
	require.EqualValues(t, 0, count(store.DeadLetterFilter{ErrorContains: "100%x"}))
	require.EqualValues(t, 3, count(store.DeadLetterFilter{MessageID: "m-1"}))
	require.EqualValues(t, 2, count(store.DeadLetterFilter{Replayed: true}))
	require.EqualValues(t, 23, count(store.DeadLetterFilter{NotReplayed: true}))
	require.EqualValues(t, 7, count(store.DeadLetterFilter{Since: base.Add(6 * time.Second)}), "rows 18..24")
}

// markReplayed marks rows of dlqTable replayed.
func markReplayed(t *testing.T, ctx context.Context, dead *store.DeadLetters, ids ...uint64) {
	t.Helper()
	for _, id := range ids {
		ok, err := dead.ClaimReplay(ctx, dlqTable, id, false)
		require.NoError(t, err)
		require.True(t, ok)
	}
}
