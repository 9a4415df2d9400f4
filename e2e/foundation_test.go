package e2e_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/eisland/isle/store/storetest"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// Each binary starts against migrated services, logs one structured start
// line, and exits 0 soon after SIGTERM.
func TestBinariesStartAndStopCleanly(t *testing.T) {
	t.Parallel()
	e := newFleetEnv(t, storetest.MySQLDSN(t))
	out, code := islectl(t, e, "migrate")
	require.Zero(t, code, out)

	for _, tc := range []struct{ bin, line string }{
		{"api", "api started"},
		{"worker", "worker started"},
		{"relay", "relay started"},
		{"reconcile", "reconcile started"},
	} {
		t.Run(tc.bin, func(t *testing.T) {
			p := start(t, e, tc.bin)
			line := p.waitFor(t, 30*time.Second, tc.line)
			var fields map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &fields), "structured: %s", line)
			require.Equal(t, tc.bin, fields["bin"])
			require.Equal(t, "INFO", fields["level"])
			took, err := p.stop(t, 15*time.Second)
			require.NoError(t, err)
			require.Less(t, took, 10*time.Second)
		})
	}
}

// A binary that finds the schema older than it needs refuses to start and
// says how to migrate.
func TestOutdatedSchemaRefused(t *testing.T) {
	t.Parallel()
	e := newFleetEnv(t, storetest.MySQLDSN(t)) // empty database
	p := start(t, e, "worker")
	select {
	case err := <-p.done:
		require.Error(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("worker started on an unmigrated database")
	}
	require.Contains(t, p.output(), "run `islectl migrate`")
}

func TestBadConfigurationReportsEveryVariable(t *testing.T) {
	t.Parallel()
	e := newFleetEnv(t, storetest.MySQLDSN(t))
	e["REDIS_PORT"] = "seventy"
	e["PAYMENT_NOTIFY_MAX_RETRIES"] = "lots"
	p := start(t, e, "api")
	require.Error(t, <-p.done)
	out := p.output()
	require.Contains(t, out, `REDIS_PORT="seventy"`)
	require.Contains(t, out, `PAYMENT_NOTIFY_MAX_RETRIES="lots"`)
}

func TestIslectlMigrateAndTopology(t *testing.T) {
	t.Parallel()
	e := newFleetEnv(t, storetest.MySQLDSN(t))
	out, code := islectl(t, e, "migrate")
	require.Zero(t, code, out)
	require.Contains(t, out, "schema migrated to version")
	out, code = islectl(t, e, "migrate")
	require.Zero(t, code, out)
	require.Contains(t, out, "nothing to do")

	out, code = islectl(t, e, "topology", "verify")
	require.Equal(t, 1, code, "nothing declared yet: %s", out)
	out, code = islectl(t, e, "topology", "apply")
	require.Zero(t, code, out)
	out, code = islectl(t, e, "topology", "verify")
	require.Zero(t, code, out)
	require.Contains(t, out, "matches the broker: 6 exchanges, 22 queues")

	// A deleted queue, and a queue re-declared with another TTL, are named.
	conn, err := amqp.Dial(storetest.AMQPURL())
	require.NoError(t, err)
	defer conn.Close()
	ch, err := conn.Channel()
	require.NoError(t, err)
	prefix := e["RABBITMQ_NAME_PREFIX"]
	_, err = ch.QueueDelete(prefix+".payment.receipt.dlq", false, false, false)
	require.NoError(t, err)
	retry := prefix + ".email.verify.retry.queue"
	_, err = ch.QueueDelete(retry, false, false, false)
	require.NoError(t, err)
	_, err = ch.QueueDeclare(retry, true, false, false, false, amqp.Table{"x-message-ttl": int32(1),
		"x-dead-letter-exchange": prefix + ".email.verify.exchange", "x-dead-letter-routing-key": prefix + ".email.verify.dispatch"})
	require.NoError(t, err)
	for _, args := range [][]string{{"topology", "verify"}, {"topology", "verify", "-amqp-only"}} {
		out, code = islectl(t, e, args...)
		require.Equal(t, 1, code, out)
		require.Contains(t, out, "missing   queue    "+prefix+".payment.receipt.dlq")
		require.Contains(t, out, "different queue    "+retry)
	}

	out, code = islectl(t, e, "topology", "show")
	require.Zero(t, code, out)
	require.Contains(t, out, e["RABBITMQ_NAME_PREFIX"]+".object.replication.process.queue")
	require.Contains(t, out, "x-max-priority=10")

	_, code = islectl(t, e, "topology", "frobnicate")
	require.Equal(t, 2, code)
	_, code = islectl(t, e)
	require.Equal(t, 2, code)
}
