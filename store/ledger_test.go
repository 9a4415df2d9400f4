package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

func account(t *testing.T, db *gorm.DB, user string) store.UserAccount {
	t.Helper()
	u, err := store.NewAccounts(db).Get(context.Background(), user)
	require.NoError(t, err)
	return u
}

func ledgerSum(t *testing.T, db *gorm.DB, user string) decimal.Decimal {
	t.Helper()
	var sum decimal.NullDecimal
	require.NoError(t, db.Raw("SELECT SUM(amount_fen) FROM agent_ledger WHERE username = ?", user).Scan(&sum).Error)
	return sum.Decimal
}

func TestApplyDebitsOnceEach(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "alice", "", dec("10"))
	require.NoError(t, err)
	_, err = store.NewAccounts(db).Create(ctx, "bob", "", dec("1"))
	require.NoError(t, err)

	res, err := store.NewLedger(db).ApplyDebits(ctx, []store.Debit{
		{Username: "alice", ID: "d1", Amount: dec("2.5")},
		{Username: "bob", ID: "d1", Amount: dec("0.25")},  // ids are per user
		{Username: "alice", ID: "d1", Amount: dec("2.5")}, // twice in one batch
		{Username: "ghost", ID: "d9", Amount: dec("1")},
		{Username: "bob", ID: "d2", Amount: dec("3")}, // more than bob has
	})
	require.NoError(t, err)
	require.True(t, res[0].Applied)
	require.True(t, res[1].Applied)
	require.False(t, res[2].Applied)
	require.Equal(t, res[0].Seq, res[2].Seq)
	require.ErrorIs(t, res[3].Err, store.ErrUnknownUser)
	require.True(t, res[4].Applied)
	require.Equal(t, "0.75000000", res[4].Amount.StringFixed(8), "capped at what MySQL has")
	require.Equal(t, "2.25000000", res[4].Shortfall.StringFixed(8))

	again, err := store.NewLedger(db).ApplyDebits(ctx, []store.Debit{{Username: "alice", ID: "d1", Amount: dec("2.5")}})
	require.NoError(t, err)
	require.False(t, again[0].Applied, "a redelivery changes nothing")
	require.Equal(t, res[0].Seq, again[0].Seq)

	a, b := account(t, db, "alice"), account(t, db, "bob")
	require.Equal(t, "7.50000000", a.BalanceFen.StringFixed(8))
	require.Equal(t, "0.00000000", b.BalanceFen.StringFixed(8), "never below zero")
	require.True(t, ledgerSum(t, db, "alice").Equal(a.BalanceFen), "balance = sum of the ledger")
	require.True(t, ledgerSum(t, db, "bob").Equal(b.BalanceFen))
	require.EqualValues(t, 2, a.LedgerSeq, "opening + one deduction")
	require.EqualValues(t, 3, b.LedgerSeq)
}

