package store

import (
	"context"

	"github.com/eisland/isle/internal/groupcommit"
	"gorm.io/gorm"
)

// WriterBatchMax is the most items one group-committed transaction (or
// Redis pipeline) of a writer carries.
const WriterBatchMax = 100

// OnBatch is told the size of each transaction a writer commits, or
// pipeline it sends, by batcher ("ledger", "settled", "usage",
// "redis-settle", "redis-usage"); nil tells nobody.
type OnBatch func(batcher string, n int)

// LedgerWriter applies debits and marks entries settled for concurrent
// consumers, group-committed: while one transaction commits, the calls that
// arrive queue up and go together in the next, so N handlers share one
// transaction instead of N. Close it after the consumers stopped.
type LedgerWriter struct {
	debits  *groupcommit.Batcher[Debit, DebitResult]
	settled *groupcommit.Batcher[EntryKey, struct{}]
}

// NewLedgerWriter returns a writer over db.
func NewLedgerWriter(db *gorm.DB, observe OnBatch) *LedgerWriter {
	l := NewLedger(db)
	w := &LedgerWriter{
		debits: groupcommit.New("mysql debits", WriterBatchMax, func(ctx context.Context, ds []Debit) ([]DebitResult, error) {
			return l.ApplyDebits(ctx, ds)
		}),
		settled: groupcommit.New("mysql settled", WriterBatchMax, func(ctx context.Context, es []EntryKey) ([]struct{}, error) {
			return make([]struct{}, len(es)), l.MarkSettled(ctx, es...)
		}),
	}
	w.debits.Observe = observing(observe, "ledger")
	w.settled.Observe = observing(observe, "settled")
	return w
}

// ApplyDebit applies one debit exactly once (ApplyDebits), in a shared
// transaction.
func (w *LedgerWriter) ApplyDebit(ctx context.Context, d Debit) (DebitResult, error) {
	return w.debits.Do(ctx, d)
}

// ApplyDebits applies debits exactly once, in as few shared transactions
// as WriterBatchMax allows, and answers each on its own: a result, or the
// error of the transaction it was in.
func (w *LedgerWriter) ApplyDebits(ctx context.Context, ds []Debit) ([]DebitResult, []error) {
	return w.debits.DoAll(ctx, ds)
}

// MarkSettled records that the Redis balance reflects the entries.
func (w *LedgerWriter) MarkSettled(ctx context.Context, entries ...EntryKey) error {
	_, errs := w.settled.DoAll(ctx, entries)
	for _, err := range errs {
		if err != nil {
			return err // the others' are the same transaction's, or a later one's
		}
	}
	return nil
}

// Close finishes the transactions under way and stops taking calls.
func (w *LedgerWriter) Close() {
	w.debits.Close()
	w.settled.Close()
}

// UsageWriter counts usages once for concurrent consumers (ApplyUsage),
// group-committed like LedgerWriter.
type UsageWriter struct {
	usage *groupcommit.Batcher[Usage, counted]
}

// counted is what ApplyUsageEach said of one usage.
type counted struct {
	now bool
	err error
}

// NewUsageWriter returns a writer over db.
func NewUsageWriter(db *gorm.DB, observe OnBatch) *UsageWriter {
	w := &UsageWriter{usage: groupcommit.New("mysql usage", WriterBatchMax, func(ctx context.Context, us []Usage) ([]counted, error) {
		now, errs := NewUsageStats(db, nil).ApplyUsageEach(ctx, us)
		out := make([]counted, len(us))
		for i := range out {
			out[i] = counted{now: now[i], err: errs[i]}
		}
		return out, nil
	})}
	w.usage.Observe = observing(observe, "usage")
	return w
}

// CountUsage counts u once and reports whether this call counted it.
func (w *UsageWriter) CountUsage(ctx context.Context, u Usage) (bool, error) {
	c, err := w.usage.Do(ctx, u)
	if err != nil {
		return false, err
	}
	return c.now, c.err
}

// CountUsages counts each usage once, in as few shared transactions as
// WriterBatchMax allows, and reports of each whether this call counted it,
// or its error (the transaction's it was in, or its own: ApplyUsageEach).
func (w *UsageWriter) CountUsages(ctx context.Context, us []Usage) ([]bool, []error) {
	cs, errs := w.usage.DoAll(ctx, us)
	now := make([]bool, len(us))
	for i, c := range cs {
		now[i] = c.now
		if errs[i] == nil {
			errs[i] = c.err
		}
	}
	return now, errs
}

// Close finishes the transactions under way and stops taking calls.
func (w *UsageWriter) Close() { w.usage.Close() }

func observing(observe OnBatch, batcher string) func(int) {
	if observe == nil {
		return nil
	}
	return func(n int) { observe(batcher, n) }
}
