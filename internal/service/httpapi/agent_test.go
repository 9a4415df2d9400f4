package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/eisland/isle/internal/service/httpapi"
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

// A charge's cost in micro-fen must fit the int64 the usage message
// carries: a price past store.MaxPriceFenPerMTok is refused when it is set,
// a price row past it that got into MySQL another way (the Spring backend
// shares the table) makes a request whose cost would not fit a 400, and at
// the cap the largest request the API accepts is priced exactly.
func TestCostMicroFenNeverWraps(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	prices := store.NewPrices(b.db, b.redis)
	huge := decimal.RequireFromString("100000000") // 1e8 fen per million tokens
	require.Error(t, prices.Set(ctx, store.Pricing{Model: "huge", Input: huge, Output: huge, Enabled: true}), "a price past the cap is refused")
	require.NoError(t, b.db.Exec("INSERT INTO agent_model_pricing (model_name, input_fen_per_mtok, output_fen_per_mtok, enabled) VALUES ('huge', ?, ?, 1)"+
		" ON DUPLICATE KEY UPDATE input_fen_per_mtok = VALUES(input_fen_per_mtok), output_fen_per_mtok = VALUES(output_fen_per_mtok)",
		huge, huge).Error)
	_, err := store.NewAccounts(b.db).Create(ctx, "alice", "", decimal.RequireFromString("10"))
	require.NoError(t, err)
	svc := b.token(t, "gateway", httpapi.RoleService)

	status, _, out := b.do(t, http.MethodPost, "/v1/agent/usage", svc,
		`{"requestId":"w1","username":"alice","modelName":"huge","inputTokens":2147483647,"outputTokens":2147483647}`)
	require.Equal(t, http.StatusBadRequest, status, "%v", out)
	require.Equal(t, "bad_request", errorCode(t, out))
	bal, err := store.NewBalances(nil, b.redis).Balance(ctx, "alice")
	if err == nil {
		require.Equal(t, "10.00000000", bal.StringFixed(8), "nothing taken")
	}

	top := store.MaxPriceFenPerMTok
	require.NoError(t, prices.Set(ctx, store.Pricing{Model: "top", Input: top, CachedInput: top, Output: top, Reasoning: top, Enabled: true}))
	status, _, out = b.do(t, http.MethodPost, "/v1/agent/usage", svc,
		`{"requestId":"w2","username":"alice","modelName":"top","inputTokens":2147483647,"cachedTokens":2147483647,"outputTokens":2147483647,"reasoningTokens":2147483647}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	// 4 × (2^31 − 1) tokens × 10^7 fen per 10^6 tokens.
	require.Equal(t, "85899345880.00000000", out["costFen"])
	require.Equal(t, float64(8589934588000000000), out["costMicroFen"], "exact (and exactly a float64)")
	require.Equal(t, "10.00000000", out["deductedFen"])
}