// Every column of a deduction's row holds what the debit said, NULL where
// it said nothing, and the locking read of a redelivery gives the row back
// whole.
func TestApplyDebitsWritesEveryColumn(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "cora", "", dec("3"))
	require.NoError(t, err)
	at := time.Date(2026, 5, 1, 12, 30, 45, 123456000, time.UTC)
	debits := []store.Debit{
		{Username: "cora", ID: "full", Amount: dec("1.5"), ModelName: "m-1", InputTokens: 7, OutputTokens: 1 << 40, OccurredAt: at,
			Source: "consumer", Ref: "nonce-1", RequestHash: "hash-1"},
		{Username: "cora", ID: "bare", Amount: dec("0.25"), InputTokens: -3, OccurredAt: at, Source: "reconciler", SelfSettled: true},
		{Username: "cora", ID: "short", Amount: dec("2"), OccurredAt: at, Source: "consumer"}, // 1.25 left
	}
	res, err := store.NewLedger(db).ApplyDebits(ctx, debits)
	require.NoError(t, err)
	for i := range debits {
		require.True(t, res[i].Applied, debits[i].ID)
	}

	var rows []store.LedgerEntry
	require.NoError(t, db.Where("username = ? AND kind = ?", "cora", store.LedgerDeduct).Order("seq").Find(&rows).Error)
	require.Len(t, rows, 3)
	str := func(s string) *string { return &s }
	u32 := func(n uint32) *uint32 { return &n }
	full, bare, short := rows[0], rows[1], rows[2]

	require.Equal(t, "full", full.EntryID)
	require.Equal(t, uint64(2), full.Seq)
	require.Equal(t, "-1.50000000", full.AmountFen.StringFixed(8))
	require.True(t, full.ShortfallFen.IsZero())
	require.Equal(t, str("m-1"), full.ModelName)
	require.Equal(t, u32(7), full.InputTokens)
	require.Equal(t, u32(1<<32-1), full.OutputTokens, "clamped to the column")
	require.Equal(t, str("nonce-1"), full.PendingRef)
	require.Equal(t, str("hash-1"), full.RequestHash)
	require.Nil(t, full.Reason)
	require.Equal(t, "consumer", full.Source)
	require.True(t, at.Equal(full.OccurredAt), "occurred_at %s", full.OccurredAt)
	require.Nil(t, full.SettledAt)
	require.False(t, full.CreatedAt.IsZero())

	require.Equal(t, "bare", bare.EntryID)
	require.Nil(t, bare.ModelName)
	require.Equal(t, u32(0), bare.InputTokens)
	require.Equal(t, u32(0), bare.OutputTokens)
	require.Nil(t, bare.PendingRef)
	require.Nil(t, bare.RequestHash)
	require.Equal(t, "reconciler", bare.Source)
	require.NotNil(t, bare.SettledAt, "a self-settled deduction is settled when written")

	require.Equal(t, "short", short.EntryID)
	require.Equal(t, "-1.25000000", short.AmountFen.StringFixed(8))
	require.Equal(t, "0.75000000", short.ShortfallFen.StringFixed(8))
	require.Equal(t, str("balance could not cover 0.75000000 fen"), short.Reason)

	again, err := store.NewLedger(db).ApplyDebits(ctx, debits[:1])
	require.NoError(t, err)
	require.Equal(t, store.DebitResult{Seq: 2, Amount: dec("1.5"), Shortfall: dec("0"), Ref: "nonce-1", RequestHash: "hash-1"},
		withoutExponents(again[0]))
	require.Equal(t, "0.00000000", account(t, db, "cora").BalanceFen.StringFixed(8))
	require.EqualValues(t, 4, account(t, db, "cora").LedgerSeq)
}

// withoutExponents gives r's amounts the exponent dec gives them, so that
// results compare with Equal whatever scale MySQL answered with.
func withoutExponents(r store.DebitResult) store.DebitResult {
	r.Amount, r.Shortfall = dec(r.Amount.String()), dec(r.Shortfall.String())
	return r
}

// Many workers applying the same deductions at once: each applies once.
func TestApplyDebitsConcurrently(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	users := []string{"u1", "u2", "u3"}
	for _, u := range users {
		_, err := store.NewAccounts(db).Create(ctx, u, "", dec("1000"))
		require.NoError(t, err)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 30 {
				var batch []store.Debit
				for _, u := range users {
					batch = append(batch, store.Debit{Username: u, ID: fmt.Sprintf("d%d", (i+w)%40), Amount: dec("1.00000001")})
				}
				_, err := store.NewLedger(db).ApplyDebits(ctx, batch)
				require.NoError(t, err)
			}
		})
	}
	wg.Wait()
	for _, u := range users {
		var n int64
		require.NoError(t, db.Raw("SELECT COUNT(*) FROM agent_ledger WHERE username = ? AND kind = 'DEDUCT'", u).Scan(&n).Error)
		a := account(t, db, u)
		require.Equal(t, dec("1000").Sub(dec("1.00000001").Mul(decimal.NewFromInt(n))).StringFixed(8), a.BalanceFen.StringFixed(8))
		require.EqualValues(t, n+1, a.LedgerSeq)
		require.Equal(t, int64(37), n, "ids d0..d36 were used")
	}
}

