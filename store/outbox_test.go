package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// claimSQL is the claim doc/outbox.md describes: the rows due, oldest
// first, skipping those another relay holds.
func claimSQL(table string) string {
	return "SELECT id FROM " + table + " WHERE published_at IS NULL AND available_at <= NOW(6)" +
		" ORDER BY available_at, id LIMIT ? FOR UPDATE SKIP LOCKED"
}

// newOutboxRow returns a row of table, written through its model.
func newOutboxRow(table string, n int) any {
	switch table {
	case "outbox":
		return &store.OutboxMessage{MessageID: fmt.Sprintf("00000000-0000-0000-0000-%012d", n), Domain: "payment-receipt", Payload: []byte("{}"), Headers: "{}"}
	case "object_outbox":
		return &store.ObjectOutbox{ObjectID: uint64(n), Priority: 10}
	}
	panic("no model for outbox table " + table)
}

// Every outbox table has OutboxClaim's columns, each the same as in the
// others, and the same claim index.
func TestOutboxTablesShareTheClaim(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	claim, err := schema.Parse(&store.OutboxClaim{}, &sync.Map{}, db.NamingStrategy)
	require.NoError(t, err)
	require.Len(t, claim.DBNames, 6)
	columns := func(table string) []string {
		var cols []string
		require.NoError(t, db.Raw(`
			SELECT CONCAT_WS(' ', column_name, column_type, is_nullable, IFNULL(column_default, 'NULL'))
			FROM information_schema.columns
			WHERE table_schema = DATABASE() AND table_name = ? AND column_name IN ?
			ORDER BY ordinal_position`, table, claim.DBNames).Scan(&cols).Error)
		return cols
	}
	index := func(table string) string {
		var cols string
		require.NoError(t, db.Raw(`
			SELECT GROUP_CONCAT(column_name ORDER BY seq_in_index) FROM information_schema.statistics
			WHERE table_schema = DATABASE() AND table_name = ? AND index_name = ?`, table, "idx_"+table+"_claim").Scan(&cols).Error)
		return cols
	}
	first := store.OutboxTables[0]
	require.Len(t, columns(first), len(claim.DBNames))
	require.Equal(t, "published_at,available_at,id", index(first))
	for _, table := range store.OutboxTables[1:] {
		require.Equal(t, columns(first), columns(table), "the claim columns of %s and %s", first, table)
		require.Equal(t, index(first), index(table), "the claim index of %s", table)
	}
}

// With the claim index, two relays claiming at once at READ COMMITTED take
// different rows, a business transaction inserting meanwhile is not held
// up, and rows not due (leased, backing off) or published are left alone.
func TestOutboxClaimTakesOnlyWhatItLocks(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	for _, table := range store.OutboxTables {
		t.Run(table, func(t *testing.T) {
			for n := 1; n <= 8; n++ {
				require.NoError(t, db.Create(newOutboxRow(table, n)).Error)
			}
			require.NoError(t, db.Exec("UPDATE "+table+" SET available_at = NOW(6) + INTERVAL 1 MINUTE WHERE id = 1").Error)
			require.NoError(t, db.Exec("UPDATE "+table+" SET published_at = NOW(6) WHERE id = 2").Error)
			var due int
			require.NoError(t, db.Raw("SELECT COUNT(*) FROM "+table+" WHERE available_at > NOW(6) - INTERVAL 1 MINUTE").Scan(&due).Error)
			require.Equal(t, 8, due, "available_at defaults to the insert's time")

			var plan []map[string]any
			require.NoError(t, db.Raw("EXPLAIN "+claimSQL(table), 3).Scan(&plan).Error)
			require.Len(t, plan, 1)
			require.Equal(t, "idx_"+table+"_claim", plan[0]["key"])
			require.NotContains(t, fmt.Sprint(plan[0]["Extra"]), "filesort", "the claim reads the index in order and stops at its limit")

			claimer := func() (*gorm.DB, []uint64) {
				tx := db.WithContext(ctx).Begin(&sql.TxOptions{Isolation: sql.LevelReadCommitted})
				require.NoError(t, tx.Error)
				t.Cleanup(func() { tx.Rollback() })
				var ids []uint64
				require.NoError(t, tx.Raw(claimSQL(table), 3).Scan(&ids).Error)
				return tx, ids
			}
			_, a := claimer()
			_, b := claimer()
			require.Equal(t, []uint64{3, 4, 5}, a)
			require.Equal(t, []uint64{6, 7, 8}, b, "the second relay skips what the first holds")

			insert := db.WithContext(ctx).Begin()
			require.NoError(t, insert.Error)
			defer insert.Rollback()
			require.NoError(t, insert.Exec("SET SESSION innodb_lock_wait_timeout = 1").Error)
			start := time.Now()
			require.NoError(t, insert.Create(newOutboxRow(table, 9)).Error, "an insert waits for no claim")
			require.Less(t, time.Since(start), time.Second)
			require.NoError(t, insert.Commit().Error)
		})
	}
}

// Writing the same key twice adds one row, and the second write says so.
// (MariaDB 10.5+ answers an INSERT ... RETURNING with the row whether it
// was inserted or not: the store must not count that as an insert.)
func TestEnqueueMessageTwiceAddsOnce(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	d, _ := tp.Domain(topology.DomainIdentityMaterial)
	m := topology.IdentityMaterial{Username: "ivy", CertifyID: "c-1", MaterialInfo: "{}"}
	first, err := store.EnqueueMessage(db, d, m, "k-1", "", 0)
	require.NoError(t, err)
	require.True(t, first.Added)
	second, err := store.EnqueueMessage(db, d, m, "k-1", "", 0)
	require.NoError(t, err)
	require.False(t, second.Added, "the row was there already")
	require.Equal(t, first.MessageID, second.MessageID)
	var n int64
	require.NoError(t, db.Model(&store.OutboxMessage{}).Count(&n).Error)
	require.EqualValues(t, 1, n)
}
