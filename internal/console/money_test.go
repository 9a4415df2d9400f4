package console_test

import (
	"context"
	"html"
	"net/http"
	"strings"
	"testing"

	"github.com/eisland/isle/internal/billing"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
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
