package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/images"
	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/go-chi/chi/v5"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

// badRequestsBuilt is how many bad requests the table holds: the test
// fails when it drops below (the two tables together hold at least 60;
// handlers/badinput_test.go has the consumers').
const badRequestsBuilt = 221

// A badRequest is one malformed, oversized, wrong-type, replayed or forged
// request to an endpoint and what it must get: its status, and its error
// code (the error model's error.code, or WeChat's failure body's code; ""
// for a replay, answered as the first time) or its exact text (Alipay's
// "fail"). Whatever it gets, it changes nothing (see badState).
type badRequest struct {
	name   string
	req    *http.Request
	status int
	code   string
	reason string // the game endpoints' error.reason, when set
	text   string // the exact body, for answers that are not JSON
}

// TestBadInputChangesNothing sends every endpoint of routes.go the bad
// inputs of its contract (badinput_cases_test.go) and checks that each gets
// its status and code and changes no state: no MySQL row, no Redis key but
// the counters and caches storetest.MayMove names, no message on any queue
// of the topology, no file in the object store (doc/badinput.md).
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel() // its services are its own; its cases run one after the other
	f := newBadFixture(t)
	cases := f.badRequests(t)
	t.Logf("%d bad requests across %d routes", len(cases), len(f.b.srv.Routes()))
	require.GreaterOrEqual(t, len(cases), badRequestsBuilt, "the bad-input table lost cases")
	f.everyRouteIsCovered(t, cases)

	before := f.state(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, ctype, body := f.send(t, c.req)
			after := f.state(t)
			changed := before.diff(after, f.mayMove)
			if moved := before.diff(after, nil); len(moved) > len(changed) {
				t.Logf("allowed to move: %v", moved)
			}
			before = after // the next case starts from here, whatever this one did
			require.Equal(t, c.status, status, "%s %s: %s", c.req.Method, c.req.URL.Path, body)
			f.checkAnswer(t, c, ctype, body)
			require.Empty(t, changed, "%s %s changed state", c.req.Method, c.req.URL.Path)
		})
	}
}

// badFixture is the API over real services with the data the bad requests
// aim at: accounts, a price, pending orders, an object, a recorded
// identity pass, a game session with an accepted score and an issued email
// code.
type badFixture struct {
	b       *testBundle
	conn    *amqp.Connection // for the queue depths
	mayMove func(string) bool

	ann, bob, svc, admin string // tokens
	annOrder, wendyOrder store.PaymentOrder
	bobObject            string // the id of bob's avatar
	session              string // ann's 2048 session
	other                paynotify.TestKeys
}

func newBadFixture(t *testing.T) *badFixture {
	t.Helper()
	b := setup(t, options{avatarMax: 1024, wallMax: 1024})
	f := &badFixture{b: b, mayMove: storetest.InFamilies(b.redis, storetest.MayMove()...)}
	f.conn, _ = b.conn(t)
	ctx := context.Background()
	f.ann, f.bob = b.token(t, "ann", httpapi.RoleUser), b.token(t, "bob", httpapi.RoleUser)
	f.svc, f.admin = b.token(t, "gateway", httpapi.RoleService), b.token(t, "root", httpapi.RoleAdmin)

	require.NoError(t, store.NewPrices(b.db, b.redis).Set(ctx, store.Pricing{Model: "m", Input: decimal.RequireFromString("1000000"), Enabled: true}))
	// A price past the store's cap, as another writer of the table may leave.
	require.NoError(t, b.db.Exec("INSERT INTO agent_model_pricing (model_name, input_fen_per_mtok, output_fen_per_mtok) VALUES ('huge', 100000000, 100000000)").Error)
	for user, fen := range map[string]string{"ann": "50", "bob": "10", "zed": "0", "wendy": "0"} {
		_, err := store.NewAccounts(b.db).Create(ctx, user, user+"@example.com", decimal.RequireFromString(fen))
		require.NoError(t, err)
	}
	warm := []struct{ token, method, path, body string }{
		// A charge, and zed's empty balance: their hot balances are loaded.
		{f.svc, http.MethodPost, "/v1/agent/usage", `{"requestId":"r1","username":"ann","modelName":"m","inputTokens":3}`},
		{f.svc, http.MethodPost, "/v1/agent/usage", `{"requestId":"z1","username":"zed","modelName":"m","inputTokens":3}`},
		{f.svc, http.MethodPost, "/v1/identity/verifications/cert-1/result", `{"username":"ivy","status":"PASSED","materialInfo":"{\"enc\":1}"}`},
		{"", http.MethodPost, "/v1/auth/email-codes", `{"email":"ann@example.com","scene":"LOGIN"}`},
	}
	for _, w := range warm {
		status, _, out := b.do(t, w.method, w.path, w.token, w.body)
		require.Less(t, status, 500, "%s: %v", w.path, out)
	}
	f.annOrder = b.order(t, "ann", paynotify.ChannelAlipay, 5000)
	f.wendyOrder = b.order(t, "wendy", paynotify.ChannelWechat, 3000)
	status, out := b.upload(t, f.bob, "kind=avatar&name=me.png", images.SamplePNG(200, 1), false)
	require.Equal(t, http.StatusCreated, status, "%v", out)
	f.bobObject = jsonID(out["id"])
	f.session = b.session(t, f.ann, "2048")
	status, _, out = b.do(t, http.MethodPost, "/v1/games/2048/scores", f.ann, scoreBody("s-dup", f.session, 4, 1000, 2))
	require.Equal(t, http.StatusAccepted, status, "%v", out)

	var err error
	f.other, err = paynotify.GenerateTestKeys() // a gateway key the API does not trust
	require.NoError(t, err)
	require.NoError(t, b.srv.CheckBans(ctx), "the ban list is built before the first snapshot, not during a case")
	return f
}

