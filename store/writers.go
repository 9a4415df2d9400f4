package store

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/eisland/isle/internal/kit/groupcommit"
	"gorm.io/gorm"
)

// WriterBatchMax is the most items one group-committed transaction (or
// Redis pipeline) of a writer carries.
const WriterBatchMax = 100

// OnBatch is told the size of each transaction a writer commits, or
// pipeline it sends, by batcher ("ledger", "settled", "usage",
// "redis-settle", "redis-usage"); nil tells nobody.
type OnBatch func(batcher string, n int)

// LedgerWriter applies debits for concurrent consumers, group-committed:
// while one transaction commits, the calls that arrive queue up and go
// together in the next, so N handlers share one transaction instead of N.
// It also records the entries whose Redis side is done (NoteSettled)
// without a commit of their own: their marks ride in the next debits
// transaction, or go in one statement when none comes within markDelay.
// Close it after the consumers stopped.
type LedgerWriter struct {
	ledger  *Ledger
	debits  *groupcommit.Batcher[Debit, DebitResult]
	marks   markQueue
	observe func(int)     // told each batch of marks written
	delay   time.Duration // markDelay
	stop    chan struct{}
	exited  chan struct{}
	once    sync.Once
}

// markDelay is how long a settled mark waits for a debits transaction to
// carry it before it is written alone; markRetry is the pause after such
// a write failed.
const (
	markDelay = 20 * time.Millisecond
	markRetry = time.Second
)

// markQueueMax bounds the marks kept while MySQL cannot take them: beyond
// it the oldest are dropped, and balance-sync settles their entries again
// (settle.lua answers SETTLED and changes nothing) and marks them.
const markQueueMax = 10_000

// NewLedgerWriter returns a writer over db.
func NewLedgerWriter(db *gorm.DB, observe OnBatch) *LedgerWriter {
	return newLedgerWriter(db, observe, markDelay)
}

func newLedgerWriter(db *gorm.DB, observe OnBatch, delay time.Duration) *LedgerWriter {
	w := &LedgerWriter{ledger: NewLedger(db), observe: observing(observe, "settled"), delay: delay,
		marks: markQueue{wake: make(chan struct{}, 1)}, stop: make(chan struct{}), exited: make(chan struct{})}
	w.debits = groupcommit.New("mysql debits", WriterBatchMax, w.applyDebits)
	w.debits.Observe = observing(observe, "ledger")
	go w.writeMarks()
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

// NoteSettled records that the Redis balance reflects the entries: their
// settled marks are written with the next debits transaction, or alone
// soon after. It does not wait for them. A mark that is never written (the
// process dies first, MySQL is away too long) leaves its entry to
// balance-sync, which settles it again, an idempotent step (doc/money.md).
func (w *LedgerWriter) NoteSettled(entries ...EntryKey) {
	w.marks.add(entries)
}

// applyDebits is the debits' flush: with the marks waiting, in one
// transaction; should that fail, the marks wait on and the debits go as
// ApplyDebits alone would, so that no mark can fail a debit.
func (w *LedgerWriter) applyDebits(ctx context.Context, ds []Debit) ([]DebitResult, error) {
	if marks := w.marks.take(WriterBatchMax); len(marks) > 0 {
		rs, err := w.ledger.applyDebitsMarking(ctx, ds, marks)
		if err == nil {
			w.marked(len(marks))
			return rs, nil
		}
		w.marks.putBack(marks)
	}
	return w.ledger.ApplyDebits(ctx, ds)
}

// writeMarks writes the marks no debits transaction carried within
// markDelay of their arrival, until Close; then whatever is left.
func (w *LedgerWriter) writeMarks() {
	defer close(w.exited)
	defer w.writeMarksAlone()
	for {
		select {
		case <-w.marks.wake:
		case <-w.stop:
			return
		}
		if !w.sleep(w.delay) { // a debits transaction may take them meanwhile
			return
		}
		if !w.writeMarksAlone() {
			if !w.sleep(markRetry) {
				return
			}
			w.marks.signal()
		}
	}
}

// sleep waits d; false when Close came first.
func (w *LedgerWriter) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-w.stop:
		return false
	}
}

// writeMarksAlone writes the marks waiting, in statements of their own.
// False when MySQL refused them: they wait for the next try.
func (w *LedgerWriter) writeMarksAlone() bool {
	for {
		marks := w.marks.take(WriterBatchMax)
		if len(marks) == 0 {
			return true
		}
		ctx, cancel := context.WithTimeout(context.Background(), batchWriteTimeout)
		err := w.ledger.MarkSettled(ctx, marks...)
		cancel()
		if err != nil {
			w.marks.putBack(marks)
			return false
		}
		w.marked(len(marks))
	}
}

func (w *LedgerWriter) marked(n int) {
	if w.observe != nil {
		w.observe(n)
	}
}

// batchWriteTimeout bounds a write of marks alone.
const batchWriteTimeout = 10 * time.Second

// Close finishes the transactions under way, writes the marks left, and
// stops taking calls.
func (w *LedgerWriter) Close() {
	w.debits.Close()
	w.once.Do(func() { close(w.stop) })
	<-w.exited
}

// markQueue holds settled marks on their way to MySQL.
type markQueue struct {
	mu   sync.Mutex
	keys []EntryKey
	wake chan struct{} // holds a token once marks arrived
}

func (q *markQueue) add(keys []EntryKey) {
	if len(keys) == 0 {
		return
	}
	q.mu.Lock()
	q.keys = append(q.keys, keys...)
	if over := len(q.keys) - markQueueMax; over > 0 {
		q.keys = append(q.keys[:0], q.keys[over:]...)
	}
	q.mu.Unlock()
	q.signal()
}

// signal wakes the writer of marks alone, unless it is awake already.
func (q *markQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take removes and returns up to n marks, the oldest first.
func (q *markQueue) take(n int) []EntryKey {
	q.mu.Lock()
	defer q.mu.Unlock()
	n = min(n, len(q.keys))
	if n == 0 {
		return nil
	}
	out := slices.Clone(q.keys[:n])
	q.keys = append(q.keys[:0], q.keys[n:]...)
	return out
}

// putBack returns marks a write could not take, ahead of the newer ones,
// and wakes the writer of marks alone: with no more debits coming, they
// would otherwise wait for the next mark.
func (q *markQueue) putBack(keys []EntryKey) {
	q.mu.Lock()
	q.keys = append(keys, q.keys...)
	if over := len(q.keys) - markQueueMax; over > 0 {
		q.keys = q.keys[over:]
	}
	q.mu.Unlock()
	q.signal()
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
