package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

// The same request id with the same body is a replay (200, nothing taken);
// with another body it is a 409 naming the id and the first charge, never a
// 200 pairing the new body's cost with the first deduction (doc/money.md, "A request id deducts once"). Ids
// are scoped per user: another user's r1 is a charge of its own.
func TestReplayWithAnotherBodyIsAConflict(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	require.NoError(t, store.NewPrices(b.db, b.redis).Set(ctx, store.Pricing{Model: "m", Input: decimal.RequireFromString("1000000"), Enabled: true}))
	for _, u := range []string{"alice", "bob"} {
		_, err := store.NewAccounts(b.db).Create(ctx, u, "", decimal.RequireFromString("50"))
		require.NoError(t, err)
	}
	svc := b.token(t, "gateway", httpapi.RoleService)
	usage := func(body string) (int, map[string]any) {
		status, _, out := b.do(t, http.MethodPost, "/v1/agent/usage", svc, body)
		return status, out
	}

	status, out := usage(`{"requestId":"r1","username":"alice","modelName":"m","inputTokens":3}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, "3.00000000", out["deductedFen"])

	status, out = usage(`{"requestId":"r1","username":"alice","modelName":"m","inputTokens":3}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, true, out["replayed"])
	require.Equal(t, "3.00000000", out["costFen"])

	status, out = usage(`{"requestId":"r1","username":"alice","modelName":"m","inputTokens":7}`)
	require.Equal(t, http.StatusConflict, status, "%v", out)
	require.Equal(t, "conflict", errorCode(t, out))
	e := out["error"].(map[string]any)
	require.Equal(t, "r1", e["requestId"])
	require.Equal(t, "3.00000000", e["deductedFen"], "the first charge")
	require.Contains(t, e["message"], "r1")

	status, out = usage(`{"requestId":"r1","username":"bob","modelName":"m","inputTokens":7}`)
	require.Equal(t, http.StatusOK, status, "ids are scoped per user: %v", out)
	require.Equal(t, false, out["replayed"])
	require.Equal(t, "7.00000000", out["deductedFen"])

	bal, err := store.NewBalances(nil, b.redis).Balance(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, "47.00000000", bal.StringFixed(8), "alice paid once")
}

// A zero-cost body is a request like any other (doc/money.md, "A request
// id deducts once"): its id answers a replay or a 409 as a charged one
// does, and a replay answers the first charge — what it took and what it
// cost then — whatever the model's price is now.
func TestZeroCostBodyKeepsIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	prices := store.NewPrices(b.db, b.redis)
	price := func(fenPerMTok string) {
		t.Helper()
		require.NoError(t, prices.Set(ctx, store.Pricing{Model: "m", Input: decimal.RequireFromString(fenPerMTok), Enabled: true}))
	}
	price("1000000") // 1 fen a token
	for _, u := range []string{"alice", "zed"} {
		_, err := store.NewAccounts(b.db).Create(ctx, u, "", decimal.RequireFromString(map[string]string{"alice": "50", "zed": "0"}[u]))
		require.NoError(t, err)
	}
	svc := b.token(t, "gateway", httpapi.RoleService)
	usage := func(body string) (int, map[string]any) {
		t.Helper()
		status, _, out := b.do(t, http.MethodPost, "/v1/agent/usage", svc, body)
		return status, out
	}

	status, out := usage(`{"requestId":"r1","username":"alice","modelName":"m","inputTokens":3}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, "3.00000000", out["deductedFen"])

	// The same id with a body that costs nothing is another body: a 409.
	status, out = usage(`{"requestId":"r1","username":"alice","modelName":"m","inputTokens":0}`)
	require.Equal(t, http.StatusConflict, status, "%v", out)
	require.Equal(t, "3.00000000", out["error"].(map[string]any)["deductedFen"], "the first charge")

	// The price drops to zero, then the same body is retried: a replay of
	// the first charge, not a new free request.
	price("0")
	status, out = usage(`{"requestId":"r1","username":"alice","modelName":"m","inputTokens":3}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, true, out["replayed"], "%v", out)
	require.Equal(t, "3.00000000", out["deductedFen"])
	require.Equal(t, "3.00000000", out["costFen"], "the first charge's cost, not today's price")
	require.EqualValues(t, 300000000, out["costMicroFen"])

	// And at another price: still the first charge's cost.
	price("2000000")
	status, out = usage(`{"requestId":"r1","username":"alice","modelName":"m","inputTokens":3}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, true, out["replayed"])
	require.Equal(t, "3.00000000", out["costFen"])

	// A request whose first body cost nothing holds its id too, also on an
	// empty balance.
	price("0")
	status, out = usage(`{"requestId":"z1","username":"zed","modelName":"m","inputTokens":5}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, false, out["replayed"])
	require.Equal(t, "0.00000000", out["deductedFen"])
	status, out = usage(`{"requestId":"z1","username":"zed","modelName":"m","inputTokens":5}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, true, out["replayed"])
	price("1000000")
	status, out = usage(`{"requestId":"z1","username":"zed","modelName":"m","inputTokens":6}`)
	require.Equal(t, http.StatusConflict, status, "another body of a free request: %v", out)
	status, out = usage(`{"requestId":"z1","username":"zed","modelName":"m","inputTokens":5}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	require.Equal(t, true, out["replayed"], "a replay of the free request, not a 402")
	require.Equal(t, "0.00000000", out["costFen"])

	bal, err := store.NewBalances(nil, b.redis).Balance(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, "47.00000000", bal.StringFixed(8), "alice paid once")
}