// everyRouteIsCovered fails when a route of routes.go has no bad request:
// a new endpoint joins the table with its first bad inputs.
func (f *badFixture) everyRouteIsCovered(t *testing.T, cases []badRequest) {
	t.Helper()
	covered := map[string]bool{}
	for _, c := range cases {
		for _, rt := range f.b.srv.Routes() {
			rctx := chi.NewRouteContext()
			if f.b.srv.Router().Match(rctx, rt.Method, c.req.URL.Path) && strings.Join(rctx.RoutePatterns, "") == rt.Path {
				covered[rt.Path] = true
			}
		}
	}
	for _, rt := range f.b.srv.Routes() {
		require.True(t, covered[rt.Path], "no bad request for %s %s", rt.Method, rt.Path)
	}
}

// send sends req and returns the status, the content type and the body.
func (f *badFixture) send(t *testing.T, req *http.Request) (int, string, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header.Get("Content-Type"), body
}

// checkAnswer checks the answer's text, error code and reason.
func (f *badFixture) checkAnswer(t *testing.T, c badRequest, ctype string, body []byte) {
	t.Helper()
	label := c.req.Method + " " + c.req.URL.Path
	if c.text != "" {
		require.Equal(t, c.text, string(body), label)
		return
	}
	if c.code == "" { // not refused: an answer to a replay, whose body says as the first
		return
	}
	require.True(t, strings.HasPrefix(ctype, "application/json"), "%s: %s %s", label, ctype, body)
	var out map[string]any
	require.NoError(t, json.Unmarshal(body, &out), "%s: %s", label, body)
	if e, ok := out["error"].(map[string]any); ok { // the API's error model
		require.Equal(t, c.code, e["code"], "%s: %s", label, body)
		require.NotEmpty(t, e["message"], label)
		if c.reason != "" {
			require.Equal(t, c.reason, e["reason"], "%s: %s", label, body)
		}
		return
	}
	require.Equal(t, c.code, out["code"], "%s: %s", label, body) // WeChat's failure body
	require.NotEmpty(t, out["message"], label)
}

// badState is what a bad request must leave as it was: MySQL, Redis and
// the files of the object store (storetest.State), and the depth of every
// queue of the topology.
type badState struct {
	store  storetest.State
	queues map[string]int
}

func (f *badFixture) state(t *testing.T) badState {
	t.Helper()
	s := badState{store: storetest.TakeState(t, f.b.db, f.b.redis, f.b.objDir), queues: map[string]int{}}
	for _, q := range f.b.tp.Queues() {
		s.queues[q.Name] = storetest.QueueDepth(t, f.conn, q.Name)
	}
	return s
}

func (s badState) diff(after badState, skip func(string) bool) []string {
	out := s.store.Diff(after.store, skip)
	for name, n := range after.queues {
		if s.queues[name] != n {
			out = append(out, fmt.Sprintf("queue %s: %d -> %d messages", name, s.queues[name], n))
		}
	}
	slices.Sort(out)
	return out
}

// request builds a request to the test server; headers are name, value pairs.
func (f *badFixture) request(t *testing.T, method, path, token string, body io.Reader, headers ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, f.b.http.URL+path, body)
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	return req
}

// jsonReq is a request with a JSON body (none when body is "").
func (f *badFixture) jsonReq(t *testing.T, method, path, token, body string, headers ...string) *http.Request {
	t.Helper()
	if body != "" {
		headers = append([]string{"Content-Type", "application/json"}, headers...)
	}
	return f.request(t, method, path, token, strings.NewReader(body), headers...)
}

// chunked hides a body's length from the server.
func chunked(body []byte) io.Reader { return io.MultiReader(bytes.NewReader(body)) }

// sinceNow is a time relative to now, for signed timestamps.
func sinceNow(d time.Duration) time.Time { return time.Now().Add(d) }
