package store

import (
	"time"

	"gorm.io/gorm"
)

// NewLedgerWriterMarkingAfter is NewLedgerWriter whose settled marks wait
// delay for a debits transaction before they are written alone.
func NewLedgerWriterMarkingAfter(db *gorm.DB, observe OnBatch, delay time.Duration) *LedgerWriter {
	return newLedgerWriter(db, observe, delay)
}

// MarkWriterWoken says whether the writer of marks alone has a wake-up
// waiting.
func (w *LedgerWriter) MarkWriterWoken() bool { return len(w.marks.wake) == 1 }

// ClaimSQL is the relay's claim statement of table, and ReadCommitted its
// isolation, for tests that hold a claim open.
var (
	ClaimSQL      = claimSQL
	ReadCommitted = readCommitted
)

// LockName is the MySQL named lock p holds, once Hold took it.
func (p *RelayPresence) LockName() string { return p.lock }
