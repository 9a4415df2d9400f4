package console

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/shopspring/decimal"
)

// balanceSync names the job whose runs the money page shows.
const balanceSync = "balance-sync"

// moneyData is the money page of one user (or of none yet).
type moneyData struct {
	User     string
	Asked    bool
	Account  *store.UserAccount // nil: no account
	Hot      store.HotBalance
	HotErr   string
	Pending  []pendingRow
	Pended   decimal.Decimal // the sum of the pending deductions
	Expected decimal.Decimal // MySQL's balance less what is pending: what Redis should hold
	Drift    decimal.Decimal // Redis - Expected
	Drifts   bool
	Behind   bool // Redis reflects fewer ledger entries than MySQL holds
	Ledger   []store.LedgerEntry
	Dead     []reconcile.DeadDeduction // stored dead billing messages naming the user, not replayed
	Holds    bool                      // one of Dead may still apply: balance-sync defers the user's drift
	Syncs    []store.JobRun
}

// pendingRow is one pending deduction with its age.
type pendingRow struct {
	store.PendingDeduction
	Age time.Duration
}

// ledgerRows is how many ledger entries the page shows.
const ledgerRows = 20

func (c *Console) money(w http.ResponseWriter, r *http.Request) (rendered, error) {
	ctx := r.Context()
	d := moneyData{User: strings.TrimSpace(r.URL.Query().Get("user"))}
	runs, err := store.NewJobRuns(c.backends.DB).Last(ctx, 5, balanceSync)
	if err != nil {
		return rendered{}, err
	}
	d.Syncs = runs[balanceSync]
	out := rendered{file: "money.html", title: "Money", nav: "money", data: &d}
	if d.User == "" {
		return out, nil
	}
	if len(d.User) > 64 {
		return rendered{}, errorf(http.StatusBadRequest, "a username has at most 64 bytes")
	}
	d.Asked = true
	acct, err := store.NewAccounts(c.backends.DB).Get(ctx, d.User)
	switch {
	case errors.Is(err, store.ErrNotFound):
		out.status = http.StatusNotFound
		return out, nil
	case err != nil:
		return rendered{}, err
	}
	d.Account = &acct
	balances := store.NewBalances(c.backends.DB, c.backends.Redis)
	hot, err := balances.Hot(ctx, []string{d.User})
	if err != nil {
		d.HotErr = err.Error()
	}
	d.Hot = hot[d.User]
	pending, err := balances.Pending(ctx, d.User)
	if err != nil {
		d.HotErr = err.Error()
	}
	now := c.now()
	for _, p := range pending {
		d.Pending = append(d.Pending, pendingRow{PendingDeduction: p, Age: now.Sub(p.At)})
		d.Pended = d.Pended.Add(p.Deducted)
	}
	slices.SortFunc(d.Pending, func(a, b pendingRow) int { return a.At.Compare(b.At) })
	d.Expected = acct.BalanceFen.Sub(d.Pended)
	if d.Hot.Present {
		d.Drift = d.Hot.Balance.Round(store.MoneyScale).Sub(d.Expected)
		d.Drifts = !d.Drift.IsZero()
		d.Behind = d.Hot.EntriesKnown && d.Hot.Entries < acct.HotEntries
	}
	if d.Ledger, err = store.NewLedger(c.backends.DB).Recent(ctx, d.User, ledgerRows); err != nil {
		return rendered{}, err
	}
	if err := c.deadOf(ctx, &d); err != nil {
		return rendered{}, err
	}
	out.title = "Money of " + d.User
	return out, nil
}

// deadOf reads the stored dead billing messages that name d.User (by the
// subject the DLQ consumer stored), judged as balance-sync judges them.
func (c *Console) deadOf(ctx context.Context, d *moneyData) error {
	dead, err := reconcile.NewDeadBilling(c.backends.DB, c.backends.Topology)
	if err != nil {
		return err
	}
	if d.Dead, err = dead.Of(ctx, d.User); err != nil {
		return err
	}
	for _, m := range d.Dead {
		d.Holds = d.Holds || m.Holds
	}
	return nil
}
