package relay

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

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
	p := newPresence(db, "cut")
	require.NoError(t, p.hold(ctx))
	t.Cleanup(func() { p.leave(context.Background()) })
	require.Equal(t, 1, listed(t, db, "cut"))
	require.NoError(t, db.Exec("INSERT INTO outbox (message_id, domain, payload, headers, claimed_by, available_at)"+
		" VALUES ('m1', 'payment-receipt', '{}', '{}', 'cut/7', NOW(6) + INTERVAL 1 HOUR)").Error)

	put, gone, err := rescue(ctx, db, "other", []string{"outbox"})
	require.NoError(t, err)
	require.Empty(t, put, "a live relay's claims stay its own")
	require.Empty(t, gone)

	var id int64
	require.NoError(t, db.Raw("SELECT IS_USED_LOCK(?)", p.lock).Scan(&id).Error)
	require.NoError(t, db.Exec("KILL ?", id).Error)
	require.Eventually(t, func() bool {
		var free int
		return db.Raw("SELECT IS_FREE_LOCK(?)", p.lock).Scan(&free).Error == nil && free == 1
	}, time.Minute, 10*time.Millisecond)

	put, gone, err = rescue(ctx, db, "other", []string{"outbox"})
	require.NoError(t, err)
	require.Equal(t, map[string]int{"outbox": 1}, put)
	require.Equal(t, []string{"cut"}, gone)
	require.Zero(t, listed(t, db, "cut"))
	var claimed *string
	require.NoError(t, db.Raw("SELECT claimed_by FROM outbox WHERE message_id = 'm1'").Scan(&claimed).Error)
	require.Nil(t, claimed, "put back for the next claim")

	require.NoError(t, p.hold(ctx), "the lock and the listing are taken again")
	require.Equal(t, 1, listed(t, db, "cut"))
	require.NoError(t, p.hold(ctx), "and kept")
}

// Two relays of one owner name cannot both say they are alive: the second
// is refused, and the first keeps its lock and its listing.
func TestPresenceOfAnOwnerIsHeldOnce(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	first, second := newPresence(db, "twin"), newPresence(db, "twin")
	require.NoError(t, first.hold(ctx))
	t.Cleanup(func() { first.leave(context.Background()) })
	require.ErrorIs(t, second.hold(ctx), errOwnerLive)

	put, gone, err := rescue(ctx, db, "other", []string{"outbox"})
	require.NoError(t, err)
	require.Empty(t, put)
	require.Empty(t, gone)
	require.Equal(t, 1, listed(t, db, "twin"))

	first.leave(ctx)
	require.Zero(t, listed(t, db, "twin"), "a relay that stops unlists itself")
	require.NoError(t, second.hold(ctx), "and its name is free again")
	second.leave(ctx)
}
