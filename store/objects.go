package store

import (
	"context"
	"fmt"

	"github.com/eisland/isle/internal/kit/sqltx"
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
// object that exists, and every object that exists gets one. The outbox
// row keeps the trace context of ctx, which the replication continues.
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
		row := ObjectOutbox{ObjectID: obj.ID, EventType: "REPLICATE", Priority: prio, TraceID: traceID, Headers: traceHeaders(tx.Statement.Context)}
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
// there is none. One statement reads both, so the state and the replica URL
// agree (the consumer sets them in one transaction).
func (o *Objects) Get(ctx context.Context, id uint64) (ObjectState, error) {
	var rows []struct {
		StoredObject
		TaskStatus    *string `gorm:"column:task_status"`
		TaskAttempts  *int    `gorm:"column:task_attempts"`
		TaskLastError *string `gorm:"column:task_last_error"`
	}
	err := o.db.WithContext(ctx).Raw(`SELECT o.*, t.status AS task_status, t.attempts AS task_attempts, t.last_error AS task_last_error
		FROM stored_object o LEFT JOIN object_replication_task t ON t.object_id = o.id
		WHERE o.id = ? ORDER BY t.id DESC LIMIT 1`, id).Scan(&rows).Error
	switch {
	case err != nil:
		return ObjectState{}, fmt.Errorf("store: object %d: %w", id, err)
	case len(rows) == 0:
		return ObjectState{}, fmt.Errorf("%w: object %d", ErrNotFound, id)
	}
	r := rows[0]
	st := ObjectState{StoredObject: r.StoredObject, Replication: "queued", LastError: r.TaskLastError}
	if r.TaskStatus != nil {
		st.Replication = *r.TaskStatus
	}
	if r.TaskAttempts != nil {
		st.Attempts = *r.TaskAttempts
	}
	return st, nil
}
