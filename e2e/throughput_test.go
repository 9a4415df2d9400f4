package e2e_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// TestDeductConsumerThroughput is a measurement, not a check: it prints how
// fast the worker drains deduction messages with one handler (one MySQL
// transaction per message) and with 32 handlers whose deductions share
// transactions. Run it with ISLE_MEASURE=1; machines are noisy, so compare
// the two figures of one run, not figures across runs.
func TestDeductConsumerThroughput(t *testing.T) {
	if os.Getenv("ISLE_MEASURE") == "" {
		t.Skip("a measurement: set ISLE_MEASURE=1 to run it")
	}
	users := map[string]string{}
	for i := range 200 {
		users[fmt.Sprintf("m%03d", i)] = "1000000"
	}
	f := newBillingFleet(t, users)
	d, _ := f.tp.Domain(topology.DomainAgentBilling)
	const n = 10000
	rate := func(concurrency int, round string) float64 {
		ch, err := f.conn.Channel()
		require.NoError(t, err)
		require.NoError(t, ch.Confirm(false))
		confirms := ch.NotifyPublish(make(chan amqp.Confirmation, n))
		for i := range n {
			body := fmt.Sprintf(`{"deductionId":"%s-%d","username":"m%03d","amountFen":"0.01000000","modelName":"gpt-test","inputTokens":1,"outputTokens":1}`, round, i, i%200)
			require.NoError(t, ch.Publish(d.Exchange, d.RoutingKey, false, false, amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, Body: []byte(body)}))
		}
		for range n {
			require.True(t, (<-confirms).Ack)
		}
		ch.Close()
		f.env["WORKER_CONCURRENCY_BY_DOMAIN"] = fmt.Sprintf("agent-billing=%d", concurrency)
		f.env["WORKER_PREFETCH"] = "200"
		began := time.Now()
		w := start(t, f.env, "worker", "-handlers", "agent-billing")
		var count int64
		require.Eventually(t, func() bool {
			require.NoError(t, f.db.Raw("SELECT COUNT(*) FROM agent_ledger WHERE kind = 'DEDUCT' AND entry_id LIKE ?", round+"-%").Scan(&count).Error)
			return count == n
		}, 10*time.Minute, 50*time.Millisecond)
		took := time.Since(began)
		err, _ = w.stop(t, time.Minute)
		require.NoError(t, err)
		return n / took.Seconds()
	}
	one := rate(1, "one")
	many := rate(32, "many")
	t.Logf("deductions applied per second: 1 handler %.0f, 32 handlers (group commit) %.0f, ratio %.2f", one, many, many/one)
}
