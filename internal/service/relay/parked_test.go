package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/internal/service/relay"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
)

// Rows that no retry can publish as they are — a domain the topology does
// not have, headers that are not a JSON object, an object that is gone —
// are parked: kept with their error, out of the claim, counted, and left
// out of the backlog's age. Once mended, a replay publishes them; a broker
// failure is never parked (TestFailedPublishLeavesRowPending).
func TestRowsThatCanNeverPublishAreParked(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	c := b.consume(t, b.domain(t, topology.DomainPaymentReceipt).Queue)
	good := b.insertOutbox(t, 1)
	require.NoError(t, b.db.Exec(`INSERT INTO outbox (message_id, domain, payload, headers) VALUES
		('bad-domain', 'no-such-domain', '{}', '{}'), ('bad-headers', 'payment-receipt', '{}', 'not json')`).Error)
	gone := store.ObjectOutbox{ObjectID: 999999, EventType: "REPLICATE"}
	gone.AvailableAt = time.Now().UTC().Add(-time.Second)
	require.NoError(t, b.db.Create(&gone).Error)

	reg := prometheus.NewRegistry()
	r, err := relay.New(b.db, b.tp, b.pub, relay.Config{Interval: 20 * time.Millisecond}, relay.NewMetrics(reg), b.log)
	require.NoError(t, err)
	res, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, relay.TableResult{Claimed: 3, Published: 1, Parked: 2}, res["outbox"])
	require.Equal(t, relay.TableResult{Claimed: 1, Parked: 1}, res["object_outbox"])
	require.Equal(t, 2, b.count(t, `SELECT COUNT(*) FROM outbox WHERE message_id IN ('bad-domain', 'bad-headers')
		AND published_at IS NULL AND parked_at IS NOT NULL AND claimed_by IS NULL AND attempts = 1 AND last_error <> ''`))
	require.Equal(t, 1, b.count(t, "SELECT COUNT(*) FROM object_outbox WHERE parked_at IS NOT NULL AND last_error LIKE '%does not exist%'"))
	require.Equal(t, 2.0, metric(t, reg, "isle_outbox_parked_total", "outbox"))

	res, err = r.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, res["outbox"].Claimed+res["object_outbox"].Claimed, "parked rows are out of the claim")

	// While it runs, the gauges say what waits: parked rows, and no backlog.
	stop := run(t, r)
	require.Eventually(t, func() bool {
		return metric(t, reg, "isle_outbox_parked_rows", "outbox") == 2 &&
			metric(t, reg, "isle_outbox_parked_rows", "object_outbox") == 1
	}, time.Minute, poll)
	require.Zero(t, metric(t, reg, "isle_outbox_oldest_pending_seconds", "outbox"))
	stop()

	rows, counts, err := store.ParkedOutbox(ctx, b.db, 10)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"outbox": 2, "object_outbox": 1}, counts)
	require.Len(t, rows, 3)
	require.Equal(t, "payment-receipt bad-headers", rows[1].What)
	require.Contains(t, rows[1].LastError, "headers")
	require.Equal(t, "object 999999", rows[2].What)

	// Mended, then replayed: published. Replayed twice: unparked once.
	require.NoError(t, b.db.Exec("UPDATE outbox SET headers = '{}' WHERE message_id = 'bad-headers'").Error)
	var id uint64
	require.NoError(t, b.db.Raw("SELECT id FROM outbox WHERE message_id = 'bad-headers'").Scan(&id).Error)
	n, err := store.UnparkOutbox(ctx, b.db, "outbox", []uint64{id})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	n, err = store.UnparkOutbox(ctx, b.db, "outbox", []uint64{id})
	require.NoError(t, err)
	require.Zero(t, n)
	res, err = r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, relay.TableResult{Claimed: 1, Published: 1}, res["outbox"])
	require.Eventually(t, func() bool { d, _ := c.counts(); return d == 2 }, time.Minute, poll)
	require.Equal(t, 1, c.times(good[0]))
	require.Equal(t, 1, c.times("bad-headers"))

	// Replayed unmended: parked again, with its attempts counted afresh.
	n, err = store.UnparkOutbox(ctx, b.db, "outbox", nil)
	require.NoError(t, err)
	require.Equal(t, 1, n, "every parked row of the table")
	res, err = r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, relay.TableResult{Claimed: 1, Parked: 1}, res["outbox"])
	require.Equal(t, 1, b.count(t, "SELECT COUNT(*) FROM outbox WHERE message_id = 'bad-domain' AND parked_at IS NOT NULL AND attempts = 1"))

	_, err = store.UnparkOutbox(ctx, b.db, "users", nil)
	require.ErrorContains(t, err, "not an outbox table")
}

// metric is the value of the named counter or gauge with the table label
// in reg; -1 when there is none.
func metric(t *testing.T, reg *prometheus.Registry, name, table string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "table" && l.GetValue() == table {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