// API request ids and the keys the consumer derives for messages without a
// deduction id ("msg:" and the message id, or "sha256:" and a hash) share
// the ledger's (user, DEDUCT, id) key: a request id of that form is
// refused, each prefix, so a request can never be taken for a foreign
// deduction (and refunded as its second charge) nor the reverse.
func TestRequestIDsNeverShareKeysWithForeignMessages(t *testing.T) {
	t.Parallel()
	b := setup(t, options{})
	ctx := context.Background()
	require.NoError(t, store.NewPrices(b.db, b.redis).Set(ctx, store.Pricing{Model: "m", Input: decimal.RequireFromString("1000000"), Enabled: true}))
	_, err := store.NewAccounts(b.db).Create(ctx, "alice", "", decimal.RequireFromString("50"))
	require.NoError(t, err)
	// A Spring producer's deduction, as the consumer applies it.
	res, err := store.NewLedger(b.db).ApplyDebits(ctx, []store.Debit{{Username: "alice", ID: "msg:spring-9", Amount: decimal.RequireFromString("2"),
		ModelName: "m", Source: "consumer", SelfSettled: true, OccurredAt: time.Now()}})
	require.NoError(t, err)
	require.True(t, res[0].Applied)
	svc := b.token(t, "gateway", httpapi.RoleService)

	for _, id := range []string{"msg:spring-9", "msg:x", "sha256:" + strings.Repeat("ab", 32), "sha256:x"} {
		status, _, out := b.do(t, http.MethodPost, "/v1/agent/usage", svc, `{"requestId":"`+id+`","username":"alice","modelName":"m","inputTokens":5}`)
		require.Equal(t, http.StatusBadRequest, status, "%s: %v", id, out)
		require.Contains(t, out["error"].(map[string]any)["message"], "requestId", id)
	}
	for _, id := range []string{"MSG:x", "msgx", "msg", "x:msg:y", "sha256"} {
		status, _, out := b.do(t, http.MethodPost, "/v1/agent/usage", svc, `{"requestId":"`+id+`","username":"alice","modelName":"m","inputTokens":1}`)
		require.Equal(t, http.StatusOK, status, "%s is not a derived key: %v", id, out)
	}
	bal, err := store.NewBalances(nil, b.redis).Balance(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, "43.00000000", bal.StringFixed(8), "the five ordinary ids only")
	pending, err := store.NewBalances(nil, b.redis).Pending(ctx, "alice")
	require.NoError(t, err)
	require.Len(t, pending, 5)
}
