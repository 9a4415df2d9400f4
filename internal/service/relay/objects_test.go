package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/relay"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// Object priorities as the object API writes them (doc/objects.md): avatar high, wallpaper low.
const (
	avatarPriority    = 10
	wallpaperPriority = 1
)

// A claimed object_outbox row gets exactly one replication task, made of
// its object, and its message carries the task and the row's priority; a
// row published again reuses its task. Avatars overtake wallpapers queued
// before them.
func TestObjectRowsCreateOneTaskEach(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	dom := b.domain(t, topology.DomainObjectReplication)
	require.Equal(t, topology.MaxPriority, dom.MaxPriority)

	var rows []store.ObjectOutbox
	for i, kind := range []string{"wallpaper", "wallpaper", "wallpaper", "avatar"} {
		obj := store.StoredObject{OwnerUsername: "u", Kind: kind, ObjectKey: kind + "/" + string(rune('a'+i)),
			SizeBytes: 1, SHA256: string(rune('a'+i)) + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
			SourceURL: "file:///src/" + kind}
		require.NoError(t, b.db.Create(&obj).Error)
		prio := uint8(wallpaperPriority)
		if kind == "avatar" {
			prio = avatarPriority
		}
		row := store.ObjectOutbox{ObjectID: obj.ID, EventType: "REPLICATE", Priority: prio, TraceID: "trace-" + kind}
		row.AvailableAt = time.Now().UTC().Add(-time.Second)
		require.NoError(t, b.db.Create(&row).Error)
		rows = append(rows, row)
	}
	gone := store.ObjectOutbox{ObjectID: 999999, EventType: "REPLICATE"}
	gone.AvailableAt = time.Now().UTC().Add(-time.Second)
	require.NoError(t, b.db.Create(&gone).Error)

	r := b.relay(t, b.pub, relay.Config{})
	res, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, relay.TableResult{Claimed: 5, Published: 4, Parked: 1}, res["object_outbox"])
	require.Equal(t, 4, b.count(t, "SELECT COUNT(*) FROM object_replication_task"))
	require.Equal(t, 1, b.count(t, "SELECT COUNT(*) FROM object_outbox WHERE id = ? AND published_at IS NULL AND parked_at IS NOT NULL"+
		" AND last_error LIKE '%does not exist%'", gone.ID))

	tasks := map[uint64]store.ReplicationTask{} // by outbox id
	var all []store.ReplicationTask
	require.NoError(t, b.db.Find(&all).Error)
	for _, task := range all {
		tasks[task.OutboxID] = task
	}
	var objects []store.StoredObject
	require.NoError(t, b.db.Order("id").Find(&objects).Error)
	for i, row := range rows {
		task, ok := tasks[row.ID]
		require.True(t, ok, "task of outbox row %d", row.ID)
		require.Equal(t, row.ObjectID, task.ObjectID)
		require.Equal(t, objects[i].SourceURL, task.SourceURL)
		require.Equal(t, objects[i].SHA256, task.SHA256)
		require.Equal(t, row.Priority, task.Priority)
		require.Equal(t, row.TraceID, task.TraceID)
		require.Equal(t, "pending", task.Status)
	}

	// Queued before any consumer: the avatar, published with the others,
	// is delivered first.
	c := b.consume(t, dom.Queue)
	require.Eventually(t, func() bool { _, n := c.counts(); return n == 4 }, 10*time.Second, poll)
	ds := c.deliveries()
	avatar := rows[3]
	require.EqualValues(t, avatarPriority, ds[0].Priority, "the avatar goes first")
	byTask := map[int64]uint8{}
	for _, d := range ds {
		m, err := topology.Decode[topology.ObjectReplication](d.Body)
		require.NoError(t, err)
		byTask[*m.TaskID] = d.Priority
		require.EqualValues(t, dom.TypeID, d.Headers[messaging.HeaderTypeID])
		require.NotEmpty(t, d.MessageId)
	}
	for _, row := range rows {
		require.Equal(t, row.Priority, byTask[int64(tasks[row.ID].ID)], "priority of outbox row %d", row.ID)
	}
	first := ds[0]

	// Published again (a relay died before marking it): the same task.
	require.NoError(t, b.db.Exec("UPDATE object_outbox SET published_at = NULL, available_at = NOW(6) WHERE id = ?", avatar.ID).Error)
	res, err = r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, relay.TableResult{Claimed: 1, Published: 1}, res["object_outbox"])
	require.Equal(t, 4, b.count(t, "SELECT COUNT(*) FROM object_replication_task"))
	require.Eventually(t, func() bool { _, n := c.counts(); return n == 5 }, 10*time.Second, poll)
	again := c.deliveries()[4]
	require.Equal(t, first.Body, again.Body, "the same task id")
	require.Equal(t, first.MessageId, again.MessageId, "a duplicate a consumer can tell")
	require.EqualValues(t, avatarPriority, again.Priority)
}

// An object_outbox row's headers (the upload's trace context) go out with
// its replication; headers that are not a JSON object park the row.
func TestObjectRowsCarryTheirHeaders(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	dom := b.domain(t, topology.DomainObjectReplication)
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var ids []uint64
	for i, headers := range []string{`{"traceparent":"` + traceparent + `"}`, "not json"} {
		obj := store.StoredObject{OwnerUsername: "u", Kind: "avatar", ObjectKey: fmt.Sprintf("avatar/h%d", i), SizeBytes: 1,
			SHA256: fmt.Sprintf("%064d", i), SourceURL: "file:///src/avatar"}
		require.NoError(t, b.db.Create(&obj).Error)
		row := store.ObjectOutbox{ObjectID: obj.ID, EventType: "REPLICATE", Priority: avatarPriority, Headers: headers}
		row.AvailableAt = time.Now().UTC().Add(-time.Second)
		require.NoError(t, b.db.Create(&row).Error)
		ids = append(ids, row.ID)
	}
	c := b.consume(t, dom.Queue)
	res, err := b.relay(t, b.pub, relay.Config{}).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, relay.TableResult{Claimed: 2, Published: 1, Parked: 1}, res["object_outbox"])
	require.Eventually(t, func() bool { _, n := c.counts(); return n == 1 }, 10*time.Second, poll)
	require.Equal(t, traceparent, c.deliveries()[0].Headers["traceparent"], "no tracer here: the context passes as it came")
	require.Equal(t, 1, b.count(t, "SELECT COUNT(*) FROM object_outbox WHERE id = ? AND parked_at IS NOT NULL AND last_error LIKE '%headers%'", ids[1]))
}
