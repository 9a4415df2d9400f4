package reconcile_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

func dec(s string) decimal.Decimal { return decimal.RequireFromString(s) }

// discard is the jobs' logger: silent, or errors on stderr with
// ISLE_TEST_LOG=1 (to see why a property-test run failed).
var discard = func() *slog.Logger {
	if os.Getenv("ISLE_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}()

// money is the billing path without HTTP and without a broker: the API's
// service, the real consumer handler, and the reconciler.
type money struct {
	db       *gorm.DB
	r        *store.Redis
	svc      *billing.Service
	consumer *handlers.Deductor
	sync     *reconcile.BalanceSync
}

// directLedger applies each call's debits in a transaction of their own
// (no batcher).
type directLedger struct{ db *gorm.DB }

func (l directLedger) ApplyDebits(ctx context.Context, ds []store.Debit) ([]store.DebitResult, []error) {
	res, err := store.NewLedger(l.db).ApplyDebits(ctx, ds)
	errs := make([]error, len(ds))
	if err != nil {
		res = make([]store.DebitResult, len(ds))
		for i := range errs {
			errs[i] = err
		}
	}
	return res, errs
}

func (l directLedger) MarkSettled(ctx context.Context, entries ...store.EntryKey) error {
	return store.NewLedger(l.db).MarkSettled(ctx, entries...)
}

// NoteSettled writes the marks at once; one that fails is left to
// balance-sync, as the worker's writer leaves it.
func (l directLedger) NoteSettled(entries ...store.EntryKey) {
	_ = l.MarkSettled(context.Background(), entries...)
}

func newMoney(t *testing.T) *money {
	t.Helper()
	db := storetest.MySQL(t)
	r := storetest.Redis(t)
	require.NoError(t, store.NewPrices(db, r).Set(context.Background(), store.Pricing{Model: "m", Input: dec("1000000"), Enabled: true}))
	m := &money{
		db: db, r: r, svc: billing.New(db, r),
		consumer: handlers.NewDeductor(directLedger{db}, store.NewBalances(db, r), discard),
	}
	m.sync = newMoneySync(m, true)
	return m
}

func (m *money) mysqlBalance(t *testing.T, user string) decimal.Decimal {
	t.Helper()
	u, err := store.NewAccounts(m.db).Get(context.Background(), user)
	require.NoError(t, err)
	return u.BalanceFen
}

func (m *money) ledgerSum(t *testing.T, user, kind string) decimal.Decimal {
	t.Helper()
	var sum decimal.NullDecimal
	q := "SELECT SUM(amount_fen) FROM agent_ledger WHERE username = ?"
	args := []any{user}
	if kind != "" {
		q += " AND kind = ?"
		args = append(args, kind)
	}
	require.NoError(t, m.db.Raw(q, args...).Scan(&sum).Error)
	return sum.Decimal
}

func (m *money) run(t *testing.T) reconcile.BalanceResult {
	t.Helper()
	res, err := m.sync.RunOnce(context.Background())
	require.NoError(t, err)
	return res.(reconcile.BalanceResult)
}

// newMoneySync returns a balance-sync that applies every pending entry (or
// none) and compares every user at once, with no deduction message in flight.
func newMoneySync(m *money, applyPending bool) *reconcile.BalanceSync {
	age := time.Hour
	if applyPending {
		age = -1
	}
	return reconcile.NewBalanceSync(m.db, m.r, reconcile.BalanceSyncConfig{PendingAge: age, Quiet: -1, ConfirmDelay: -1}, &heldBack{}, nil, discard)
}

// newMoneySyncGated is newMoneySync(m, true) asking gate whether a
// deduction message may still arrive.
func newMoneySyncGated(m *money, gate reconcile.InFlight) *reconcile.BalanceSync {
	return reconcile.NewBalanceSync(m.db, m.r, reconcile.BalanceSyncConfig{PendingAge: -1, Quiet: -1, ConfirmDelay: -1}, gate, nil, discard)
}
