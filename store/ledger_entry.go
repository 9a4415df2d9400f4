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

// TableName is the table gorm maps LedgerEntry to.
func (LedgerEntry) TableName() string { return "agent_ledger" }

// Deducted is what the hot balance took for a deduction entry: the amount
// the ledger applied plus the shortfall it could not cover.
func (e LedgerEntry) Deducted() decimal.Decimal { return e.AmountFen.Neg().Add(e.ShortfallFen) }

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
