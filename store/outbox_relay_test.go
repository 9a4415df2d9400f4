package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// While a claim's transaction holds its rows locked, a business
// transaction can still insert into the outbox: the claim runs at READ
// COMMITTED, so it locks the rows it read and no gap. Timing-free: the
// insert runs with a 1 s lock wait, so a gap lock shows as error 1205, not
// as a slow insert on a busy machine. (At REPEATABLE READ this test fails.)
func TestAnOpenClaimDoesNotLockOutInserts(t *testing.T) {
	db := storetest.MySQL(t)
	for range 50 {
		require.NoError(t, db.Exec("INSERT INTO outbox (message_id, domain, payload, headers) VALUES (?, 'payment-receipt', '{}', '{}')",
			uuid.NewString()).Error)
	}
	ctx := context.Background()
	claim := db.WithContext(ctx).Begin(store.ReadCommitted)
	require.NoError(t, claim.Error)
	defer claim.Rollback()
	var ids []uint64
	require.NoError(t, claim.Raw(store.ClaimSQL("outbox"), 100).Scan(&ids).Error)
	require.Len(t, ids, 50, "the claim holds every pending row")

	err := db.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		if err := conn.Exec("SET SESSION innodb_lock_wait_timeout = 1").Error; err != nil {
			return err
		}
		return conn.Transaction(func(tx *gorm.DB) error {
			return tx.Exec("INSERT INTO outbox (message_id, domain, payload, headers) VALUES (?, 'payment-receipt', '{}', '{}')",
				uuid.NewString()).Error
		})
	})
	require.NoError(t, err, "a business insert waited for the claim's locks")

	// The claimed rows themselves stay locked to a second claim, which
	// skips them and takes only the new row.
	other := db.WithContext(ctx).Begin(store.ReadCommitted)
	require.NoError(t, other.Error)
	defer other.Rollback()
	var next []uint64
	began := time.Now()
	require.NoError(t, other.Raw(store.ClaimSQL("outbox"), 100).Scan(&next).Error)
	require.Len(t, next, 1, "a second claim skips the locked rows")
	require.Less(t, time.Since(began), 5*time.Second, "SKIP LOCKED does not wait")
}

func listed(t *testing.T, db *gorm.DB, owner string) int {
	t.Helper()
	var n int
	require.NoError(t, db.Raw("SELECT COUNT(*) FROM outbox_relay WHERE owner = ?", owner).Scan(&n).Error)
	return n
}

// A relay whose lock connection MySQL cut (a restart, the network) takes
// its lock again and lists itself again at its next check; meanwhile the
// others see it gone, and put back what it had claimed.
func TestPresenceIsTakenAgainAfterItsConnectionIsCut(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	p := store.NewRelayPresence(db, "cut")
	require.NoError(t, p.Hold(ctx))
	t.Cleanup(func() { p.Leave(context.Background()) })
	out := store.NewOutbox(db)
	require.Equal(t, 1, listed(t, db, "cut"))
	require.NoError(t, db.Exec("INSERT INTO outbox (message_id, domain, payload, headers, claimed_by, available_at)"+
		" VALUES ('m1', 'payment-receipt', '{}', '{}', 'cut/7', NOW(6) + INTERVAL 1 HOUR)").Error)

	put, gone, err := out.Rescue(ctx, "other", []string{"outbox"})
	require.NoError(t, err)
	require.Empty(t, put, "a live relay's claims stay its own")
	require.Empty(t, gone)

	var id int64
	require.NoError(t, db.Raw("SELECT IS_USED_LOCK(?)", p.LockName()).Scan(&id).Error)
	require.NoError(t, db.Exec("KILL ?", id).Error)
	require.Eventually(t, func() bool {
		var free int
		return db.Raw("SELECT IS_FREE_LOCK(?)", p.LockName()).Scan(&free).Error == nil && free == 1
	}, time.Minute, 10*time.Millisecond)

	put, gone, err = out.Rescue(ctx, "other", []string{"outbox"})
	require.NoError(t, err)
	require.Equal(t, map[string]int{"outbox": 1}, put)
	require.Equal(t, []string{"cut"}, gone)
	require.Zero(t, listed(t, db, "cut"))
	var claimed *string
	require.NoError(t, db.Raw("SELECT claimed_by FROM outbox WHERE message_id = 'm1'").Scan(&claimed).Error)
	require.Nil(t, claimed, "put back for the next claim")

	require.NoError(t, p.Hold(ctx), "the lock and the listing are taken again")
	require.Equal(t, 1, listed(t, db, "cut"))
	require.NoError(t, p.Hold(ctx), "and kept")
}

