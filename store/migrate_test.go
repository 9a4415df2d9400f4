package store_test

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// The contract's tables, plus the ones Isle adds for idempotency.
var specTables = []string{
	"user_account", "agent_ledger", "agent_model_pricing", "agent_usage_stats", "agent_usage_event",
	"payment_order", "payment_notify_record",
	"email_dispatch_dlq_log", "payment_dlq_log", "agent_billing_dlq_log", "mini_game_score_dlq_log",
	"identity_material_dlq_log",
	"stored_object", "object_outbox", "object_replication_task", "object_replication_log",
	"identity_verification", "mini_game_score", "outbox",
}

// schemaSnapshot describes every column and index of the database.
func schemaSnapshot(t *testing.T, db *gorm.DB) []string {
	t.Helper()
	var rows []string
	require.NoError(t, db.Raw(`
		SELECT CONCAT_WS(' ', table_name, column_name, column_type, is_nullable, IFNULL(column_default, 'NULL'))
		FROM information_schema.columns WHERE table_schema = DATABASE()
		UNION ALL
		SELECT CONCAT_WS(' ', table_name, index_name, non_unique, seq_in_index, column_name)
		FROM information_schema.statistics WHERE table_schema = DATABASE()
		ORDER BY 1`).Scan(&rows).Error)
	return rows
}

func TestMigrateEmptyDatabaseThenAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := store.OpenMySQL(store.MySQLConfig{DSN: storetest.MySQLDSN(t)})
	require.NoError(t, err)
	defer store.CloseMySQL(db)

	require.ErrorIs(t, store.CheckSchema(ctx, db), store.ErrSchemaOutdated, "an empty database is older than the binary")
	err = store.CheckSchema(ctx, db)
	require.ErrorContains(t, err, "islectl migrate")

	applied, err := store.Migrate(ctx, db)
	require.NoError(t, err)
	require.NotEmpty(t, applied)
	var tables []string
	require.NoError(t, db.Raw("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()").Scan(&tables).Error)
	for _, want := range specTables {
		require.Contains(t, tables, want)
	}
	require.NoError(t, store.CheckSchema(ctx, db))
	before := schemaSnapshot(t, db)

	applied, err = store.Migrate(ctx, db)
	require.NoError(t, err)
	require.Empty(t, applied, "a second run applies nothing")
	require.Equal(t, before, schemaSnapshot(t, db), "a second run changes nothing")
	current, latest, err := store.SchemaVersion(ctx, db)
	require.NoError(t, err)
	require.Equal(t, latest, current)
}

func TestConcurrentMigratorsApplyOnce(t *testing.T) {
	t.Parallel()
	dsn := storetest.MySQLDSN(t)
	errs := make(chan error, 3)
	counts := make(chan int, 3)
	for range 3 {
		go func() {
			db, err := store.OpenMySQL(store.MySQLConfig{DSN: dsn})
			if err != nil {
				errs <- err
				return
			}
			defer store.CloseMySQL(db)
			applied, err := store.Migrate(context.Background(), db)
			counts <- len(applied)
			errs <- err
		}()
	}
	total := 0
	for range 3 {
		require.NoError(t, <-errs)
		total += <-counts
	}
	files, err := fs.Glob(store.MigrationsFS(), "*.sql")
	require.NoError(t, err)
	require.Equal(t, len(files), total, "each migration applied by exactly one migrator") // versions may have gaps
}

// Every gorm model maps onto columns that exist.
func TestModelsMatchTheSchema(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	for _, m := range store.Models() {
		s, err := schema.Parse(m, &sync.Map{}, db.NamingStrategy)
		require.NoError(t, err)
		var cols []string
		require.NoError(t, db.Raw("SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ?", s.Table).Scan(&cols).Error)
		require.NotEmpty(t, cols, "table %s", s.Table)
		for _, f := range s.Fields {
			if f.DBName != "" {
				require.Contains(t, cols, f.DBName, "%s.%s", s.Table, f.DBName)
			}
		}
	}
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	for _, d := range tp.Domains() {
		table := d.DLQTable
		if table == "" {
			continue
		}
		var cols []string
		require.NoError(t, db.Raw("SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = ?", table).Scan(&cols).Error)
		s, err := schema.Parse(&store.DeadLetter{}, &sync.Map{}, db.NamingStrategy)
		require.NoError(t, err)
		for _, f := range s.Fields {
			require.Contains(t, cols, f.DBName, "%s.%s", table, f.DBName)
		}
	}
}

// Unique keys that idempotency relies on exist.
func TestIdempotencyKeys(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	var uniques []string
	require.NoError(t, db.Raw(`
		SELECT CONCAT(table_name, '(', GROUP_CONCAT(column_name ORDER BY seq_in_index), ')')
		FROM information_schema.statistics
		WHERE table_schema = DATABASE() AND non_unique = 0 AND index_name <> 'PRIMARY'
		GROUP BY table_name, index_name`).Scan(&uniques).Error)
	for _, want := range []string{
		"user_account(username)",
		"agent_ledger(username,kind,entry_id)",
		"agent_model_pricing(model_name)",
		"agent_usage_stats(model_name,stat_date)",
		"payment_order(out_trade_no)",
		"payment_notify_record(channel,out_trade_no,transaction_id,trade_state)",
		"object_replication_task(outbox_id)",
		"identity_verification(certify_id)",
		"mini_game_score(user_id,game_id)",
		"outbox(message_id)",
	} {
		require.Contains(t, uniques, want)
	}
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	for _, d := range tp.Domains() {
		if d.DLQTable != "" {
			require.Contains(t, uniques, d.DLQTable+"(dedup_key)")
		}
	}
	// The balance can never go below zero, whoever writes it.
	require.NoError(t, db.Exec("INSERT INTO user_account (username, balance_fen) VALUES ('u', 1)").Error)
	err = db.Exec("UPDATE user_account SET balance_fen = balance_fen - 2 WHERE username = 'u'").Error
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "ck_user_account_balance") || strings.Contains(err.Error(), "CONSTRAINT"), err.Error())
}