func TestCreditAndAdjust(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "carol", "", dec("5"))
	require.NoError(t, err)
	_, err = store.NewBalances(db, r).Ensure(ctx, "carol")
	require.NoError(t, err)

	res, err := store.NewBalances(db, r).Credit(ctx, store.Credit{Username: "carol", ID: "order-1", Amount: dec("10")})
	require.NoError(t, err)
	require.True(t, res.Applied)
	require.Equal(t, store.SettleApplied, res.Settle)
	res, err = store.NewBalances(db, r).Credit(ctx, store.Credit{Username: "carol", ID: "order-1", Amount: dec("10")})
	require.NoError(t, err)
	require.False(t, res.Applied)
	require.True(t, res.Settled, "credited at most once")
	// Also once the Redis marker expired: MySQL remembers.
	require.NoError(t, r.Client(keys.DBAgentBilling).Del(ctx, r.Keys().AgentSettled("carol", store.SettleCredit, "order-1")).Err())
	res, err = store.NewBalances(db, r).Credit(ctx, store.Credit{Username: "carol", ID: "order-1", Amount: dec("10")})
	require.NoError(t, err)
	require.True(t, res.Settled)
	bal, err := store.NewBalances(nil, r).Balance(ctx, "carol")
	require.NoError(t, err)
	require.Equal(t, "15.00000000", bal.StringFixed(8))
	require.Equal(t, "15.00000000", account(t, db, "carol").BalanceFen.StringFixed(8))

	a := account(t, db, "carol")
	_, err = store.NewLedger(db).Adjust(ctx, "carol", "sync:1", dec("-1.5"), a.BalanceFen, a.LedgerSeq-1, "stale read")
	require.ErrorIs(t, err, store.ErrChanged)
	_, err = store.NewLedger(db).Adjust(ctx, "carol", "sync:1", dec("-1.5"), a.BalanceFen, a.LedgerSeq, "redis 13.5, mysql 15")
	require.NoError(t, err)
	require.Equal(t, "13.50000000", account(t, db, "carol").BalanceFen.StringFixed(8))
	require.True(t, ledgerSum(t, db, "carol").Equal(dec("13.5")))
	_, err = store.NewBalances(db, r).Credit(ctx, store.Credit{Username: "nobody", ID: "x", Amount: dec("1")})
	require.ErrorIs(t, err, store.ErrUnknownUser)
}

// A deduction taken before Redis lost its data lands after the balance was
// initialised again: it is charged once, not forgiven and not twice (doc/money.md, "After a Redis loss").
func TestDeductionInFlightAcrossARedisLoss(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "dora", "", dec("100"))
	require.NoError(t, err)
	_, err = store.NewBalances(db, r).Ensure(ctx, "dora")
	require.NoError(t, err)
	taken, err := store.NewBalances(nil, r).Deduct(ctx, store.DeductRequest{Username: "dora", ID: "early", Amount: dec("30"), Now: time.Now()})
	require.NoError(t, err)

	storetest.Wipe(t, r) // Redis restarts empty; the message of "early" is still in the queue
	_, err = store.NewBalances(db, r).Ensure(ctx, "dora")
	require.NoError(t, err)
	bal, err := store.NewBalances(nil, r).Balance(ctx, "dora")
	require.NoError(t, err)
	require.Equal(t, "100.00000000", bal.StringFixed(8), "MySQL does not know the early deduction yet")
	_, err = store.NewBalances(nil, r).Deduct(ctx, store.DeductRequest{Username: "dora", ID: "later", Amount: dec("5"), Now: time.Now()})
	require.NoError(t, err)

	for _, id := range []string{"early", "later"} { // the consumer catches up
		amount := taken.Deducted
		if id == "later" {
			amount = dec("5")
		}
		res, err := store.NewLedger(db).ApplyDebits(ctx, []store.Debit{{Username: "dora", ID: id, Amount: amount}})
		require.NoError(t, err)
		out, err := store.NewBalances(nil, r).Settle(ctx, store.SettleEntry{Username: "dora", Kind: store.SettleDeduction, EntryID: id, Amount: res[0].Amount, Seq: res[0].Seq})
		require.NoError(t, err)
		want := map[string]string{"early": store.SettleApplied, "later": store.SettleCleared}[id]
		require.Equal(t, want, out[0].Outcome, id)
	}
	bal, err = store.NewBalances(nil, r).Balance(ctx, "dora")
	require.NoError(t, err)
	require.Equal(t, "65.00000000", bal.StringFixed(8))
	require.Equal(t, "65.00000000", account(t, db, "dora").BalanceFen.StringFixed(8))
}

