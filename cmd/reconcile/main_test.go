package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"testing"

	"github.com/eisland/isle/store/storetest"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// testEnv is the environment of a reconciler on the test's own database
// and Redis key prefix.
func testEnv(t *testing.T) map[string]string {
	t.Helper()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	dsn, err := mysql.ParseDSN(storetest.MySQLServerDSN())
	require.NoError(t, err)
	dsn.DBName = db.Migrator().CurrentDatabase()
	host, port, err := net.SplitHostPort(storetest.RedisAddr())
	require.NoError(t, err)
	return map[string]string{
		"MYSQL_DSN": dsn.FormatDSN(), "REDIS_HOST": host, "REDIS_PORT": port, "REDIS_KEY_PREFIX": r.Keys().Prefix(),
		"LOG_LEVEL": "error", "OUTBOX_PURGE_RETENTION": "36h",
	}
}

// reconcile -once -json prints durations as Go durations ("36h0m0s"), as
// the log does, not as integer nanoseconds.
func TestReconcileOnceJSONPrintsDurationsAsGoDurations(t *testing.T) {
	t.Parallel()
	env := testEnv(t)
	var out bytes.Buffer
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	require.NoError(t, run(context.Background(), []string{"-once", "outbox-purge", "-json"}, lookup, &out))
	var printed struct {
		Job    string         `json:"job"`
		Result map[string]any `json:"result"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &printed), "%s", out.String())
	require.Equal(t, "outbox-purge", printed.Job)
	require.Equal(t, "36h0m0s", printed.Result["retention"], "%s", out.String())
}