// Two relays of one owner name cannot both say they are alive: the second
// is refused, and the first keeps its lock and its listing.
func TestPresenceOfAnOwnerIsHeldOnce(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	first, second := store.NewRelayPresence(db, "twin"), store.NewRelayPresence(db, "twin")
	require.NoError(t, first.Hold(ctx))
	t.Cleanup(func() { first.Leave(context.Background()) })
	require.ErrorIs(t, second.Hold(ctx), store.ErrRelayOwnerLive)
	out := store.NewOutbox(db)

	put, gone, err := out.Rescue(ctx, "other", []string{"outbox"})
	require.NoError(t, err)
	require.Empty(t, put)
	require.Empty(t, gone)
	require.Equal(t, 1, listed(t, db, "twin"))

	first.Leave(ctx)
	require.Zero(t, listed(t, db, "twin"), "a relay that stops unlists itself")
	require.NoError(t, second.Hold(ctx), "and its name is free again")
	second.Leave(ctx)
}

// A claim leases the rows due to it; a mark by another claim is fenced;
// the rows published and the rows left are what the operator's reads say.
func TestOutboxClaimMarkAndWhatIsLeft(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	out := store.NewOutbox(db)
	left, err := out.Pending(ctx, "outbox")
	require.NoError(t, err)
	require.False(t, left)
	for range 3 {
		require.NoError(t, db.Exec("INSERT INTO outbox (message_id, domain, payload, headers) VALUES (?, 'payment-receipt', '{}', '{}')",
			uuid.NewString()).Error)
	}
	rows, err := out.ClaimMessages(ctx, "r/1", 2, time.Minute)
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.Equal(t, 1, rows[0].Attempts, "this claim counts")
	rest, err := out.ClaimMessages(ctx, "r/2", 10, time.Minute)
	require.NoError(t, err)
	require.Len(t, rest, 1, "leased rows are not due")

	marked, err := out.MarkPublished(ctx, "outbox", "r/2", []uint64{rows[0].ID, rest[0].ID})
	require.NoError(t, err)
	require.Equal(t, 1, marked, "r/2 marks only its own row")
	held, err := out.Retry(ctx, "outbox", "r/1", rows[1].ID, "nack", time.Hour)
	require.NoError(t, err)
	require.True(t, held)
	held, err = out.Park(ctx, "outbox", "r/1", rows[1].ID, "bad")
	require.NoError(t, err)
	require.False(t, held, "no longer r/1's after its retry")
	marked, err = out.MarkPublished(ctx, "outbox", "r/1", []uint64{rows[0].ID})
	require.NoError(t, err)
	require.Equal(t, 1, marked)

	left, err = out.Pending(ctx, "outbox")
	require.NoError(t, err)
	require.True(t, left, "the row backed off")
	span, err := out.PublishedSpan(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, span.Rows)
	require.GreaterOrEqual(t, span.First, int64(1))
	require.GreaterOrEqual(t, span.Span, time.Duration(0))
	b, err := out.Backlog(ctx, "outbox")
	require.NoError(t, err)
	require.Zero(t, b.Parked)
	require.Positive(t, b.Oldest)

	_, err = out.MarkPublished(ctx, "outbox; DROP TABLE outbox", "r/1", []uint64{1})
	require.ErrorContains(t, err, "is not an outbox table")
}
