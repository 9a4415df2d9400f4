package reconcile_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

type backfillBundle struct {
	db   *gorm.DB
	conn *amqp.Connection
	dom  topology.Domain
	pub  *messaging.Publisher
	next uint64 // outbox_id of the next task
}

// setupBackfill gives a test a migrated database, a topology prefix of its
// own, declared by a publisher, and the replication domain.
func setupBackfill(t *testing.T) *backfillBundle {
	t.Helper()
	conn, prefix := storetest.AMQP(t)
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	pub, err := messaging.NewPublisher(messaging.PublisherConfig{URL: storetest.AMQPURL(), Name: t.Name()},
		tp, messaging.NewMetrics(prometheus.NewRegistry()), discard)
	require.NoError(t, err)
	t.Cleanup(func() { _ = pub.Close() })
	dom, ok := tp.Domain(topology.DomainObjectReplication)
	require.True(t, ok)
	return &backfillBundle{db: storetest.MySQL(t), conn: conn, dom: dom, pub: pub, next: 1}
}

// task inserts a replication task last updated age ago (by the database's clock).
func (b *backfillBundle) task(t *testing.T, status string, attempts int, priority uint8, age time.Duration, lastError *string) store.ReplicationTask {
	t.Helper()
	task := store.ReplicationTask{OutboxID: b.next, ObjectID: b.next, SourceURL: "file:///src/o" + strconv.FormatUint(b.next, 10),
		Priority: priority, Status: status, Attempts: attempts, LastError: lastError, SHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		TraceID: "trace-" + strconv.FormatUint(b.next, 10)}
	b.next++
	require.NoError(t, b.db.Omit("created_at", "updated_at", "done_at").Create(&task).Error)
	require.NoError(t, b.db.Exec("UPDATE object_replication_task SET updated_at = NOW(6) - INTERVAL ? MICROSECOND WHERE id = ?",
		age.Microseconds(), task.ID).Error)
	return b.read(t, task.ID)
}

func (b *backfillBundle) read(t *testing.T, id uint64) store.ReplicationTask {
	t.Helper()
	var task store.ReplicationTask
	require.NoError(t, b.db.Take(&task, id).Error)
	return task
}

// consume collects the deliveries of the replication queue until the test ends.
func (b *backfillBundle) consume(t *testing.T) func() []amqp.Delivery {
	t.Helper()
	ch, err := b.conn.Channel()
	require.NoError(t, err)
	ds, err := ch.Consume(b.dom.Queue, "", true, false, false, false, nil)
	require.NoError(t, err)
	var mu sync.Mutex
	var got []amqp.Delivery
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range ds {
			mu.Lock()
			got = append(got, d)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { _ = ch.Close(); <-done })
	return func() []amqp.Delivery {
		mu.Lock()
		defer mu.Unlock()
		return append([]amqp.Delivery(nil), got...)
	}
}

// messageID is the relay's derivation, written out: a republish must carry
// the id the relay gave the task's first message.
func messageID(task uint64) string {
	return uuid.NewSHA1(uuid.MustParse("6f1c1c5e-2d0a-4d8e-9a57-0b7a3c6f1e21"), []byte("object_replication_task:"+strconv.FormatUint(task, 10))).String()
}

func runBackfill(t *testing.T, job reconcile.Job) reconcile.BackfillResult {
	t.Helper()
	res, err := job.RunOnce(context.Background())
	require.NoError(t, err)
	return res.(reconcile.BackfillResult)
}

