package store

import "time"

// StoredObject is a row of stored_object.
type StoredObject struct {
	ID            uint64    `gorm:"column:id;primaryKey"`
	OwnerUsername string    `gorm:"column:owner_username"`
	Kind          string    `gorm:"column:kind"`
	ObjectKey     string    `gorm:"column:object_key"`
	ContentType   string    `gorm:"column:content_type"`
	SizeBytes     int64     `gorm:"column:size_bytes"`
	SHA256        string    `gorm:"column:sha256"`
	SourceURL     string    `gorm:"column:source_url"`
	ReplicaURL    *string   `gorm:"column:replica_url"`
	CreatedAt     time.Time `gorm:"column:created_at"`
	UpdatedAt     time.Time `gorm:"column:updated_at"`
}

// TableName is the table gorm maps StoredObject to.
func (StoredObject) TableName() string { return "stored_object" }

// ObjectOutbox is a row of object_outbox, written with its object: the
// relay that claims it creates the object's ReplicationTask and publishes
// the task's ObjectReplicationMessage with Priority (doc/outbox.md).
type ObjectOutbox struct {
	ID        uint64 `gorm:"column:id;primaryKey"`
	ObjectID  uint64 `gorm:"column:object_id"`
	EventType string `gorm:"column:event_type"`
	Priority  uint8  `gorm:"column:priority"`
	TraceID   string `gorm:"column:trace_id"`
	Headers   string `gorm:"column:headers"` // JSON object: the trace context of the upload that queued it
	OutboxClaim
	CreatedAt time.Time `gorm:"column:created_at"`
}

// TableName is the table gorm maps ObjectOutbox to.
func (ObjectOutbox) TableName() string { return "object_outbox" }

// ReplicationTask is a row of object_replication_task; one per outbox row.
type ReplicationTask struct {
	ID        uint64     `gorm:"column:id;primaryKey"`
	OutboxID  uint64     `gorm:"column:outbox_id"`
	ObjectID  uint64     `gorm:"column:object_id"`
	SourceURL string     `gorm:"column:source_url"`
	TargetURL string     `gorm:"column:target_url"`
	Priority  uint8      `gorm:"column:priority"`
	Status    string     `gorm:"column:status"`
	Attempts  int        `gorm:"column:attempts"`
	LastError *string    `gorm:"column:last_error"`
	SHA256    string     `gorm:"column:sha256"`
	TraceID   string     `gorm:"column:trace_id"`
	CreatedAt time.Time  `gorm:"column:created_at"`
	UpdatedAt time.Time  `gorm:"column:updated_at"`
	DoneAt    *time.Time `gorm:"column:done_at"`
}

// TableName is the table gorm maps ReplicationTask to.
func (ReplicationTask) TableName() string { return "object_replication_task" }
