package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/objstore"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// Buckets are the object stores the object consumers use: the bucket
// uploads are in, the replica bucket they are copied to, and the bucket of
// identity material.
type Buckets struct {
	Source, Target, Identity objstore.Store
}

// Replicator copies a task's object from the source store to the
// replica store (doc/objects.md): it streams it, verifies its SHA-256,
// then marks the task done and sets the object's replica_url in one
// transaction. A task already done is acknowledged and skipped, so a
// message delivered twice copies once; a failed attempt leaves the task
// failed with its error, and the message goes to the retry queue.
type Replicator struct {
	objects *store.Objects
	source  objstore.Store
	target  objstore.Store
	timeout time.Duration // one copy's limit
	log     *slog.Logger
	now     func() time.Time
}

// NewReplicator returns the object-replication consumer; timeout
// bounds one copy (OBJECT_REPLICATION_SOURCE_FETCH_TIMEOUT_MS).
func NewReplicator(db *gorm.DB, source, target objstore.Store, timeout time.Duration, log *slog.Logger) *Replicator {
	if db == nil || source == nil || target == nil || log == nil {
		panic("handlers: NewReplicator: nil dependency")
	}
	return &Replicator{objects: store.NewObjects(db), source: source, target: target, timeout: timeout, log: log, now: time.Now}
}

func objectReplicationConsumer(d Backends, log *slog.Logger) *Replicator {
	return NewReplicator(d.DB, d.Buckets.Source, d.Buckets.Target, d.CopyTimeout, log)
}

// Handle replicates the object of m's task.
func (h *Replicator) Handle(ctx context.Context, m topology.ObjectReplication) error {
	if *m.TaskID <= 0 {
		return messaging.Permanent(fmt.Errorf("no replication task %d", *m.TaskID))
	}
	task, err := h.objects.Task(ctx, uint64(*m.TaskID))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return messaging.Permanent(err)
	case err != nil:
		return err
	case task.Status == store.TaskDone:
		h.log.DebugContext(ctx, "replication task already done; skipped", "task", task.ID)
		return nil
	}
	src, key, err := objstore.Locate(task.SourceURL, h.source)
	if err != nil {
		// The URL is not in the source store this worker has: another
		// worker's configuration, or a task made by hand. Retrying here
		// cannot help.
		return messaging.Permanent(fmt.Errorf("task %d: source %s: %w", task.ID, task.SourceURL, err))
	}
	copyCtx := ctx
	if h.timeout > 0 {
		var cancel context.CancelFunc
		copyCtx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	var info objstore.Info
	err = inSpan(copyCtx, "object copy", func(ctx context.Context) (err error) {
		info, err = objstore.Copy(ctx, h.target, src, key, task.SHA256)
		return err
	})
	if err != nil {
		h.failed(ctx, task.ID, err)
		return fmt.Errorf("task %d: copy %s: %w", task.ID, key, err)
	}
	replica := h.target.URL(key)
	if err := h.done(ctx, task, replica); err != nil {
		return err
	}
	h.log.InfoContext(ctx, "object replicated", "task", task.ID, "object", task.ObjectID, "bytes", info.Size, "replica", replica)
	return nil
}

// done marks the task done and sets its object's replica URL together.
func (h *Replicator) done(ctx context.Context, task store.ReplicationTask, replica string) error {
	return h.objects.FinishTask(ctx, task, replica, h.now())
}

// failed records a failed attempt on the task; the message's retry carries
// on whether or not this write succeeds.
func (h *Replicator) failed(ctx context.Context, id uint64, cause error) {
	if err := h.objects.FailTask(ctx, id, messaging.Clip(cause.Error(), 2000)); err != nil {
		h.log.WarnContext(ctx, "could not record a failed replication attempt", "task", id, "err", err)
	}
}
