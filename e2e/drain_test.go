package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// drain waits until every queue of the topology has been empty, and every
// outbox row published, for 3 s: a message still in the outbox (a relay
// killed with a claimed batch, a publish backing off) is not yet where the
// checks look.
func drain(t *testing.T, conn *amqp.Connection, tp *topology.Topology, db *gorm.DB, timeout time.Duration) {
	t.Helper()
	var queues []string
	for _, d := range tp.Domains() {
		queues = append(queues, d.Queue)
		if d.HasRetry() {
			queues = append(queues, d.RetryQueue, d.DLQ)
		}
	}
	deadline := time.Now().Add(timeout)
	quiet, busy := time.Time{}, ""
	for time.Now().Before(deadline) {
		busy = ""
		for _, q := range queues {
			if n := storetest.QueueDepth(t, conn, q); n > 0 {
				busy = fmt.Sprintf("%s holds %d", q, n)
			}
		}
		for _, table := range store.OutboxTables {
			var n int
			require.NoError(t, db.Raw("SELECT COUNT(*) FROM "+table+" WHERE published_at IS NULL AND parked_at IS NULL").Scan(&n).Error)
			if n > 0 {
				busy = fmt.Sprintf("%s holds %d rows to publish", table, n)
			}
		}
		switch {
		case busy != "":
			quiet = time.Time{}
		case quiet.IsZero():
			quiet = time.Now()
		case time.Since(quiet) > 3*time.Second:
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("queues and outbox not drained within %s: %s", timeout, busy)
}
