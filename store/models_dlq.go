package store

import "time"

// DeadLetter is a row of a table of dead messages: the table a domain of
// the topology names (topology.Domain.DLQTable). Use it with db.Table(name).
// DedupKey makes a redelivered dead message one row. A Body or Headers too
// large for the row is kept in dlq_log_part (Parts pieces); DeadLetters.Save
// writes and DeadLetters.Get reads it whole, BodyBytes and HeadersBytes being
// the whole sizes.
type DeadLetter struct {
	ID           uint64     `gorm:"column:id;primaryKey"`
	DedupKey     string     `gorm:"column:dedup_key"`
	Queue        string     `gorm:"column:queue"`
	RoutingKey   string     `gorm:"column:routing_key"`
	MessageType  string     `gorm:"column:message_type"`
	MessageID    string     `gorm:"column:message_id"`
	TraceID      string     `gorm:"column:trace_id"`
	Subject      string     `gorm:"column:subject"` // the domain's key: email, order, user, task id, submit id ...
	Body         []byte     `gorm:"column:body"`
	Headers      string     `gorm:"column:headers"` // JSON object
	BodyBytes    int64      `gorm:"column:body_bytes"`
	HeadersBytes int64      `gorm:"column:headers_bytes"`
	Parts        int        `gorm:"column:parts"` // rows in dlq_log_part
	RetryCount   int        `gorm:"column:retry_count"`
	LastError    *string    `gorm:"column:last_error"`
	DeadAt       time.Time  `gorm:"column:dead_at"`
	ReplayedAt   *time.Time `gorm:"column:replayed_at"`
	ReplayCount  int        `gorm:"column:replay_count"`
	CreatedAt    time.Time  `gorm:"column:created_at"`
}
