package store

import "time"

// OutboxTables are the tables the relay drains. Each has OutboxClaim's
// columns and the claim index idx_<table>_claim (published_at,
// available_at, id), so one claim statement serves them all (doc/outbox.md).
var OutboxTables = []string{"outbox", "object_outbox"}

// OutboxClaim is the part of an outbox row the relay claims and marks, the
// same in every table of OutboxTables. A row is to publish while
// PublishedAt is nil; it may be claimed once AvailableAt has passed (on
// insert, at once). A claim sets ClaimedBy, adds an attempt and moves
// AvailableAt to the end of its lease; a publish the broker confirmed sets
// PublishedAt, where ClaimedBy is still the claim's; a failed one records
// LastError and moves AvailableAt by the backoff. A row that can never be
// published as it is gets ParkedAt and AvailableAt = OutboxParkedUntil: out
// of the claim until it is replayed (doc/outbox.md).
type OutboxClaim struct {
	ClaimedBy   *string    `gorm:"column:claimed_by"`
	AvailableAt time.Time  `gorm:"column:available_at;default:CURRENT_TIMESTAMP(6)"`
	Attempts    int        `gorm:"column:attempts"`
	LastError   *string    `gorm:"column:last_error"`
	PublishedAt *time.Time `gorm:"column:published_at"`
	ParkedAt    *time.Time `gorm:"column:parked_at"`
}

// OutboxParkedUntil is the available_at of a parked row: the largest
// DATETIME, beyond every claim.
const OutboxParkedUntil = "9999-12-31 23:59:59"

// OutboxMessage is a row of outbox: a message written inside a business
// transaction, published as it is by the relay after commit to the
// exchange and routing key of its topology Domain.
type OutboxMessage struct {
	ID          uint64 `gorm:"column:id;primaryKey"`
	MessageID   string `gorm:"column:message_id"`
	Domain      string `gorm:"column:domain"`
	MessageType string `gorm:"column:message_type"`
	Payload     []byte `gorm:"column:payload"`
	Headers     string `gorm:"column:headers"` // JSON object
	Priority    uint8  `gorm:"column:priority"`
	TraceID     string `gorm:"column:trace_id"`
	OutboxClaim
	CreatedAt time.Time `gorm:"column:created_at"`
}

// TableName is the table gorm maps OutboxMessage to.
func (OutboxMessage) TableName() string { return "outbox" }

// Models lists one value of every gorm model, for schema checks.
func Models() []any {
	return []any{
		&UserAccount{}, &LedgerEntry{}, &ModelPricing{}, &UsageStat{}, &UsageEvent{},
		&PaymentOrder{}, &PaymentNotifyRecord{},
		&StoredObject{}, &ObjectOutbox{}, &ReplicationTask{},
		&IdentityVerification{}, &GameScore{}, &OutboxMessage{}, &UserBan{},
	}
}
