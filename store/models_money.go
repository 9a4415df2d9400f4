package store

import (
	"time"

	"github.com/shopspring/decimal"
)

// Ledger entry kinds.
const (
	LedgerDeduct   = "DEDUCT"
	LedgerRecharge = "RECHARGE"
	LedgerAdjust   = "ADJUST"
)

// UserAccount is a row of user_account. BalanceFen changes only in the
// transaction that inserts the matching LedgerEntry.
type UserAccount struct {
	ID          uint64          `gorm:"column:id;primaryKey"`
	Username    string          `gorm:"column:username"`
	Email       *string         `gorm:"column:email"`
	BalanceFen  decimal.Decimal `gorm:"column:balance_fen;type:decimal(20,8)"`
	LedgerSeq   uint64          `gorm:"column:ledger_seq"`  // seq of the user's last ledger entry
	HotEntries  uint64          `gorm:"column:hot_entries"` // entries written to be settled into the Redis balance
	ProExpireAt *time.Time      `gorm:"column:pro_expire_at"`
	CreatedAt   time.Time       `gorm:"column:created_at"`
	UpdatedAt   time.Time       `gorm:"column:updated_at"`
}

func (UserAccount) TableName() string { return "user_account" }

// LedgerEntry is a row of agent_ledger: one signed change of a balance.
// (Username, Kind, EntryID) is unique, so each entry applies once.
type LedgerEntry struct {
	ID           uint64          `gorm:"column:id;primaryKey"`
	Username     string          `gorm:"column:username"`
	Kind         string          `gorm:"column:kind"`
	EntryID      string          `gorm:"column:entry_id"`
	PendingRef   *string         `gorm:"column:pending_ref"`                      // a deduction: the nonce of the hot-balance charge it records
	RequestHash  *string         `gorm:"column:request_hash"`                     // a deduction: the hash of its request's body
	Seq          uint64          `gorm:"column:seq"`                              // per user, in commit order
	AmountFen    decimal.Decimal `gorm:"column:amount_fen;type:decimal(20,8)"`    // negative for a deduction
	ShortfallFen decimal.Decimal `gorm:"column:shortfall_fen;type:decimal(20,8)"` // what a deduction could not take
	ModelName    *string         `gorm:"column:model_name"`
	InputTokens  *uint32         `gorm:"column:input_tokens"`
	OutputTokens *uint32         `gorm:"column:output_tokens"`
	Reason       *string         `gorm:"column:reason"`
	Source       string          `gorm:"column:source"`
	OccurredAt   time.Time       `gorm:"column:occurred_at"`
	SettledAt    *time.Time      `gorm:"column:settled_at"` // the Redis balance reflects the entry
	CreatedAt    time.Time       `gorm:"column:created_at"`
}

func (LedgerEntry) TableName() string { return "agent_ledger" }

// Deducted is what the hot balance took for a deduction entry: the amount
// the ledger applied plus the shortfall it could not cover.
func (e LedgerEntry) Deducted() decimal.Decimal { return e.AmountFen.Neg().Add(e.ShortfallFen) }

// ModelPricing is a row of agent_model_pricing: fen per million tokens.
type ModelPricing struct {
	ID                    uint64          `gorm:"column:id;primaryKey"`
	ModelName             string          `gorm:"column:model_name"`
	InputFenPerMTok       decimal.Decimal `gorm:"column:input_fen_per_mtok;type:decimal(20,8)"`
	CachedInputFenPerMTok decimal.Decimal `gorm:"column:cached_input_fen_per_mtok;type:decimal(20,8)"`
	OutputFenPerMTok      decimal.Decimal `gorm:"column:output_fen_per_mtok;type:decimal(20,8)"`
	ReasoningFenPerMTok   decimal.Decimal `gorm:"column:reasoning_fen_per_mtok;type:decimal(20,8)"`
	Enabled               bool            `gorm:"column:enabled"`
	CreatedAt             time.Time       `gorm:"column:created_at"`
	UpdatedAt             time.Time       `gorm:"column:updated_at"`
}

func (ModelPricing) TableName() string { return "agent_model_pricing" }

// UsageStat is a row of agent_usage_stats: one model's usage on one day.
type UsageStat struct {
	ID              uint64    `gorm:"column:id;primaryKey"`
	ModelName       string    `gorm:"column:model_name"`
	StatDate        time.Time `gorm:"column:stat_date;type:date"`
	InputTokens     uint64    `gorm:"column:input_tokens"`
	CachedTokens    uint64    `gorm:"column:cached_tokens"`
	OutputTokens    uint64    `gorm:"column:output_tokens"`
	ReasoningTokens uint64    `gorm:"column:reasoning_tokens"`
	RequestCount    uint64    `gorm:"column:request_count"`
	CostMicroFen    uint64    `gorm:"column:cost_micro_fen"`
	UpdatedAt       time.Time `gorm:"column:updated_at"`
}

func (UsageStat) TableName() string { return "agent_usage_stats" }

// UsageEvent is a row of agent_usage_event: a usage message already counted.
type UsageEvent struct {
	RequestID string    `gorm:"column:request_id;primaryKey"`
	ModelName string    `gorm:"column:model_name"`
	CreatedAt time.Time `gorm:"column:created_at"`
}

func (UsageEvent) TableName() string { return "agent_usage_event" }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nonEmpty(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
