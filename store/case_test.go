package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
)

// Usernames and ids are compared byte for byte in MySQL as they are in
// Redis keys: under a case-insensitive collation "Alice" initialised a
// second hot balance from alice's account, and "Req1" after "req1" failed
// its ledger insert forever.
func TestKeysAreCaseSensitive(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "alice", "", dec("10"))
	require.NoError(t, err)

	_, err = store.NewBalances(db, r).Ensure(ctx, "Alice")
	require.ErrorIs(t, err, store.ErrUnknownUser, "Alice is not alice")

	res, err := store.NewLedger(db).ApplyDebits(ctx, []store.Debit{
		{Username: "alice", ID: "req1", Amount: dec("1")},
		{Username: "alice", ID: "Req1", Amount: dec("2")},
	})
	require.NoError(t, err)
	require.True(t, res[0].Applied)
	require.True(t, res[1].Applied, "a different request id")
	require.Equal(t, "7.00000000", account(t, db, "alice").BalanceFen.StringFixed(8))

	day := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	counted, err := store.NewUsageStats(db, nil).ApplyUsage(ctx, []store.Usage{
		{RequestID: "alice:u1", Model: "m", Day: day, InputTokens: 1},
		{RequestID: "alice:U1", Model: "m", Day: day, InputTokens: 1},
	})
	require.NoError(t, err)
	require.Equal(t, []bool{true, true}, counted)

	_, err = store.NewAccounts(db).Create(ctx, "Alice", "", dec("5"))
	require.NoError(t, err, "a different user")
}

// Keys that differ only by trailing spaces are different keys, in MySQL as
// in Go and in Redis: under a PAD SPACE collation the ledger's locking read
// found "msg:X" for "msg:X ", the Go lookup missed it, and the insert
// failed on the unique key, batch after batch; a credit "c " was taken for
// "c" and never applied.
func TestKeysThatDifferOnlyByTrailingSpaces(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "alice", "", dec("10"))
	require.NoError(t, err)

	ledger := store.NewLedger(db)
	for _, id := range []string{"msg:X", "msg:X ", "msg:X  "} {
		res, err := ledger.ApplyDebits(ctx, []store.Debit{{Username: "alice", ID: id, Amount: dec("1"), SelfSettled: true}})
		require.NoError(t, err, "%q", id)
		require.True(t, res[0].Applied, "%q is a deduction of its own", id)
	}
	res, err := ledger.ApplyDebits(ctx, []store.Debit{{Username: "alice ", ID: "d1", Amount: dec("1")}})
	require.NoError(t, err)
	require.ErrorIs(t, res[0].Err, store.ErrUnknownUser, `"alice " is not alice`)

	b := store.NewBalances(db, r)
	for _, id := range []string{"c", "c "} {
		out, err := b.Credit(ctx, store.Credit{Username: "alice", ID: id, Amount: dec("5")})
		require.NoError(t, err, "%q", id)
		require.True(t, out.Applied, "%q is a credit of its own", id)
	}
	require.Equal(t, "17.00000000", account(t, db, "alice").BalanceFen.StringFixed(8))

	day := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	counted, err := store.NewUsageStats(db, nil).ApplyUsage(ctx, []store.Usage{{RequestID: "alice:u1", Model: "m", Day: day, InputTokens: 1}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, counted)
	counted, err = store.NewUsageStats(db, nil).ApplyUsage(ctx, []store.Usage{{RequestID: "alice:u1 ", Model: "m", Day: day, InputTokens: 1}})
	require.NoError(t, err)
	require.Equal(t, []bool{true}, counted)
}

// A ledger or usage insert that fails on its unique key, though the locking
// read found no row of the key (their comparisons disagree), can never
// succeed by retrying: the entry gets a permanent error of its own (the
// consumer sends its message to the DLQ) and the others of its transaction
// are written, rather than all of them failing, retry after retry. A
// trigger that renames one entry's key to a key taken stands for the
// disagreement.
func TestDuplicateKeyIsNeverRetriedForever(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "alice", "", dec("10"))
	require.NoError(t, err)
	ledger := store.NewLedger(db)
	_, err = ledger.ApplyDebits(ctx, []store.Debit{{Username: "alice", ID: "taken", Amount: dec("1")}})
	require.NoError(t, err)
	day := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	usage := store.NewUsageStats(db, nil)
	_, err = usage.ApplyUsage(ctx, []store.Usage{{RequestID: "taken", Model: "m", Day: day}})
	require.NoError(t, err)
	require.NoError(t, db.Exec("CREATE TRIGGER ledger_poison BEFORE INSERT ON agent_ledger FOR EACH ROW"+
		" IF NEW.entry_id = 'poison' THEN SET NEW.entry_id = 'taken'; END IF").Error)
	require.NoError(t, db.Exec("CREATE TRIGGER usage_poison BEFORE INSERT ON agent_usage_event FOR EACH ROW"+
		" IF NEW.request_id = 'poison' THEN SET NEW.request_id = 'taken'; END IF").Error)

	res, err := ledger.ApplyDebits(ctx, []store.Debit{
		{Username: "alice", ID: "d1", Amount: dec("1")},
		{Username: "alice", ID: "poison", Amount: dec("1")},
		{Username: "alice", ID: "d2", Amount: dec("1")},
	})
	require.NoError(t, err, "one entry's duplicate key fails that entry alone")
	require.True(t, res[0].Applied)
	require.ErrorIs(t, res[1].Err, store.ErrKeyMismatch)
	require.True(t, res[2].Applied)
	require.Equal(t, "7.00000000", account(t, db, "alice").BalanceFen.StringFixed(8))

	counted, errs := usage.ApplyUsageEach(ctx, []store.Usage{
		{RequestID: "u1", Model: "m", Day: day, InputTokens: 1},
		{RequestID: "poison", Model: "m", Day: day, InputTokens: 1},
		{RequestID: "u2", Model: "m", Day: day, InputTokens: 1},
	})
	require.Equal(t, []bool{true, false, true}, counted)
	require.NoError(t, errs[0])
	require.ErrorIs(t, errs[1], store.ErrKeyMismatch)
	require.NoError(t, errs[2])
}
