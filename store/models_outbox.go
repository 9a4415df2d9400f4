package store

import "time"

// OutboxMessage is a row of outbox: a message written inside a business
// transaction, published by the relay after commit.
type OutboxMessage struct {
	ID          uint64     `gorm:"column:id;primaryKey"`
	MessageID   string     `gorm:"column:message_id"`
	Domain      string     `gorm:"column:domain"`
	MessageType string     `gorm:"column:message_type"`
	Payload     []byte     `gorm:"column:payload"`
	Headers     string     `gorm:"column:headers"` // JSON object
	Priority    uint8      `gorm:"column:priority"`
	TraceID     string     `gorm:"column:trace_id"`
	Status      string     `gorm:"column:status"`
	ClaimedBy   *string    `gorm:"column:claimed_by"`
	LeaseUntil  *time.Time `gorm:"column:lease_until"`
	Attempts    int        `gorm:"column:attempts"`
	LastError   *string    `gorm:"column:last_error"`
	PublishedAt *time.Time `gorm:"column:published_at"`
	CreatedAt   time.Time  `gorm:"column:created_at"`
}

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
