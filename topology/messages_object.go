package topology

// ObjectReplication is ObjectReplicationMessage (domain "object-replication"):
// replicate the object of one object_replication_task row.
type ObjectReplication struct {
	TaskID    *int64 `json:"taskId"` // Java Long: may be null
	TraceID   string `json:"traceId"`
	LastError string `json:"lastError"`
}

// Record is the Java record name.
func (ObjectReplication) Record() string { return "ObjectReplicationMessage" }

// Domain is the domain ObjectReplication travels on.
func (ObjectReplication) Domain() string { return DomainObjectReplication }

// Validate requires a task id > 0.
func (m ObjectReplication) Validate() error { return positivePtr("taskId", m.TaskID) }
