package reconcile_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// outbox-purge deletes the rows published before the retention, in batches,
// and keeps rows published since and rows not published however old.
func TestOutboxPurgeDeletesOnlyExpiredPublishedRows(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	insert := func(table string, created time.Time, published *time.Time) uint64 {
		var row any
		switch table {
		case "outbox":
			m := &store.OutboxMessage{MessageID: uuid.NewString(), Domain: "payment-receipt", Payload: []byte("{}"), Headers: "{}", CreatedAt: created}
			m.AvailableAt, m.PublishedAt = created, published
			row = m
		case "object_outbox":
			m := &store.ObjectOutbox{ObjectID: 1, EventType: "REPLICATE", CreatedAt: created}
			m.AvailableAt, m.PublishedAt = created, published
			row = m
		}
		require.NoError(t, db.Create(row).Error)
		var id uint64
		require.NoError(t, db.Raw("SELECT MAX(id) FROM "+table).Scan(&id).Error)
		return id
	}
	ago := func(d time.Duration) *time.Time { at := time.Now().UTC().Add(-d); return &at }
	retention := 7 * 24 * time.Hour
	kept := map[string][]uint64{}
	for _, table := range store.OutboxTables {
		for range 5 {
			insert(table, *ago(9 * 24 * time.Hour), ago(8*24*time.Hour)) // expired
		}
		kept[table] = []uint64{
			insert(table, *ago(8 * 24 * time.Hour), ago(retention-time.Hour)), // published within the retention
			insert(table, *ago(30 * 24 * time.Hour), nil),                     // never published
			insert(table, *ago(time.Minute), nil),
		}
	}

	job := reconcile.NewOutboxPurge(db, reconcile.OutboxPurgeConfig{Retention: retention, Batch: 2}, nil, discard)
	require.Equal(t, "outbox-purge", job.Name())
	res, err := job.RunOnce(ctx)
	require.NoError(t, err)
	purge := res.(reconcile.PurgeResult)
	for _, table := range store.OutboxTables {
		require.EqualValues(t, 5, purge.Deleted[table], table)
		var left []uint64
		require.NoError(t, db.Raw("SELECT id FROM "+table+" ORDER BY id").Scan(&left).Error)
		require.Equal(t, kept[table], left, table)
	}
	require.Contains(t, res.String(), "outbox 5, object_outbox 5")

	res, err = job.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, res.(reconcile.PurgeResult).Deleted["outbox"])
}
