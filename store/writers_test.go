package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// settledAt says whether the user's DEDUCT entry id is marked settled.
func settledAt(t *testing.T, db *gorm.DB, user, id string) bool {
	t.Helper()
	var n int64
	require.NoError(t, db.Raw("SELECT COUNT(*) FROM agent_ledger WHERE username = ? AND kind = 'DEDUCT' AND entry_id = ? AND settled_at IS NOT NULL",
		user, id).Scan(&n).Error)
	return n == 1
}

// batches counts what a writer reports of each batcher.
type batches struct {
	mu sync.Mutex
	n  map[string]int
}

func (b *batches) observe(batcher string, _ int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n[batcher]++
}

func (b *batches) count(batcher string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n[batcher]
}

// A settled mark rides in the next debits transaction: no commit of its
// own. With no debits to come, it is written alone after the delay, and
// Close writes what is left.
func TestLedgerWriterWritesSettledMarksWithTheNextDebits(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "mia", "", dec("10"))
	require.NoError(t, err)
	seen := &batches{n: map[string]int{}}
	w := store.NewLedgerWriterMarkingAfter(db, seen.observe, time.Hour)
	_, errs := w.ApplyDebits(ctx, []store.Debit{{Username: "mia", ID: "d1", Amount: dec("1")}})
	require.NoError(t, errs[0])
	require.False(t, settledAt(t, db, "mia", "d1"))

	w.NoteSettled(store.EntryKey{Username: "mia", Kind: store.LedgerDeduct, EntryID: "d1"})
	require.False(t, settledAt(t, db, "mia", "d1"), "no statement of its own within the delay")
	_, errs = w.ApplyDebits(ctx, []store.Debit{{Username: "mia", ID: "d2", Amount: dec("1")}})
	require.NoError(t, errs[0])
	require.True(t, settledAt(t, db, "mia", "d1"), "written with d2's transaction")
	require.Equal(t, 2, seen.count("ledger"))
	require.Equal(t, 1, seen.count("settled"))

	w.NoteSettled(store.EntryKey{Username: "mia", Kind: store.LedgerDeduct, EntryID: "d2"})
	w.Close()
	require.True(t, settledAt(t, db, "mia", "d2"), "Close writes the marks left")
	require.Equal(t, 2, seen.count("settled"))

	alone := store.NewLedgerWriter(db, nil)
	defer alone.Close()
	_, errs = alone.ApplyDebits(ctx, []store.Debit{{Username: "mia", ID: "d3", Amount: dec("1")}})
	require.NoError(t, errs[0])
	alone.NoteSettled(store.EntryKey{Username: "mia", Kind: store.LedgerDeduct, EntryID: "d3"})
	require.Eventually(t, func() bool { return settledAt(t, db, "mia", "d3") }, 10*time.Second, 10*time.Millisecond,
		"a lone mark is written after the delay")
}

// Marks whose debits transaction failed go back to the queue and wake the
// writer of marks alone: with no more debits or marks to come, they would
// otherwise wait in memory until Close. The debits go on without them.
func TestLedgerWriterWakesForMarksPutBack(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "noa", "", dec("10"))
	require.NoError(t, err)
	w := store.NewLedgerWriterMarkingAfter(db, nil, time.Hour)
	defer w.Close()
	_, errs := w.ApplyDebits(ctx, []store.Debit{{Username: "noa", ID: "d1", Amount: dec("1")}})
	require.NoError(t, errs[0])
	// Marking d1 settled fails while the poison row is there.
	require.NoError(t, db.Exec("CREATE TABLE mark_poison (id INT PRIMARY KEY)").Error)
	require.NoError(t, db.Exec("INSERT INTO mark_poison VALUES (1)").Error)
	require.NoError(t, db.Exec("CREATE TRIGGER mark_fails BEFORE UPDATE ON agent_ledger FOR EACH ROW"+
		" IF NEW.entry_id = 'd1' AND (SELECT COUNT(*) FROM mark_poison) > 0 THEN"+
		" SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'mark refused'; END IF").Error)

	w.NoteSettled(store.EntryKey{Username: "noa", Kind: store.LedgerDeduct, EntryID: "d1"})
	require.Eventually(t, func() bool { return !w.MarkWriterWoken() }, 10*time.Second, time.Millisecond,
		"the writer takes the mark's wake-up, then waits out its delay")
	_, errs = w.ApplyDebits(ctx, []store.Debit{{Username: "noa", ID: "d2", Amount: dec("1")}})
	require.NoError(t, errs[0], "the debits go on without the marks that failed them")
	require.False(t, settledAt(t, db, "noa", "d1"))
	require.True(t, w.MarkWriterWoken(), "the mark put back wakes the writer")

	require.NoError(t, db.Exec("DELETE FROM mark_poison").Error)
	w.Close()
	require.True(t, settledAt(t, db, "noa", "d1"), "written once MySQL takes it")
}
