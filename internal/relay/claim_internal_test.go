package relay

import (
	"context"
	"testing"
	"time"

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
	claim := db.WithContext(ctx).Begin(readCommitted)
	require.NoError(t, claim.Error)
	defer claim.Rollback()
	var ids []uint64
	require.NoError(t, claim.Raw(claimSQL("outbox"), 100).Scan(&ids).Error)
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
	other := db.WithContext(ctx).Begin(readCommitted)
	require.NoError(t, other.Error)
	defer other.Rollback()
	var next []uint64
	began := time.Now()
	require.NoError(t, other.Raw(claimSQL("outbox"), 100).Scan(&next).Error)
	require.Len(t, next, 1, "a second claim skips the locked rows")
	require.Less(t, time.Since(began), 5*time.Second, "SKIP LOCKED does not wait")
}
