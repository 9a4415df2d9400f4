package e2e_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// deadFleet is a migrated fleet environment with the email domain's DLQ
// consumer as the handler under test: it writes each message to MySQL, so a
// table lock held by the test keeps it mid-message for as long as needed.
type deadFleet struct {
	env   fleetEnv
	dsn   string
	db    *sql.DB
	conn  *amqp.Connection
	email topology.Domain
}

func newDeadFleet(t *testing.T) *deadFleet {
	t.Helper()
	dsn := storetest.MySQLDSN(t)
	e := newFleetEnv(t, dsn)
	out, code := islectl(t, e, "migrate")
	require.Zero(t, code, out)
	out, code = islectl(t, e, "topology", "apply")
	require.Zero(t, code, out)
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	conn, err := amqp.Dial(storetest.AMQPURL())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	tp, err := topology.New(topology.Config{Prefix: e["RABBITMQ_NAME_PREFIX"]})
	require.NoError(t, err)
	email, _ := tp.Domain(topology.DomainEmail)
	return &deadFleet{env: e, dsn: dsn, db: db, conn: conn, email: email}
}

// publishDead puts n messages on the email DLQ, as the retry flow would.
func (f *deadFleet) publishDead(t *testing.T, n int) {
	t.Helper()
	ch, err := f.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, n))
	for i := range n {
		require.NoError(t, ch.Publish(f.email.Exchange, f.email.DLQKey, false, false, amqp.Publishing{
			ContentType: "application/json", DeliveryMode: amqp.Persistent, MessageId: fmt.Sprintf("dead-%d", i),
			Headers: amqp.Table{f.email.RetryHeader: int32(3), "x-last-error": "smtp down"},
			Body:    []byte(fmt.Sprintf(`{"email":"u%d@example.com","scene":"LOGIN","code":"123456","createdAtEpochSeconds":1764417662}`, i)),
		}))
	}
	for range n {
		require.True(t, (<-confirms).Ack)
	}
}

// lockTable holds a write lock on the DLQ table from a connection of the
// test's own, so the worker's insert waits; unlock releases it.
func (f *deadFleet) lockTable(t *testing.T) (unlock func()) {
	t.Helper()
	conn, err := f.db.Conn(context.Background())
	require.NoError(t, err)
	_, err = conn.ExecContext(context.Background(), "LOCK TABLES "+f.email.DLQTable+" WRITE")
	require.NoError(t, err)
	done := false
	unlock = func() {
		if !done {
			done = true
			_, _ = conn.ExecContext(context.Background(), "UNLOCK TABLES")
			conn.Close()
		}
	}
	t.Cleanup(unlock)
	return unlock
}

func (f *deadFleet) rows(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, f.db.QueryRow("SELECT COUNT(*) FROM "+f.email.DLQTable).Scan(&n))
	return n
}

func (f *deadFleet) depth(t *testing.T) int {
	t.Helper()
	return storetest.QueueDepth(t, f.conn, f.email.DLQ)
}

// waitInsertBlocked waits until MySQL shows the worker's insert waiting for the lock.
func (f *deadFleet) waitInsertBlocked(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		require.NoError(t, f.db.QueryRow(`SELECT COUNT(*) FROM information_schema.processlist
			WHERE id <> CONNECTION_ID() AND info LIKE 'INSERT%' AND info LIKE ? AND state LIKE 'Waiting for table%'`,
			"%"+f.email.DLQTable+"%").Scan(&n))
		if n > 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the worker's insert never waited on the lock")
}

// kill -9 while a handler is mid-message: after a restart, the message is
// processed, once.
func TestKilledWorkerLosesNothing(t *testing.T) {
	t.Parallel()
	f := newDeadFleet(t)
	unlock := f.lockTable(t)
	w := start(t, f.env, "worker", "-handlers", "email-dlq")
	w.waitFor(t, 30*time.Second, "worker started")
	f.publishDead(t, 1)
	f.waitInsertBlocked(t)

	require.NoError(t, w.cmd.Process.Kill())
	<-w.done //nolint:errcheck // killed: its exit error says only that
	// The delivery was never acked, so the broker requeues it. (The insert the
	// worker sent may still complete once the lock is gone: that is the crash
	// between the database write and the ack, which the dedup key absorbs.)
	require.Eventually(t, func() bool { return f.depth(t) == 1 }, 10*time.Second, 50*time.Millisecond,
		"the unacked delivery went back to its queue")
	unlock()

	w2 := start(t, f.env, "worker", "-handlers", "email-dlq")
	w2.waitFor(t, 30*time.Second, "worker started")
	require.Eventually(t, func() bool { return f.rows(t) == 1 && f.depth(t) == 0 }, 20*time.Second, 50*time.Millisecond,
		"not processed after restart")
	_, err := w2.stop(t, 20*time.Second)
	require.NoError(t, err)
	require.Equal(t, 1, f.rows(t))
}

