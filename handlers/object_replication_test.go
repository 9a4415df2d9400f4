package handlers_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/objstore"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

type replicationFixture struct {
	db             *gorm.DB
	source, target objstore.Store
	h              *handlers.Replicator
}

func newReplicationFixture(t *testing.T) *replicationFixture {
	t.Helper()
	f := &replicationFixture{db: storetest.MySQL(t)}
	var err error
	f.source, err = objstore.Open("file://"+t.TempDir(), objstore.Options{})
	require.NoError(t, err)
	f.target, err = objstore.Open("file://"+t.TempDir(), objstore.Options{})
	require.NoError(t, err)
	f.h = handlers.NewReplicator(f.db, f.source, f.target, 0, quiet)
	return f
}

// task stores body as an uploaded object and makes its replication task,
// as the API and the relay do; sum overrides the object's SHA-256.
func (f *replicationFixture) task(t *testing.T, key string, body []byte, sum string) store.ReplicationTask {
	t.Helper()
	info, err := f.source.Put(t.Context(), key, bytes.NewReader(body), int64(len(body)), "image/png")
	require.NoError(t, err)
	if sum == "" {
		sum = info.SHA256
	}
	obj, err := store.NewObjects(f.db).Create(t.Context(), store.StoredObject{OwnerUsername: "ann", Kind: store.KindAvatar,
		ObjectKey: key, SizeBytes: info.Size, SHA256: sum, SourceURL: f.source.URL(key)}, "trace")
	require.NoError(t, err)
	var outbox store.ObjectOutbox
	require.NoError(t, f.db.Where("object_id = ?", obj.ID).Take(&outbox).Error)
	task := store.ReplicationTask{OutboxID: outbox.ID, ObjectID: obj.ID, SourceURL: obj.SourceURL, Priority: outbox.Priority,
		Status: store.TaskPending, SHA256: sum}
	require.NoError(t, f.db.Omit("id", "created_at", "updated_at").Create(&task).Error)
	return task
}

func (f *replicationFixture) reload(t *testing.T, task store.ReplicationTask) (store.ReplicationTask, store.StoredObject) {
	t.Helper()
	var obj store.StoredObject
	require.NoError(t, f.db.Take(&task, task.ID).Error)
	require.NoError(t, f.db.Take(&obj, task.ObjectID).Error)
	return task, obj
}

func msgFor(task store.ReplicationTask) topology.ObjectReplication {
	id := int64(task.ID)
	return topology.ObjectReplication{TaskID: &id, TraceID: "trace"}
}

func TestReplicationCopiesVerifiesAndMarksDoneOnce(t *testing.T) {
	f := newReplicationFixture(t)
	body := bytes.Repeat([]byte{1, 2, 3, 5, 8}, 300_000) // 1.5 MB
	task := f.task(t, "avatar/ann/1/me.png", body, "")

	require.NoError(t, f.h.Handle(t.Context(), msgFor(task)))
	done, obj := f.reload(t, task)
	require.Equal(t, store.TaskDone, done.Status)
	require.Equal(t, 1, done.Attempts)
	require.NotNil(t, done.DoneAt)
	require.Equal(t, f.target.URL("avatar/ann/1/me.png"), done.TargetURL)
	require.NotNil(t, obj.ReplicaURL)
	require.Equal(t, done.TargetURL, *obj.ReplicaURL)
	rc, _, err := f.target.Get(t.Context(), "avatar/ann/1/me.png")
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	require.Equal(t, body, got)

	// Delivered again: acknowledged and skipped, nothing changes.
	require.NoError(t, f.h.Handle(t.Context(), msgFor(task)))
	again, _ := f.reload(t, task)
	require.Equal(t, done.Attempts, again.Attempts)
	require.Equal(t, done.DoneAt.UnixMicro(), again.DoneAt.UnixMicro())
}

