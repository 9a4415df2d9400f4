package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/eisland/isle/internal/httpapi"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

func TestAgentUsageAndBalance(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	require.NoError(t, store.NewPrices(b.db, b.redis).Set(ctx, store.Pricing{Model: "m", Input: decimal.RequireFromString("1000000"), Enabled: true}))
	_, err := store.NewAccounts(b.db).Create(ctx, "alice", "", decimal.RequireFromString("5"))
	require.NoError(t, err)
	svc := b.token(t, "gateway", httpapi.RoleService)
	usage := func(body string) (int, map[string]any) {
		status, _, out := b.do(t, http.MethodPost, "/v1/agent/usage", svc, body)
		return status, out
	}

	status, out := usage(`{"requestId":"a1","username":"alice","modelName":"m","inputTokens":3}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, map[string]any{"requestId": "a1", "costFen": "3.00000000", "costMicroFen": float64(300000000),
		"deductedFen": "3.00000000", "balanceFen": "2.00000000", "replayed": false, "ledger": "queued"}, out)
	status, out = usage(`{"requestId":"a2","username":"alice","modelName":"m","inputTokens":9}`)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "2.00000000", out["deductedFen"], "cap at zero")
	status, out = usage(`{"requestId":"a3","username":"alice","modelName":"m","inputTokens":1}`)
	require.Equal(t, http.StatusPaymentRequired, status)
	require.Equal(t, "payment_required", errorCode(t, out))
	require.Equal(t, "0.00000000", out["error"].(map[string]any)["balanceFen"])

	for body, want := range map[string]int{
		`{"requestId":"b1","username":"alice","modelName":"nope","inputTokens":1}`:   http.StatusBadRequest,
		`{"requestId":"b2","username":"ghost","modelName":"m","inputTokens":1}`:      http.StatusNotFound,
		`{"requestId":"","username":"alice","modelName":"m"}`:                        http.StatusBadRequest,
		`{"requestId":"b3","username":"alice","modelName":"m","inputTokens":-1}`:     http.StatusBadRequest,
		`{"requestId":"b4","username":"alice","modelName":"m","inputTokens":"many"}`: http.StatusBadRequest,
		`{"requestId":"b5 with space","username":"alice","modelName":"m"}`:           http.StatusBadRequest,
	} {
		status, out := usage(body)
		require.Equal(t, want, status, "%s: %v", body, out)
		errorCode(t, out)
	}
	status, _, _ = b.do(t, http.MethodPost, "/v1/agent/usage", b.token(t, "alice", httpapi.RoleUser), `{}`)
	require.Equal(t, http.StatusForbidden, status, "service tokens only")

	status, _, out = b.do(t, http.MethodGet, "/v1/agent/balance", b.token(t, "alice", httpapi.RoleUser), "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, map[string]any{"username": "alice", "balanceFen": "0.00000000", "pendingFen": "5.00000000"}, out)

	// Both messages went out, with the request's correlation id.
	conn, _ := b.conn(t)
	deduct, _ := b.tp.Domain(topology.DomainAgentBilling)
	require.Equal(t, 2, storetest.QueueDepth(t, conn, deduct.Queue))
	usageDom, _ := b.tp.Domain(topology.DomainAgentUsageStats)
	require.Equal(t, 2, storetest.QueueDepth(t, conn, usageDom.Queue))
}

// With several token counts out of range, the 400 names the first in field
// order, every time.
func TestAgentUsageNamesTheFirstBadCount(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	svc := b.token(t, "gateway", httpapi.RoleService)
	body := `{"requestId":"c1","username":"alice","modelName":"m","inputTokens":-1,"cachedTokens":-1,"outputTokens":-1,"reasoningTokens":-1}`
	for range 20 {
		status, _, out := b.do(t, http.MethodPost, "/v1/agent/usage", svc, body)
		require.Equal(t, http.StatusBadRequest, status)
		require.Equal(t, "inputTokens: want 0..2147483647", out["error"].(map[string]any)["message"])
	}
}

// A charge whose messages the broker could not take is kept in MySQL's
// outbox, not only in Redis's pending record: a Redis that then loses its
// data (a restart without persistence) cannot take the charge with it. The
// relay publishes the outbox rows when the broker is back.
func TestDeferredChargeSurvivesARedisLoss(t *testing.T) {
	t.Parallel()
	proxy := storetest.NewProxy(t, "127.0.0.1:5672")
	b := setup(t, options{amqpURL: strings.Replace(storetest.AMQPURL(), "127.0.0.1:5672", proxy.Addr(), 1)})
	ctx := context.Background()
	require.NoError(t, store.NewPrices(b.db, b.redis).Set(ctx, store.Pricing{Model: "m", Input: decimal.RequireFromString("1000000"), Enabled: true}))
	_, err := store.NewAccounts(b.db).Create(ctx, "dana", "", decimal.RequireFromString("50"))
	require.NoError(t, err)
	svc := b.token(t, "gateway", httpapi.RoleService)

	proxy.Pause()
	status, _, out := b.do(t, http.MethodPost, "/v1/agent/usage", svc, `{"requestId":"d1","username":"dana","modelName":"m","inputTokens":7}`)
	proxy.Resume()
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, "deferred", out["ledger"])
	storetest.Wipe(t, b.redis) // the pending record is gone

	var rows []store.OutboxMessage
	require.NoError(t, b.db.Order("id").Find(&rows).Error)
	require.Len(t, rows, 2, "the usage and the deduction, written to the outbox")
	billingDom, _ := b.tp.Domain(topology.DomainAgentBilling)
	usageDom, _ := b.tp.Domain(topology.DomainAgentUsageStats)
	require.Equal(t, []string{usageDom.Name, billingDom.Name}, []string{rows[0].Domain, rows[1].Domain}, "the usage first")
	m, err := topology.Decode[topology.AgentBillingDeduct](rows[1].Payload)
	require.NoError(t, err)
	require.Equal(t, "d1", m.DeductionID)
	require.Equal(t, "dana", m.Username)
	require.Equal(t, "7.00000000", m.AmountFen)
	require.NotEmpty(t, m.PendingRef)
}
