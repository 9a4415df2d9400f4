package console_test

import (
	"context"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

// chargeUser opens an account with balance and charges it cost fen under
// request id: the deduction stays pending, as when its message has not
// been consumed yet.
func chargeUser(t *testing.T, b *testBundle, user, balance string, ids ...string) {
	t.Helper()
	ctx := context.Background()
	_, err := store.NewAccounts(b.db).Create(ctx, user, "", decimal.RequireFromString(balance))
	require.NoError(t, err)
	require.NoError(t, store.NewPrices(b.db, b.redis).Set(ctx, store.Pricing{Model: "gpt-demo", Input: decimal.RequireFromString("1000000"), Enabled: true}))
	for _, id := range ids {
		_, err := billing.New(b.db, b.redis).Charge(ctx, billing.Request{ID: id, Username: user, Model: "gpt-demo", Tokens: billing.Tokens{Input: 3}})
		require.NoError(t, err)
	}
}

// A user's page shows the Redis balance, the pending deductions with their
// age, the MySQL balance and ledger, and no drift while Redis is MySQL
// less what is pending; a Redis balance moved by hand shows as drift.
func TestMoneyShowsAUserWithAPendingDeduction(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	chargeUser(t, b, "carol", "100", "req-1", "req-2")

	status, body := b.get(t, "/admin/money?user=carol")
	require.Equal(t, http.StatusOK, status, body)
	body = html.UnescapeString(body)
	for _, want := range []string{
		`<div class="value amount" id="hot">94.00000000</div>`,
		`<div class="value amount" id="pending-sum">2 · 6.00000000</div>`,
		`<div class="value amount" id="mysql">100.00000000</div>`,
		`<div class="value amount" id="drift">0.00000000</div>`,
		"<td>req-1</td>", "<td>req-2</td>", "gpt-demo",
		"<td>RECHARGE</td><td>opening</td>",
		"No run recorded yet.",
	} {
		require.Contains(t, body, want)
	}
	require.NotContains(t, body, `class="card bad"`)

	key := b.redis.Keys().AgentBalance("carol")
	require.NoError(t, b.redis.Client(keys.DBAgentBilling).Set(context.Background(), key, "90.00000000", 0).Err())
	_, body = b.get(t, "/admin/money?user=carol")
	require.Contains(t, body, `id="drift">-4.00000000</div>`)
	require.Contains(t, body, `class="card bad"`)

	status, body = b.get(t, "/admin/money?user=nobody")
	require.Equal(t, http.StatusNotFound, status)
	require.Contains(t, body, "No account named nobody")
	status, _ = b.get(t, "/admin/money?user="+strings.Repeat("x", 65))
	require.Equal(t, http.StatusBadRequest, status)
	status, body = b.get(t, "/admin/money")
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `name="user"`)
}

// The money page says what holds balance-sync back for a user: the stored
// dead billing messages that name it, whether each may still apply (then
// the user's drift waits for it), and the last runs' deferrals.
func TestMoneyShowsWhatHoldsBalanceSyncBack(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	_, err := store.NewAccounts(b.db).Create(ctx, "erin", "", decimal.RequireFromString("10"))
	require.NoError(t, err)
	_, err = store.NewBalances(b.db, b.redis).Ensure(ctx, "erin")
	require.NoError(t, err)
	// A producer took 1 fen in Redis; its message died and waits to be replayed.
	require.NoError(t, b.redis.Client(keys.DBAgentBilling).Set(ctx, b.redis.Keys().AgentBalance("erin"), "9.00000000", 0).Err())
	held := b.deadMessage(t, topology.DomainAgentBilling, "m-held", `{"username":"erin","amountFen":"1.00000000","modelName":"spring-model"}`, "ledger unavailable", time.Now())
	b.deadMessage(t, topology.DomainAgentBilling, "m-other", `{"username":"frank","amountFen":"1.00000000","modelName":"spring-model"}`, "ledger unavailable", time.Now())
	b.deadMessage(t, topology.DomainAgentBilling, "m-cut", `{"username":"erin","amountFen":"1.0`, "cut", time.Now())

	admin, err := rabbitadmin.New(storetest.ManagementURL(), "/")
	require.NoError(t, err)
	gate, err := reconcile.NewBillingInFlight(b.tp, admin, b.db)
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, err := gate.DeductionsInFlight(ctx); return err == nil }, 30*time.Second, 250*time.Millisecond, "the broker counts the queues")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	job := reconcile.NewBalanceSync(b.db, b.redis, reconcile.BalanceSyncConfig{Quiet: -1, ConfirmDelay: -1}, gate, nil, quiet)
	runner := reconcile.Runner{Redis: b.redis, Runs: store.NewJobRuns(b.db), Log: quiet, Owner: "console-test"}
	_, err = runner.Run(ctx, job, "console (alice)")
	require.NoError(t, err)

	status, body := b.get(t, "/admin/money?user=erin")
	require.Equal(t, http.StatusOK, status, body)
	body = html.UnescapeString(body)
	ref := fmt.Sprintf("agent-billing/%d", held)
	require.Contains(t, body, `<tr class="holds"><td><a href="/admin/dead/`+ref+`">`+ref+`</a></td>`)
	require.Contains(t, body, "may still apply: balance-sync leaves this user's drift for later until it is replayed")
	require.Contains(t, body, "deferred 1 (erin by "+ref+")")
	require.NotContains(t, body, "frank", "another user's dead message is not this user's")
	require.Contains(t, body, `id="dead-deductions"`)
	require.Equal(t, 1, strings.Count(body, `<tr class="holds">`), "the cut message names nobody and holds nobody")
	acct, err := store.NewAccounts(b.db).Get(ctx, "erin")
	require.NoError(t, err)
	require.Equal(t, "10.00000000", acct.BalanceFen.StringFixed(8), "erin is not adjusted while its message may land")
}