// A deduction committed while the balance is missing, and read or not read
// by the initialisation racing it, is counted once either way.
func TestLateEntriesAreTakenByTheInitialisation(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "eve", "", dec("50"))
	require.NoError(t, err)
	stale := account(t, db, "eve") // an initialisation read MySQL here...
	res, err := store.NewLedger(db).ApplyDebits(ctx, []store.Debit{{Username: "eve", ID: "d", Amount: dec("20")}})
	require.NoError(t, err)
	out, err := store.NewBalances(nil, r).Settle(ctx, store.SettleEntry{Username: "eve", Kind: store.SettleDeduction, EntryID: "d", Amount: res[0].Amount, Seq: res[0].Seq})
	require.NoError(t, err)
	require.Equal(t, store.SettleLate, out[0].Outcome)
	// ...and writes Redis only now.
	set, err := store.NewBalances(nil, r).Init(ctx, "eve", store.BalanceRead{Balance: stale.BalanceFen, Seq: stale.LedgerSeq, HotEntries: stale.HotEntries})
	require.NoError(t, err)
	require.True(t, set)
	bal, err := store.NewBalances(nil, r).Balance(ctx, "eve")
	require.NoError(t, err)
	require.Equal(t, "30.00000000", bal.StringFixed(8), "the late entry was applied at initialisation")

	// With a fresh read instead, the entry is not applied twice.
	storetest.Wipe(t, r)
	_, err = store.NewBalances(nil, r).Settle(ctx, store.SettleEntry{Username: "eve", Kind: store.SettleDeduction, EntryID: "d2", Amount: dec("1"), Seq: res[0].Seq})
	require.NoError(t, err)
	_, err = store.NewBalances(db, r).Ensure(ctx, "eve")
	require.NoError(t, err)
	bal, err = store.NewBalances(nil, r).Balance(ctx, "eve")
	require.NoError(t, err)
	require.Equal(t, "30.00000000", bal.StringFixed(8))
}