// Pending and failed tasks older than the threshold, with retries left, are
// republished once each, lowest id first, Batch per run, with the task's
// priority, trace id, last error and the relay's message id; then touched,
// their status kept. Recent, done and exhausted tasks are left alone, and a
// run right after republishes nothing.
func TestReplicationBackfillRepublishesStuckTasks(t *testing.T) {
	t.Parallel()
	b := setupBackfill(t)
	require.Equal(t, 6, b.dom.Retry.MaxRetries)
	boom := "copy: connection reset"
	hour, threshold := time.Hour, 10*time.Minute

	stuckPending := b.task(t, store.TaskPending, 0, store.PriorityAvatar, hour, nil)
	b.task(t, store.TaskPending, 0, store.PriorityAvatar, time.Minute, nil) // recent
	b.task(t, store.TaskDone, 1, store.PriorityAvatar, 2*hour, nil)         // done: never
	stuckFailed := b.task(t, store.TaskFailed, 3, store.PriorityWallpaper, hour, &boom)
	b.task(t, store.TaskFailed, 7, store.PriorityWallpaper, hour, &boom) // retries used up: the DLQ's
	b.task(t, store.TaskFailed, 1, store.PriorityWallpaper, threshold-time.Minute, &boom)
	lastRetry := b.task(t, store.TaskFailed, 6, store.PriorityAvatar, 3*hour, &boom)
	stuck := []store.ReplicationTask{stuckPending, stuckFailed, lastRetry}
	// Stuck too, but its message is dead and not replayed: the operator's.
	dead := b.task(t, store.TaskPending, 0, store.PriorityAvatar, hour, nil)
	require.NoError(t, b.db.Exec("INSERT INTO object_replication_log (dedup_key, queue, message_id, body, headers, dead_at)"+
		" VALUES (?, 'q', ?, '{}', '{}', NOW(6))", strings.Repeat("d", 64), messageID(dead.ID)).Error)

	deliveries := b.consume(t)
	reg := prometheus.NewRegistry()
	job := reconcile.NewReplicationBackfill(b.db, b.dom, b.pub, reconcile.BackfillConfig{StuckAfter: threshold, Batch: 2},
		reconcile.NewMetrics(reg), discard)
	require.Equal(t, "replication-backfill", job.Name())

	require.Equal(t, reconcile.BackfillResult{StuckAfter: threshold, Scanned: 2, Republished: 2}, runBackfill(t, job))
	require.Equal(t, reconcile.BackfillResult{StuckAfter: threshold, Scanned: 1, Republished: 1}, runBackfill(t, job))
	res := runBackfill(t, job)
	require.Equal(t, reconcile.BackfillResult{StuckAfter: threshold}, res, "a run right after republishes nothing")
	require.Equal(t, "tasks stuck over 10m0s: scanned 0, republished 0, failed to publish 0", res.String())

	// And no more: the republishes were confirmed, so they are in the queue
	// ahead of a last message of the lowest priority published now.
	require.NoError(t, b.pub.Send(context.Background(), messaging.Outgoing{RoutingKey: b.dom.RoutingKey, MessageID: "last", Body: []byte("{}")}))
	require.Eventually(t, func() bool {
		ds := deliveries()
		return len(ds) > 0 && ds[len(ds)-1].MessageId == "last"
	}, 10*time.Second, 20*time.Millisecond)
	all := deliveries()
	require.Len(t, all, len(stuck)+1, "one message per task, and the last")
	got := map[string]amqp.Delivery{}
	for _, d := range all[:len(stuck)] {
		got[d.MessageId] = d
	}
	require.Len(t, got, len(stuck), "one message per task")
	for _, want := range stuck {
		d, ok := got[messageID(want.ID)]
		require.True(t, ok, "task %d republished with the relay's message id", want.ID)
		require.Equal(t, messageID(want.ID), d.MessageId, "task %d", want.ID)
		require.Equal(t, want.Priority, d.Priority, "task %d", want.ID)
		require.Equal(t, want.TraceID, d.CorrelationId)
		require.Equal(t, b.dom.TypeID, d.Headers["__TypeId__"])
		var m topology.ObjectReplication
		require.NoError(t, json.Unmarshal(d.Body, &m))
		require.NotNil(t, m.TaskID)
		require.EqualValues(t, want.ID, *m.TaskID)
		require.Equal(t, want.TraceID, m.TraceID)
		if want.LastError != nil {
			require.Equal(t, *want.LastError, m.LastError)
		} else {
			require.Empty(t, m.LastError)
		}

		after := b.read(t, want.ID)
		require.Equal(t, want.Status, after.Status, "status kept")
		require.Equal(t, want.Attempts, after.Attempts)
		require.True(t, after.UpdatedAt.After(want.UpdatedAt.Add(threshold)), "task %d touched", want.ID)
	}

	var done int
	require.NoError(t, b.db.Raw("SELECT COUNT(*) FROM object_replication_task WHERE status = 'done' AND updated_at < NOW(6) - INTERVAL 1 HOUR").Scan(&done).Error)
	require.Equal(t, 1, done, "the done task is not touched")
	metrics, err := reg.Gather()
	require.NoError(t, err)
	counts := map[string]float64{}
	for _, mf := range metrics {
		if mf.GetName() != "isle_reconcile_items_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "item" {
					counts[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	require.Equal(t, map[string]float64{"tasks_scanned": 3, "tasks_republished": 3}, counts)
}

// failingSender refuses the messages of one task and sends the others.
type failingSender struct {
	reconcile.Sender
	id string // message id refused
}

var errRefused = errors.New("broker refused")

func (s failingSender) Send(ctx context.Context, out messaging.Outgoing) error {
	if out.MessageID == s.id {
		return errRefused
	}
	return s.Sender.Send(ctx, out)
}

// A task whose publish fails is counted, left exactly as it was, and taken
// again by the next run; the others of the run are republished.
func TestReplicationBackfillLeavesUnpublishedTasks(t *testing.T) {
	t.Parallel()
	b := setupBackfill(t)
	ok := b.task(t, store.TaskPending, 0, store.PriorityWallpaper, time.Hour, nil)
	boom := "timeout"
	refused := b.task(t, store.TaskFailed, 2, store.PriorityAvatar, time.Hour, &boom)
	deliveries := b.consume(t)

	cfg := reconcile.BackfillConfig{StuckAfter: time.Minute}
	job := reconcile.NewReplicationBackfill(b.db, b.dom, failingSender{b.pub, messageID(refused.ID)}, cfg, nil, discard)
	res, err := job.RunOnce(context.Background())
	require.ErrorIs(t, err, errRefused)
	require.Equal(t, reconcile.BackfillResult{StuckAfter: time.Minute, Scanned: 2, Republished: 1, Failed: 1}, res)
	require.Equal(t, refused, b.read(t, refused.ID), "left as it was")
	require.Equal(t, ok.Status, b.read(t, ok.ID).Status)
	require.True(t, b.read(t, ok.ID).UpdatedAt.After(ok.UpdatedAt))
	require.Eventually(t, func() bool { return len(deliveries()) == 1 }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, messageID(ok.ID), deliveries()[0].MessageId)

	job = reconcile.NewReplicationBackfill(b.db, b.dom, b.pub, cfg, nil, discard)
	require.Equal(t, reconcile.BackfillResult{StuckAfter: time.Minute, Scanned: 1, Republished: 1}, runBackfill(t, job))
	require.Eventually(t, func() bool { return len(deliveries()) == 2 }, 10*time.Second, 20*time.Millisecond)
	require.Equal(t, messageID(refused.ID), deliveries()[1].MessageId)
	require.Equal(t, refused.Status, b.read(t, refused.ID).Status)
}