func TestReplicationChecksumMismatchIsRetriedNeverDone(t *testing.T) {
	f := newReplicationFixture(t)
	wrong := sha256.Sum256([]byte("something else"))
	task := f.task(t, "wallpaper/ann/2/w.jpg", []byte("the real bytes"), hex.EncodeToString(wrong[:]))

	for attempt := 1; attempt <= 2; attempt++ {
		err := f.h.Handle(t.Context(), msgFor(task))
		require.ErrorIs(t, err, objstore.ErrChecksum)
		require.False(t, messaging.IsPermanent(err), "a mismatch is retried: the source may be rewritten meanwhile")
		failed, obj := f.reload(t, task)
		require.Equal(t, store.TaskFailed, failed.Status)
		require.Equal(t, attempt, failed.Attempts)
		require.NotNil(t, failed.LastError)
		require.Contains(t, *failed.LastError, "checksum")
		require.Nil(t, obj.ReplicaURL)
		_, err = f.target.Stat(t.Context(), "wallpaper/ann/2/w.jpg")
		require.ErrorIs(t, err, objstore.ErrNotFound, "no unverified copy is left in the replica store")
	}
}

func TestReplicationOfAMissingTaskOrForeignSourceIsDead(t *testing.T) {
	f := newReplicationFixture(t)
	missing := int64(987654)
	err := f.h.Handle(t.Context(), topology.ObjectReplication{TaskID: &missing})
	require.True(t, messaging.IsPermanent(err), "%v", err)

	task := f.task(t, "avatar/ann/3/x.png", []byte("x"), "")
	require.NoError(t, f.db.Model(&task).Update("source_url", "file:///etc/passwd").Error)
	err = f.h.Handle(t.Context(), msgFor(task))
	require.True(t, messaging.IsPermanent(err), "a URL outside the configured source store is refused: %v", err)
	require.True(t, errors.Is(err, objstore.ErrOtherStore) || errors.Is(err, objstore.ErrBadURL), "%v", err)
}

func TestIdentityMaterialIsStoredAndItsURLRecorded(t *testing.T) {
	db, rdb := storetest.MySQL(t), storetest.Redis(t)
	dir := t.TempDir()
	s, err := objstore.Open("file://"+dir, objstore.Options{})
	require.NoError(t, err)
	ids := store.NewIdentities(db, rdb)
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	d, _ := tp.Domain(topology.DomainIdentityMaterial)
	_, err = ids.Record(t.Context(), d, store.VerificationResult{Username: "ivy", CertifyID: "c-1", Passed: true, MaterialInfo: `{"enc":1}`})
	require.NoError(t, err)

	h := handlers.NewMaterialRecorder(ids, s, quiet)
	m := topology.IdentityMaterial{Username: "ivy", CertifyID: "c-1", MaterialInfo: `{"enc":1}`}
	var row, again store.IdentityVerification
	require.NoError(t, h.Handle(context.Background(), m))
	require.NoError(t, db.Where("certify_id = ?", "c-1").Take(&row).Error)
	require.NoError(t, h.Handle(context.Background(), m), "twice: the same object, the same URL")
	require.NoError(t, db.Where("certify_id = ?", "c-1").Take(&again).Error)
	require.Equal(t, row, again, "a redelivery leaves the row as it was, updated_at included")
	require.NotNil(t, row.MaterialInfoURL)
	key := handlers.MaterialKey("ivy", "c-1")
	require.Equal(t, s.URL(key), *row.MaterialInfoURL)
	rc, _, err := s.Get(t.Context(), key)
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	rc.Close()
	require.NoError(t, err)
	require.JSONEq(t, `{"username":"ivy","certifyId":"c-1","materialInfo":"{\"enc\":1}"}`, string(got))

	err = h.Handle(t.Context(), topology.IdentityMaterial{Username: "ivy", CertifyID: "never-recorded", MaterialInfo: "x"})
	require.True(t, messaging.IsPermanent(err), "material of an unknown certification goes to the DLQ: %v", err)
	err = h.Handle(t.Context(), topology.IdentityMaterial{Username: "mallory", CertifyID: "c-1", MaterialInfo: "forged"})
	require.True(t, messaging.IsPermanent(err), "material naming another user than the certification's goes to the DLQ: %v", err)
	require.NoError(t, db.Where("certify_id = ?", "c-1").Take(&again).Error)
	require.Equal(t, row, again, "the certification's material is still ivy's")
	files, err := filepath.Glob(filepath.Join(dir, "identity-material", "*"))
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(dir, key)}, files, "a refused message stores nothing")
}