// SIGTERM with messages in flight: the worker exits within its timeout; the
// message being handled is finished and the others stay queued.
func TestSIGTERMDrainsInFlightMessages(t *testing.T) {
	t.Parallel()
	f := newDeadFleet(t)
	f.env["WORKER_SHUTDOWN_TIMEOUT"] = "10s"
	unlock := f.lockTable(t)
	w := start(t, f.env, "worker", "-handlers", "email-dlq")
	w.waitFor(t, 30*time.Second, "worker started")
	f.publishDead(t, 5)
	f.waitInsertBlocked(t)

	go func() {
		time.Sleep(time.Second) // release the handler after shutdown began
		unlock()
	}()
	took, err := w.stop(t, 20*time.Second)
	require.NoError(t, err)
	require.Less(t, took, 10*time.Second)
	require.Contains(t, w.output(), "draining")
	stored := f.rows(t)
	require.GreaterOrEqual(t, stored, 1, "the message in flight was finished")
	require.Eventually(t, func() bool { return f.depth(t) == 5-stored }, 10*time.Second, 50*time.Millisecond,
		"the rest are still queued: nothing lost (%d stored, %d queued)", stored, f.depth(t))

	w2 := start(t, f.env, "worker", "-handlers", "email-dlq")
	w2.waitFor(t, 30*time.Second, "worker started")
	require.Eventually(t, func() bool { return f.rows(t) == 5 && f.depth(t) == 0 }, 20*time.Second, 50*time.Millisecond)
}

// A handler stuck past the shutdown timeout: the worker still exits in
// time, and the message waits in its queue.
func TestSIGTERMPastTheTimeoutRequeues(t *testing.T) {
	t.Parallel()
	f := newDeadFleet(t)
	f.env["WORKER_SHUTDOWN_TIMEOUT"] = "1s"
	unlock := f.lockTable(t)
	w := start(t, f.env, "worker", "-handlers", "email-dlq")
	w.waitFor(t, 30*time.Second, "worker started")
	f.publishDead(t, 2)
	f.waitInsertBlocked(t)
	took, err := w.stop(t, 20*time.Second)
	require.NoError(t, err)
	require.Less(t, took, 8*time.Second)
	require.Contains(t, w.output(), "shutdown timeout passed")
	require.Eventually(t, func() bool { return f.depth(t) == 2 }, 10*time.Second, 50*time.Millisecond,
		"both deliveries are back in the queue")
	unlock()

	w2 := start(t, f.env, "worker", "-handlers", "email-dlq")
	w2.waitFor(t, 30*time.Second, "worker started")
	require.Eventually(t, func() bool { return f.rows(t) == 2 && f.depth(t) == 0 }, 20*time.Second, 50*time.Millisecond)
}

// A dead message stored by the worker is replayed through the main queue
// once; a second replay without --force does nothing.
func TestDLQReplay(t *testing.T) {
	t.Parallel()
	f := newDeadFleet(t)
	w := start(t, f.env, "worker", "-handlers", "dlq")
	started := w.waitFor(t, 30*time.Second, "worker started")
	f.publishDead(t, 1)
	require.Eventually(t, func() bool { return f.rows(t) == 1 }, 20*time.Second, 50*time.Millisecond)

	// The worker's metrics count the stored message; islectl queues sees the consumers.
	var line struct{ Ops string }
	require.NoError(t, json.Unmarshal([]byte(started), &line))
	require.Eventually(t, func() bool { // the counter moves just after the row is written
		resp, err := http.Get("http://" + line.Ops + "/metrics")
		require.NoError(t, err)
		metrics, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(metrics), `isle_messages_total{domain="email",outcome="stored"} 1`)
	}, 5*time.Second, 50*time.Millisecond)
	var out string
	var code int
	require.Eventually(t, func() bool {
		out, code = islectl(t, f.env, "queues")
		return code == 0 && regexp.MustCompile(regexp.QuoteMeta(f.email.DLQ)+`\s+email\s+dlq\s+0\s+1`).MatchString(out)
	}, 5*time.Second, 100*time.Millisecond, "islectl queues: %s", out)

	out, code = islectl(t, f.env, "dlq", "list")
	require.Zero(t, code, out)
	require.Contains(t, out, "email/1")
	require.Contains(t, out, "u0@example.com")
	require.Contains(t, out, "smtp down")
	out, code = islectl(t, f.env, "dlq", "show", "email/1")
	require.Zero(t, code, out)
	require.Contains(t, out, `"x-email-retry-count": 3`)

	out, code = islectl(t, f.env, "dlq", "replay", "email/1")
	require.Zero(t, code, out)
	require.Contains(t, out, "email/1: replayed")
	out, code = islectl(t, f.env, "dlq", "replay", "email/1")
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "already replayed")

	// The main queue has no consumer in this worker: the replayed message waits there, once.
	d := takeMessage(t, f.conn, f.email.Queue)
	require.Equal(t, "dead-0", d.MessageId)
	require.NotContains(t, d.Headers, f.email.RetryHeader, "the retry count is reset")
	require.EqualValues(t, 1, d.Headers["x-replay-count"])
	require.Contains(t, string(d.Body), "u0@example.com")
	require.Zero(t, storetest.QueueDepth(t, f.conn, f.email.Queue), "published once")

	out, code = islectl(t, f.env, "dlq", "replay", "email/1", "-force")
	require.Zero(t, code, out)
	out, code = islectl(t, f.env, "dlq", "list", "-all")
	require.Zero(t, code, out)
	require.Contains(t, out, "(2x)")
}
