package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/pressly/goose/v3"
	"github.com/stretchr/testify/require"
)

// A request's usage key (RequestKey) never equals a message's
// (ForeignKey), in the plain or the hashed form, whatever the user is
// called; a request counted by an older build under its id alone is still
// found by its key now.
func TestUsageKeysOfRequestsStayApartAndFindTheirOldRows(t *testing.T) {
	t.Parallel()
	require.Equal(t, "req:msg:X", store.RequestKey("msg:X", 255))
	require.NotEqual(t, store.RequestKey("X", 8), store.ForeignKey("X", 8), "hashed forms differ too")
	require.Regexp(t, `^sha256:[0-9a-f]{64}$`, store.RequestKey("long-request-id", 8))

	db := storetest.MySQL(t)
	ctx := context.Background()
	usage := store.NewUsageStats(db, nil)
	day := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	count := func(keys ...string) []bool {
		t.Helper()
		us := make([]store.Usage, len(keys))
		for i, k := range keys {
			us[i] = store.Usage{RequestID: k, Model: "m", Day: day}
		}
		counted, err := usage.ApplyUsage(ctx, us)
		require.NoError(t, err)
		return counted
	}
	// Rows of an older build: a request by its id, a message by its key.
	require.Equal(t, []bool{true, true}, count("alice:r1", "msg:X"))
	require.Equal(t, []bool{false, true, true}, count(store.RequestKey("alice:r1", 255), store.RequestKey("msg:X", 255), store.ForeignKey("Y", 255)),
		"alice's request was counted; user msg's request X is not message X")
}

// The migration that gave request keys their prefix moves only the old keys
// that begin as the new ones do (the requests of a user named "req"), so
// that no old key equals a new one.
func TestMigrationGivesOnlyAmbiguousOldKeysTheirNewForm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := store.OpenMySQL(store.MySQLConfig{DSN: storetest.MySQLDSN(t)})
	require.NoError(t, err)
	defer store.CloseMySQL(db)
	sqlDB, err := db.DB()
	require.NoError(t, err)
	p, err := goose.NewProvider(goose.DialectMySQL, sqlDB, store.MigrationsFS(), goose.WithDisableGlobalRegistry(true))
	require.NoError(t, err)
	_, err = p.UpTo(ctx, 25)
	require.NoError(t, err)
	for _, id := range []string{"alice:r1", "req:a:b", "msg:X"} {
		require.NoError(t, db.Exec("INSERT INTO agent_usage_event (request_id, model_name) VALUES (?, 'm')", id).Error)
	}
	_, err = p.UpTo(ctx, 26)
	require.NoError(t, err)
	var ids []string
	require.NoError(t, db.Raw("SELECT request_id FROM agent_usage_event ORDER BY request_id").Scan(&ids).Error)
	require.Equal(t, []string{"alice:r1", "msg:X", "req:req:a:b"}, ids)

	usage := store.NewUsageStats(db, nil)
	counted, err := usage.ApplyUsage(ctx, []store.Usage{
		{RequestID: store.RequestKey("a:b", 255), Model: "m", Day: time.Now()},     // user a, request b
		{RequestID: store.RequestKey("req:a:b", 255), Model: "m", Day: time.Now()}, // user req, request a:b
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, false}, counted)
}