// A deduction that lands after a Redis loss on a restored balance the user
// has already spent takes what is left, and Settle says what it could not.
func TestSettleSaysWhatTheBalanceCouldNotTake(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "fay", "", dec("10"))
	require.NoError(t, err)
	_, err = store.NewBalances(db, r).Ensure(ctx, "fay") // restored from MySQL, which has not seen "in-flight" yet
	require.NoError(t, err)
	_, err = store.NewBalances(nil, r).Deduct(ctx, store.DeductRequest{Username: "fay", ID: "after", Amount: dec("8.5"), Now: time.Now()})
	require.NoError(t, err)

	res, err := store.NewLedger(db).ApplyDebits(ctx, []store.Debit{{Username: "fay", ID: "in-flight", Amount: dec("4")}})
	require.NoError(t, err)
	out, err := store.NewBalances(nil, r).Settle(ctx, store.SettleEntry{Username: "fay", Kind: store.SettleDeduction, EntryID: "in-flight", Amount: res[0].Amount, Seq: res[0].Seq})
	require.NoError(t, err)
	require.Equal(t, store.SettleApplied, out[0].Outcome)
	require.Equal(t, "2.50000000", out[0].Uncovered.StringFixed(8))
	bal, err := store.NewBalances(nil, r).Balance(ctx, "fay")
	require.NoError(t, err)
	require.Equal(t, "0.00000000", bal.StringFixed(8))

	// Settled again (a redelivery): nothing more is applied or reported.
	out, err = store.NewBalances(nil, r).Settle(ctx, store.SettleEntry{Username: "fay", Kind: store.SettleDeduction, EntryID: "in-flight", Amount: res[0].Amount, Seq: res[0].Seq})
	require.NoError(t, err)
	require.Equal(t, store.SettleSettled, out[0].Outcome)
	require.True(t, out[0].Uncovered.IsZero())
}

// Marking entries settled and the deduction path's locking read look their
// rows up in the unique key, however long the ledger: MariaDB plans a
// one-element row-constructor IN in an UPDATE as a scan of the whole table.
func TestLedgerWritesReadOnlyTheirRows(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "gil", "", dec("1000000"))
	require.NoError(t, err)
	debits := make([]store.Debit, 3000)
	for i := range debits {
		debits[i] = store.Debit{Username: "gil", ID: fmt.Sprintf("d%d", i), Amount: dec("0.01")}
	}
	_, err = store.NewLedger(db).ApplyDebits(ctx, debits)
	require.NoError(t, err)

	// rowsRead is how many index and table rows fn read, on one connection.
	rowsRead := func(fn func(conn *gorm.DB)) int64 {
		var n int64
		require.NoError(t, db.Connection(func(conn *gorm.DB) error {
			read := func() int64 {
				var sum int64
				require.NoError(t, conn.Raw("SELECT SUM(VARIABLE_VALUE) FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME IN ('HANDLER_READ_NEXT', 'HANDLER_READ_RND_NEXT', 'HANDLER_READ_FIRST')").Scan(&sum).Error)
				return sum
			}
			before := read()
			fn(conn)
			n = read() - before
			return nil
		}))
		return n
	}
	overhead := rowsRead(func(*gorm.DB) {})

	marked := rowsRead(func(conn *gorm.DB) {
		require.NoError(t, store.NewLedger(conn).MarkSettled(ctx, store.EntryKey{Username: "gil", Kind: store.LedgerDeduct, EntryID: "d1500"}))
	}) - overhead
	require.Less(t, marked, int64(100), "marking one entry settled read %d rows of 3,000", marked)
	var settled int64
	require.NoError(t, db.Raw("SELECT COUNT(*) FROM agent_ledger WHERE kind = 'DEDUCT' AND settled_at IS NOT NULL").Scan(&settled).Error)
	require.EqualValues(t, 1, settled)

	applied := rowsRead(func(conn *gorm.DB) {
		_, err := store.NewLedger(conn).ApplyDebits(ctx, []store.Debit{{Username: "gil", ID: "d7", Amount: dec("0.01")}, {Username: "gil", ID: "new", Amount: dec("0.01")}})
		require.NoError(t, err)
	}) - overhead
	require.Less(t, applied, int64(100), "a deduction read %d rows of 3,000", applied)
}

