package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

// Each item of a batch is answered as POST /v1/agent/usage would answer it
// sent alone, in the batch's order: two fleets alike, one sent the items
// one by one, the other as one batch, give each item the same status and
// the same body, and the same balances. A request sent alone before the
// batch is replayed in it, not charged again.
func TestABatchAnswersEachItemAsTheSingleEndpoint(t *testing.T) {
	t.Parallel()
	items := []string{
		`{"requestId":"s1","username":"alice","modelName":"m","inputTokens":2}`,                   // sent alone before: a replay
		`{"requestId":"a1","username":"alice","modelName":"m","inputTokens":3}`,                   // charged
		`{"requestId":"a1","username":"alice","modelName":"m","inputTokens":3}`,                   // the item before again: a replay
		`{"requestId":"a1","username":"alice","modelName":"m","inputTokens":4}`,                   // another body: 409
		`{"requestId":"a2","username":"alice","modelName":"m","inputTokens":9}`,                   // capped at what is left
		`{"requestId":"a3","username":"alice","modelName":"m","inputTokens":1}`,                   // the balance is zero: 402
		`{"requestId":"a4","username":"alice","modelName":"m"}`,                                   // costs nothing: charged
		`{"requestId":"b 1","username":"bob","modelName":"m","inputTokens":1}`,                    // invalid: 400
		`{"requestId":"b2","username":"bob","modelName":"nope","inputTokens":1}`,                  // no pricing: 400
		`{"requestId":"b3","username":"ghost","modelName":"m","inputTokens":1}`,                   // no such user: 404
		`{"requestId":"msg:b4","username":"bob","modelName":"m","inputTokens":1}`,                 // a foreign key's namespace: 400
		`{"requestId":"b5","username":"bob","modelName":"m","inputTokens":2,"cachedTokens":-1}`,   // invalid: 400
		`{"requestId":"b6","username":"bob","modelName":"m","inputTokens":2,"outputTokens":1}`,    // charged
		`{"requestId":"b7","username":"bob","modelName":"m","inputTokens":1,"reasoningTokens":2}`, // charged
	}
	type answer struct {
		Status int
		Body   map[string]any
	}
	fleet := func() (*testBundle, string) {
		b := setup(t, options{})
		ctx := context.Background()
		require.NoError(t, store.NewPrices(b.db, b.redis).Set(ctx, store.Pricing{Model: "m", Input: decimal.RequireFromString("1000000"),
			Output: decimal.RequireFromString("2000000"), Reasoning: decimal.RequireFromString("3000000"), Enabled: true}))
		for user, fen := range map[string]string{"alice": "10", "bob": "20"} {
			_, err := store.NewAccounts(b.db).Create(ctx, user, "", decimal.RequireFromString(fen))
			require.NoError(t, err)
		}
		svc := b.token(t, "gateway", httpapi.RoleService)
		status, _, out := b.do(t, http.MethodPost, "/v1/agent/usage", svc, items[0])
		require.Equal(t, http.StatusOK, status, "%v", out)
		return b, svc
	}

	one, svc1 := fleet()
	var alone []answer
	for _, item := range items {
		status, _, out := one.do(t, http.MethodPost, "/v1/agent/usage", svc1, item)
		alone = append(alone, answer{status, out})
	}
	many, svc2 := fleet()
	status, _, out := many.do(t, http.MethodPost, "/v1/agent/usage/batch", svc2, `{"items":[`+strings.Join(items, ",")+`]}`)
	require.Equal(t, http.StatusOK, status, "%v", out)
	results := out["results"].([]any)
	require.Len(t, results, len(items))
	for i, r := range results {
		res := r.(map[string]any)
		require.EqualValues(t, alone[i].Status, res["status"], "item %d: %s", i, items[i])
		if alone[i].Status == http.StatusOK {
			require.Equal(t, alone[i].Body, res["charge"], "item %d", i)
		} else {
			require.Equal(t, alone[i].Body["error"], res["error"], "item %d", i)
		}
	}
	for _, user := range []string{"alice", "bob"} {
		tok1, tok2 := one.token(t, user, httpapi.RoleUser), many.token(t, user, httpapi.RoleUser)
		_, _, bal1 := one.do(t, http.MethodGet, "/v1/agent/balance", tok1, "")
		_, _, bal2 := many.do(t, http.MethodGet, "/v1/agent/balance", tok2, "")
		require.Equal(t, bal1, bal2, user)
	}
	require.True(t, results[0].(map[string]any)["charge"].(map[string]any)["replayed"].(bool), "the request sent alone is replayed")

	// The batch again: every charged item is a replay, nothing moves.
	status, _, again := many.do(t, http.MethodPost, "/v1/agent/usage/batch", svc2, `{"items":[`+strings.Join(items, ",")+`]}`)
	require.Equal(t, http.StatusOK, status)
	for i, r := range again["results"].([]any) {
		if c, ok := r.(map[string]any)["charge"].(map[string]any); ok {
			require.True(t, c["replayed"].(bool), fmt.Sprint("item ", i))
		}
	}
}
