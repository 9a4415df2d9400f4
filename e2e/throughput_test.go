package e2e_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// TestDeductConsumerThroughput is a measurement, not a check: it prints how
// fast the same deduction messages are drained by a bare AMQP consumer that
// only acks (raw RabbitMQ), and by the worker with one handler (one MySQL
// transaction per message) and more, whose deductions share transactions.
// Run it with ISLE_MEASURE=1 (and -v); machines are noisy, so compare the
// figures of one run, not figures across runs.
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
	publish := func(round string) {
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
	}
	raw := func() float64 {
		publish("raw")
		ch, err := f.conn.Channel()
		require.NoError(t, err)
		defer ch.Close()
		require.NoError(t, ch.Qos(200, 0, false))
		began := time.Now()
		deliveries, err := ch.Consume(d.Queue, "", false, false, false, false, nil)
		require.NoError(t, err)
		for range n {
			m := <-deliveries
			require.NoError(t, m.Ack(false))
		}
		return n / time.Since(began).Seconds()
	}
	rate := func(concurrency int, round string) float64 {
		publish(round)
		f.env["WORKER_CONCURRENCY_BY_DOMAIN"] = fmt.Sprintf("agent-billing=%d", concurrency)
		f.env["WORKER_PREFETCH"] = "200"
		w := start(t, f.env, "worker", "-handlers", "agent-billing")
		var line struct{ Ops string }
		require.NoError(t, json.Unmarshal([]byte(w.waitFor(t, 30*time.Second, "worker started")), &line))
		// Progress is read from the worker's counter of acked messages (a
		// query of the ledger would load MySQL); the clock starts at the
		// first one, so the worker's start-up is not counted.
		acked := regexp.MustCompile(`isle_messages_total\{domain="agent-billing",outcome="ok"\} (\d+)`)
		var began time.Time
		var done, first int
		require.Eventually(t, func() bool {
			resp, err := http.Get("http://" + line.Ops + "/metrics")
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if m := acked.FindSubmatch(body); m != nil {
				done, _ = strconv.Atoi(string(m[1]))
			}
			if began.IsZero() && done > 0 {
				began, first = time.Now(), done
			}
			return done == n
		}, 10*time.Minute, 20*time.Millisecond)
		took := time.Since(began)
		err, _ := w.stop(t, time.Minute)
		require.NoError(t, err)
		var rows int64
		require.NoError(t, f.db.Raw("SELECT COUNT(*) FROM agent_ledger WHERE kind = 'DEDUCT' AND entry_id LIKE ?", round+"-%").Scan(&rows).Error)
		require.EqualValues(t, n, rows, "every deduction of the round is in the ledger")
		return float64(n-first) / took.Seconds()
	}
	base := raw()
	lines := []string{fmt.Sprintf("bare AMQP consumer (ack only): %.0f messages/s", base)}
	var one float64
	for _, c := range []int{1, 16, 32, 64, 128} {
		r := rate(c, fmt.Sprintf("c%d", c))
		if c == 1 {
			one = r
		}
		lines = append(lines, fmt.Sprintf("worker, %3d handlers: %5.0f deductions/s = %.2fx the bare consumer, %.2fx one handler", c, r, r/base, r/one))
	}
	t.Log("\n" + strings.Join(lines, "\n"))
}