// A credit whose Redis side a crash left undone is finished with the amount
// MySQL holds, whatever amount the retry names.
func TestCreditRetryCreditsTheStoredAmount(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "dan", "", dec("5"))
	require.NoError(t, err)
	_, err = store.NewBalances(db, r).Credit(ctx, store.Credit{Username: "dan", ID: "order-1", Amount: dec("10")})
	require.NoError(t, err)
	// Undo the Redis side, as if the process died after the commit.
	require.NoError(t, db.Exec("UPDATE agent_ledger SET settled_at = NULL WHERE username = 'dan' AND entry_id = 'order-1'").Error)
	require.NoError(t, r.Client(keys.DBAgentBilling).Del(ctx, r.Keys().AgentSettled("dan", store.SettleCredit, "order-1")).Err())
	require.NoError(t, r.Client(keys.DBAgentBilling).Set(ctx, r.Keys().AgentBalance("dan"), "5.00000000", 0).Err())

	res, err := store.NewBalances(db, r).Credit(ctx, store.Credit{Username: "dan", ID: "order-1", Amount: dec("99")})
	require.NoError(t, err)
	require.False(t, res.Applied)
	require.Equal(t, store.SettleApplied, res.Settle)
	bal, err := store.NewBalances(nil, r).Balance(ctx, "dan")
	require.NoError(t, err)
	require.Equal(t, "15.00000000", bal.StringFixed(8))
	require.Equal(t, "15.00000000", account(t, db, "dan").BalanceFen.StringFixed(8))
}

// MarkSettled runs beside the ledger's transactions, which lock the same
// rows: when InnoDB picks its UPDATE as a deadlock's victim, it runs again
// rather than fail the deduction it marks (whose handler would send the
// message to the retry queue with everything already done).
func TestMarkSettledOutlivesADeadlock(t *testing.T) {
	t.Parallel()
	db := storetest.MySQL(t)
	ctx := context.Background()
	_, err := store.NewAccounts(db).Create(ctx, "alice", "", dec("100"))
	require.NoError(t, err)
	for i := range 40 {
		_, err = store.NewAccounts(db).Create(ctx, fmt.Sprintf("u%02d", i), "", dec("1"))
		require.NoError(t, err)
	}
	l := store.NewLedger(db)
	_, err = l.ApplyDebits(ctx, []store.Debit{{Username: "alice", ID: "d1", Amount: dec("1")}, {Username: "alice", ID: "d2", Amount: dec("1")}})
	require.NoError(t, err)

	// The other transaction: the heavier one (40 rows changed elsewhere),
	// so InnoDB rolls back the UPDATE of MarkSettled, which holds d1 and
	// waits for d2.
	other := db.Begin()
	defer other.Rollback()
	require.NoError(t, other.Exec("UPDATE user_account SET balance_fen = balance_fen + 1 WHERE username LIKE 'u%'").Error)
	var held uint64
	require.NoError(t, other.Raw("SELECT id FROM agent_ledger WHERE username = 'alice' AND kind = ? AND entry_id = 'd2' FOR UPDATE", store.LedgerDeduct).Scan(&held).Error)
	require.NotZero(t, held)
	marked := make(chan error, 1)
	go func() {
		marked <- l.MarkSettled(ctx, store.EntryKey{Username: "alice", Kind: store.LedgerDeduct, EntryID: "d1"},
			store.EntryKey{Username: "alice", Kind: store.LedgerDeduct, EntryID: "d2"})
	}()
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, db.Raw("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE db = DATABASE() AND info LIKE ?",
			"UPDATE agent_ledger SET settled_at%").Scan(&waiting).Error)
		return waiting > 0
	}, 10*time.Second, 10*time.Millisecond, "MarkSettled waits for d2")
	require.NoError(t, other.Exec("SELECT id FROM agent_ledger WHERE username = 'alice' AND kind = ? AND entry_id = 'd1' FOR UPDATE", store.LedgerDeduct).Error,
		"the other transaction is not the victim")
	require.NoError(t, other.Commit().Error)
	require.NoError(t, <-marked)
	var unsettled int
	require.NoError(t, db.Raw("SELECT COUNT(*) FROM agent_ledger WHERE username = 'alice' AND kind = ? AND settled_at IS NULL", store.LedgerDeduct).Scan(&unsettled).Error)
	require.Zero(t, unsettled)
}
