package main

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// islectl outbox parked lists what the relay parked, with why; replay makes
// the rows named (or --all of a table) due again, once.
func TestOutboxParkedListsAndReplays(t *testing.T) {
	t.Parallel()
	dsn := storetest.MySQLDSN(t)
	db, err := store.OpenMySQL(store.MySQLConfig{DSN: dsn})
	require.NoError(t, err)
	t.Cleanup(func() { store.CloseMySQL(db) })
	_, err = store.Migrate(context.Background(), db)
	require.NoError(t, err)
	require.NoError(t, db.Exec(`INSERT INTO outbox (id, message_id, domain, payload, headers, attempts, last_error, parked_at, available_at) VALUES
		(7, 'm7', 'no-such-domain', '{}', '{}', 1, 'relay: outbox 7: no topology domain "no-such-domain"', NOW(6), ?),
		(8, 'm8', 'payment-receipt', '{}', '{}', 0, NULL, NULL, NOW(6))`, store.OutboxParkedUntil).Error)
	env := map[string]string{"MYSQL_DSN": dsn}
	islectl := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(context.Background(), args, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, &out, io.Discard)
		return out.String(), err
	}

	out, err := islectl("outbox", "parked")
	require.NoError(t, err)
	require.Regexp(t, `outbox\s+7\s+no-such-domain m7\s+1\s+\S+\s+\S+\s+relay: outbox 7: no topology domain`, out)
	require.NotContains(t, out, "m8", "a row waiting to be published is not parked")
	require.Contains(t, out, "outbox: 1 parked\nobject_outbox: 0 parked\n")

	_, err = islectl("outbox", "replay")
	require.ErrorIs(t, err, errUsage)
	_, err = islectl("outbox", "replay", "x7")
	require.ErrorIs(t, err, errUsage)
	out, err = islectl("outbox", "replay", "7", "8")
	require.NoError(t, err)
	require.Contains(t, out, "1 parked rows of outbox due again")
	out, err = islectl("outbox", "replay", "-all")
	require.NoError(t, err)
	require.Contains(t, out, "0 parked rows of outbox due again", "replayed once")
	var row store.OutboxMessage
	require.NoError(t, db.Where("id = 7").Take(&row).Error)
	require.Nil(t, row.ParkedAt)
	require.Zero(t, row.Attempts)
}
