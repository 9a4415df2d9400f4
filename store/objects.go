package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/eisland/isle/internal/sqltx"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// The kinds of stored object, and the AMQP priority their replication is
// published with: the replication queue takes priorities up to
// topology.MaxPriority, and an avatar (a user waits for it) goes before a
// wallpaper.
const (
	KindAvatar    = "avatar"
	KindWallpaper = "wallpaper"

	PriorityAvatar    uint8 = topology.MaxPriority - 1
	PriorityWallpaper uint8 = 1
)

// ReplicationPriority is the priority of kind's replication, and whether
// kind is one Isle stores.
func ReplicationPriority(kind string) (uint8, bool) {
	switch kind {
	case KindAvatar:
		return PriorityAvatar, true
	case KindWallpaper:
		return PriorityWallpaper, true
	}
	return 0, false
}

// The statuses of an object_replication_task.
const (
	TaskPending = "pending"
	TaskDone    = "done"
	TaskFailed  = "failed"
)

// Objects are the stored objects and their replication.
type Objects struct{ db *gorm.DB }

// NewObjects returns the stored objects of db.
func NewObjects(db *gorm.DB) *Objects { return &Objects{db: db} }

// Create writes an object's row and the object_outbox row that replicates
// it, in one transaction: the relay publishes the replication only of an
// object that exists, and every object that exists gets one.
func (o *Objects) Create(ctx context.Context, obj StoredObject, traceID string) (StoredObject, error) {
	prio, ok := ReplicationPriority(obj.Kind)
	if !ok {
		return StoredObject{}, fmt.Errorf("store: object kind %q is not avatar or wallpaper", obj.Kind)
	}
	err := sqltx.Transact(ctx, o.db, func(tx *gorm.DB) error {
		obj.ID = 0
		if err := tx.Omit("created_at", "updated_at").Create(&obj).Error; err != nil {
			return err
		}
		row := ObjectOutbox{ObjectID: obj.ID, EventType: "REPLICATE", Priority: prio, TraceID: traceID}
		return tx.Omit("id", "created_at", "available_at").Create(&row).Error
	})
	if err != nil {
		return StoredObject{}, fmt.Errorf("store: create object %s: %w", obj.ObjectKey, err)
	}
	return obj, nil
}

// ObjectState is an object with where its replication is.
type ObjectState struct {
	StoredObject
	Replication string  // "queued" (not yet published), or the task's status: pending, done, failed
	Attempts    int     // the task's attempts
	LastError   *string // the task's last error
}

// Get returns the object id and its replication state; ErrNotFound when
// there is none.
func (o *Objects) Get(ctx context.Context, id uint64) (ObjectState, error) {
	var st ObjectState
	err := o.db.WithContext(ctx).Take(&st.StoredObject, id).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return ObjectState{}, fmt.Errorf("%w: object %d", ErrNotFound, id)
	}
	if err != nil {
		return ObjectState{}, fmt.Errorf("store: object %d: %w", id, err)
	}
	var task ReplicationTask
	err = o.db.WithContext(ctx).Where("object_id = ?", id).Order("id DESC").Take(&task).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		st.Replication = "queued"
	case err != nil:
		return ObjectState{}, fmt.Errorf("store: replication of object %d: %w", id, err)
	default:
		st.Replication, st.Attempts, st.LastError = task.Status, task.Attempts, task.LastError
	}
	return st, nil
}
