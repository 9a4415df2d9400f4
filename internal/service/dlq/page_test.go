package dlq_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eisland/isle/internal/service/dlq"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// Pages walk the dead messages of every domain once, newest first, also
// when several domains' messages died at the same instant (the payment
// domains share one table and one id sequence).
func TestPageWalksEveryDomainOnceNewestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := storetest.MySQL(t)
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	dead := dlq.NewStore(db, tp)
	base := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	want := 0
	for i, name := range dead.Domains() {
		d, _ := tp.Domain(name)
		for j := range 7 {
			msg := fmt.Sprintf("%s-%d", name, j)
			errText := "retries exhausted"
			if j == 0 {
				errText = "permanent: bad payload " + name
			}
			_, err := store.NewDeadLetters(db).Save(ctx, d.DLQTable, &store.DeadLetter{
				DedupKey: store.DeadLetterKey(d.DLQ, msg, 0, nil), Queue: d.DLQ, MessageID: msg, Body: []byte("{}"),
				Headers: "{}", LastError: &errText, DeadAt: base.Add(time.Duration((i+j)%4) * time.Second),
			})
			require.NoError(t, err)
			want++
		}
	}

	var seen []dlq.Entry
	q := dlq.Query{Limit: 5, State: dlq.StateAll}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100)
		p, err := dead.Page(ctx, q)
		require.NoError(t, err)
		seen = append(seen, p.Entries...)
		if p.Next.IsZero() {
			break
		}
		c, err := dlq.ParseCursor(p.Next.String())
		require.NoError(t, err)
		require.Equal(t, p.Next, c, "a cursor survives its URL form")
		q.Before = c
	}
	require.Len(t, seen, want)
	refs := map[dlq.Ref]bool{}
	for i, e := range seen {
		require.False(t, refs[e.Ref], "%s twice", e.Ref)
		refs[e.Ref] = true
		if i > 0 {
			require.False(t, e.DeadAt.After(seen[i-1].DeadAt), "newest first")
		}
	}

	p, err := dead.Page(ctx, dlq.Query{Reason: "bad payload", Domains: []string{topology.DomainEmail}})
	require.NoError(t, err)
	require.Len(t, p.Entries, 1)
	require.Equal(t, topology.DomainEmail, p.Entries[0].Ref.Domain)

	e, err := dead.Get(ctx, p.Entries[0].Ref)
	require.NoError(t, err)
	waiting, err := dead.Waiting(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 7, waiting[topology.DomainPaymentReceipt], "the shared table is counted by queue")
	require.NoError(t, db.Exec("UPDATE "+tableOf(t, tp, e.Ref.Domain)+" SET replayed_at = NOW(6), replay_count = 1 WHERE id = ?", e.Ref.ID).Error)
	waiting, err = dead.Waiting(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 6, waiting[topology.DomainEmail])
	p, err = dead.Page(ctx, dlq.Query{State: dlq.StateReplayed})
	require.NoError(t, err)
	require.Len(t, p.Entries, 1)

	hist, err := dead.History(ctx, e)
	require.NoError(t, err)
	require.Len(t, hist, 1)
	require.Equal(t, e.Ref, hist[0].Ref)

	for _, bad := range []string{"x", "1.email", "0.email.1", "1..1", "a.email.1"} {
		_, err := dlq.ParseCursor(bad)
		require.Error(t, err, bad)
	}
}

func tableOf(t *testing.T, tp *topology.Topology, domain string) string {
	t.Helper()
	d, ok := tp.Domain(domain)
	require.True(t, ok)
	return d.DLQTable
}
