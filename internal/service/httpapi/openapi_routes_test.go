package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/eisland/isle/internal/kit/images"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/objstore"
	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/internal/kit/rabbitadmin"
	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/internal/service/console"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/internal/service/reconcile"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

// Every operation of the OpenAPI document answers as the document says:
// the API with the operator console mounted, as cmd/api serves it, over
// real services, each answer checked against the document the API serves
// (openapi_conformance_test.go). The console's operations are driven to
// every answer the document lists for them: each status with each media
// type, the login form and the error model alike.
func TestEveryAnswerIsAsDocumented(t *testing.T) {
	t.Parallel()
	b, c := conformanceSetup(t, true)
	bare, _ := conformanceSetup(t, false) // an API that serves no console
	bare.http.Close()
	bare.http = httptest.NewServer(c.wrap(bare.srv))
	t.Cleanup(bare.http.Close)

	driveAPI(t, b)
	driveConsole(t, b, bare)

	c.requireClean(t)
	c.requireEveryOperation(t)
	c.requireEveryAnswer(t, "/admin/")
	unseen := c.unseen()
	t.Logf("%d documented answers no request drew (dependencies down, limits, races):\n%s", len(unseen), strings.Join(unseen, "\n"))
}

// conformanceSetup serves the API over real, isolated services as setup
// does, with the operator console under /admin when withConsole, each
// answer checked by the returned conformance.
func conformanceSetup(t *testing.T, withConsole bool) (*testBundle, *conformance) {
	t.Helper()
	conn, prefix := storetest.AMQP(t)
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	require.NoError(t, tp.Declare(conn))
	log := slog.New(correlation.Handler(slog.NewJSONHandler(io.Discard, nil)))
	b := &testBundle{db: storetest.MySQL(t), redis: storetest.Redis(t), tp: tp, reg: prometheus.NewRegistry(), log: log, now: time.Now()}
	b.pub, err = messaging.NewPublisher(messaging.PublisherConfig{URL: storetest.AMQPURL(), Timeout: 5 * time.Second}, tp, nil, log)
	require.NoError(t, err)
	t.Cleanup(func() { b.pub.Close() })
	b.objDir = t.TempDir()
	b.objects, err = objstore.Open("file://"+b.objDir, objstore.Options{})
	require.NoError(t, err)
	backends := httpapi.Backends{DB: b.db, Redis: b.redis, Publisher: b.pub, Billing: billing.New(b.db, b.redis), Log: log, Registry: b.reg,
		Topology: tp, Objects: b.objects, Alipay: payKeys(t).alipay, Wechat: payKeys(t).wechat}
	if withConsole {
		broker, err := rabbitadmin.New(storetest.ManagementURL(), "/")
		require.NoError(t, err)
		backends.Admin, err = console.New(console.Config{Prefix: "/admin"}, console.Backends{
			DB: b.db, Redis: b.redis, Topology: tp, Broker: broker, Publisher: b.pub, Log: log,
			Jobs:   []console.Job{{Job: reconcile.NewOutboxPurge(b.db, reconcile.OutboxPurgeConfig{}, nil, log), Schedule: "@every 1h"}},
			Runner: reconcile.Runner{Redis: b.redis, Runs: store.NewJobRuns(b.db), Log: log, Owner: "openapi-test"},
			Operator: func(r *http.Request) string {
				p, _ := httpapi.PrincipalFrom(r.Context())
				return p.Subject
			},
		})
		require.NoError(t, err)
	}
	b.srv, err = httpapi.New(httpapi.Config{JWTSecret: secret, BanCheckInterval: banPeriod}, backends)
	require.NoError(t, err)
	c := newConformance(t, b.srv)
	b.http = httptest.NewServer(c.wrap(b.srv))
	t.Cleanup(b.http.Close)
	return b, c
}

// driveAPI calls every operation outside the console: its answer to a
// request it takes, and the refusals a client meets most.
func driveAPI(t *testing.T, b *testBundle) {
	t.Helper()
	ctx := t.Context()
	ann, svc, admin := b.token(t, "ann", httpapi.RoleUser), b.token(t, "gateway", httpapi.RoleService), b.token(t, "root", httpapi.RoleAdmin)
	for user, fen := range map[string]string{"ann": "100", "zed": "0", "wendy": "0"} {
		_, err := store.NewAccounts(b.db).Create(ctx, user, user+"@example.com", decimal.RequireFromString(fen))
		require.NoError(t, err)
	}
	require.NoError(t, store.NewPrices(b.db, b.redis).Set(ctx, store.Pricing{Model: "m", Input: decimal.RequireFromString("1000000"), Enabled: true}))

	call := func(method, path, token, body string, want int, headers ...string) map[string]any {
		t.Helper()
		status, _, out := b.do(t, method, path, token, body, headers...)
		require.Equal(t, want, status, "%s %s: %v", method, path, out)
		return out
	}
	call(http.MethodGet, "/healthz", "", "", http.StatusOK)
	call(http.MethodGet, "/readyz", "", "", http.StatusOK)
	call(http.MethodGet, "/metrics", "", "", http.StatusNotFound)
	call(http.MethodGet, "/openapi.json", "", "", http.StatusOK)
	call(http.MethodGet, "/v1/me", ann, "", http.StatusOK)
	call(http.MethodGet, "/v1/me", "", "", http.StatusUnauthorized)

	codeReq := `{"email":"ann@example.com","scene":"LOGIN"}`
	call(http.MethodPost, "/v1/auth/email-codes", "", codeReq, http.StatusAccepted)
	call(http.MethodPost, "/v1/auth/email-codes", "", codeReq, http.StatusTooManyRequests)
	call(http.MethodPost, "/v1/auth/email-codes", "", `{"email":"ann@example.com","scene":"NAP"}`, http.StatusBadRequest)
	code := b.takeCode(t).Code
	wrong := map[bool]string{true: "999999", false: "000000"}[code == "000000"]
	call(http.MethodPost, "/v1/auth/email-codes/verify", "", `{"email":"ann@example.com","scene":"LOGIN","code":"`+wrong+`"}`, http.StatusBadRequest)
	call(http.MethodPost, "/v1/auth/email-codes/verify", "", `{"email":"ann@example.com","scene":"LOGIN","code":"`+code+`"}`, http.StatusOK)
	call(http.MethodPost, "/v1/auth/email-codes/verify", "", `{"email":"ann@example.com","scene":"REGISTER","code":"123456"}`, http.StatusNotFound)

	usage := func(id, user, model string, tokens int) string {
		return fmt.Sprintf(`{"requestId":%q,"username":%q,"modelName":%q,"inputTokens":%d}`, id, user, model, tokens)
	}
	call(http.MethodPost, "/v1/agent/usage", svc, usage("r1", "ann", "m", 3), http.StatusOK)
	call(http.MethodPost, "/v1/agent/usage", svc, usage("r1", "ann", "m", 3), http.StatusOK)
	call(http.MethodPost, "/v1/agent/usage", svc, usage("r1", "ann", "m", 4), http.StatusConflict)
	call(http.MethodPost, "/v1/agent/usage", svc, usage("r2", "ann", "none", 3), http.StatusBadRequest)
	call(http.MethodPost, "/v1/agent/usage", svc, usage("r3", "nobody", "m", 3), http.StatusNotFound)
	call(http.MethodPost, "/v1/agent/usage", svc, usage("z1", "zed", "m", 3), http.StatusPaymentRequired)
	call(http.MethodPost, "/v1/agent/usage", ann, usage("r4", "ann", "m", 3), http.StatusForbidden)
	batch := `{"items":[` + strings.Join([]string{usage("r1", "ann", "m", 3), usage("b1", "ann", "m", 2), usage("r1", "ann", "m", 4),
		usage("b2", "ann", "none", 3), usage("b3", "nobody", "m", 3), usage("b4", "zed", "m", 3), `{"requestId":"b 5"}`}, ",") + `]}`
	call(http.MethodPost, "/v1/agent/usage/batch", svc, batch, http.StatusOK)
	call(http.MethodPost, "/v1/agent/usage/batch", svc, `{"items":`, http.StatusBadRequest)
	call(http.MethodPost, "/v1/agent/usage/batch", svc, `{"items":[`+strings.Repeat(usage("x", "ann", "m", 1)+",", 100)+usage("x", "ann", "m", 1)+`]}`,
		http.StatusRequestEntityTooLarge)
	call(http.MethodPost, "/v1/agent/usage/batch", ann, `{"items":[]}`, http.StatusForbidden)
	call(http.MethodGet, "/v1/agent/balance", ann, "", http.StatusOK)
	call(http.MethodGet, "/v1/agent/balance", admin, "", http.StatusForbidden)

	status, out := b.upload(t, ann, "kind=avatar&name=me.png", images.SamplePNG(200, 1), false)
	require.Equal(t, http.StatusCreated, status, "%v", out)
	object := "/v1/objects/" + jsonID(out["id"])
	status, _ = b.upload(t, ann, "kind=avatar&name=me.png", []byte("not an image"), false)
	require.Equal(t, http.StatusUnsupportedMediaType, status)
	call(http.MethodGet, object, ann, "", http.StatusOK)
	call(http.MethodGet, object, admin, "", http.StatusOK)
	call(http.MethodGet, "/v1/objects/999999999", ann, "", http.StatusNotFound)
	status, header, _ := b.get(t, object+"/content", ann)
	require.Equal(t, http.StatusOK, status)
	call(http.MethodGet, object+"/content", ann, "", http.StatusNotModified, "If-None-Match", header.Get("ETag"))

	orderReq := `{"product":"agent-recharge","amountFen":500,"channel":"ALIPAY"}`
	placed := call(http.MethodPost, "/v1/payments/orders", ann, orderReq, http.StatusCreated)
	call(http.MethodPost, "/v1/payments/orders", ann, orderReq, http.StatusConflict)
	call(http.MethodPost, "/v1/payments/orders", ann, `{"product":"gold","amountFen":500,"channel":"ALIPAY"}`, http.StatusBadRequest)
	call(http.MethodGet, "/v1/payments/orders/"+placed["outTradeNo"].(string), ann, "", http.StatusOK)
	call(http.MethodGet, "/v1/payments/orders/abc123", ann, "", http.StatusNotFound)
	paid, err := store.NewOrders(b.db, b.redis).Get(ctx, placed["outTradeNo"].(string))
	require.NoError(t, err)
	status, text := b.postAlipay(t, alipayNotice(paid, "TRADE_SUCCESS", "5.00"), true)
	require.Equal(t, http.StatusOK, status, text)
	status, text = b.postAlipay(t, alipayNotice(paid, "TRADE_SUCCESS", "5.00"), false)
	require.Equal(t, http.StatusBadRequest, status, text)
	k := payKeys(t).keys
	wendys := b.order(t, "wendy", paynotify.ChannelWechat, 3000)
	require.Equal(t, http.StatusNoContent, b.postWechat(t, wechatBody(t, wendys, k.APIv3Key, false), time.Now(), nil, k.WechatSerial))
	require.Equal(t, http.StatusUnauthorized, b.postWechat(t, wechatBody(t, wendys, k.APIv3Key, false), time.Now(),
		func(s string) string { return corruptSignature(t, s) }, k.WechatSerial))

	call(http.MethodPost, "/v1/identity/verifications/cert-1/result", svc, `{"username":"ann","status":"PASSED","materialInfo":"{\"enc\":1}"}`, http.StatusOK)
	call(http.MethodPost, "/v1/identity/verifications/cert-2/result", svc, `{"username":"ann","status":"MAYBE"}`, http.StatusBadRequest)
	call(http.MethodGet, "/v1/identity/status", ann, "", http.StatusOK)

	session := b.session(t, ann, "2048")
	call(http.MethodPost, "/v1/games/chess/sessions", ann, "", http.StatusBadRequest)
	call(http.MethodPost, "/v1/games/2048/scores", ann, scoreBody("s1", session, 4, 1000, 2), http.StatusAccepted)
	call(http.MethodPost, "/v1/games/2048/scores", ann, scoreBody("s1", session, 4, 1000, 2), http.StatusConflict)
	call(http.MethodGet, "/v1/games/2048/leaderboard?limit=5", ann, "", http.StatusOK)
	call(http.MethodGet, "/v1/games/2048/leaderboard?limit=0", ann, "", http.StatusBadRequest)
}

// browserAccept is what a browser sends when it opens a page.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// driveConsole opens every page of the console and takes every action, as
// an admin's browser and script would and as others would: each answer the
// document lists for the console. bare serves the API without a console.
func driveConsole(t *testing.T, b, bare *testBundle) {
	t.Helper()
	admin, ann := b.token(t, "root", httpapi.RoleAdmin), b.token(t, "ann", httpapi.RoleUser)
	adminCookie, annCookie := httpapi.AdminCookie+"="+admin, httpapi.AdminCookie+"="+ann
	expect := func(want int, method, url, body string, header ...string) *http.Response {
		t.Helper()
		resp, text := send(t, method, url, body, header...)
		require.Equal(t, want, resp.StatusCode, "%s %s: %.300s", method, url, text)
		return resp
	}

	// Logging in and out.
	expect(http.StatusOK, http.MethodGet, b.http.URL+"/admin/login?next=/admin/jobs", "", "Accept", browserAccept)
	expect(http.StatusNotFound, http.MethodGet, bare.http.URL+"/admin/login", "")
	login := func(token string) string { return url.Values{"token": {token}, "next": {"/admin/jobs"}}.Encode() }
	expect(http.StatusSeeOther, http.MethodPost, b.http.URL+"/admin/login", login(admin))
	expect(http.StatusUnauthorized, http.MethodPost, b.http.URL+"/admin/login", login("forged"))
	expect(http.StatusForbidden, http.MethodPost, b.http.URL+"/admin/login", login(ann))
	expect(http.StatusBadRequest, http.MethodPost, b.http.URL+"/admin/login", "token=%zz")
	expect(http.StatusRequestEntityTooLarge, http.MethodPost, b.http.URL+"/admin/login", login(strings.Repeat("x", 17<<10)))
	expect(http.StatusNotFound, http.MethodPost, bare.http.URL+"/admin/login", login(admin))
	expect(http.StatusSeeOther, http.MethodPost, b.http.URL+"/admin/logout", "")

	// Every page, to an admin's browser and script, and to everyone else.
	dead := storeDeadMessage(t, b)
	pages := []string{"/admin/", "/admin/dead", "/admin/dead/" + dead, "/admin/money?user=ann", "/admin/outbox", "/admin/jobs", "/admin/static/console.css"}
	for _, page := range pages {
		expect(http.StatusOK, http.MethodGet, b.http.URL+page, "", "Accept", browserAccept, "Cookie", adminCookie)
		expect(http.StatusOK, http.MethodGet, b.http.URL+page, "", "Authorization", "Bearer "+admin)
		expect(http.StatusUnauthorized, http.MethodGet, b.http.URL+page, "")
		expect(http.StatusUnauthorized, http.MethodGet, b.http.URL+page, "", "Accept", browserAccept)
		expect(http.StatusForbidden, http.MethodGet, b.http.URL+page, "", "Authorization", "Bearer "+ann)
		expect(http.StatusForbidden, http.MethodGet, b.http.URL+page, "", "Accept", browserAccept, "Cookie", annCookie)
		expect(http.StatusNotFound, http.MethodGet, bare.http.URL+page, "", "Authorization", "Bearer "+admin)
	}
	asAdmin := []string{"Accept", browserAccept, "Cookie", adminCookie}
	for page, want := range map[string]int{
		"/admin/dead?domain=&reason=&since=&state=":             http.StatusOK, // the filter form, as sent untouched
		"/admin/dead?domain=email&reason=x&since=24h&state=all": http.StatusOK,
		"/admin/dead?domain=nope":                               http.StatusBadRequest,
		"/admin/dead?before=yesterday":                          http.StatusBadRequest,
		"/admin/dead/email/0":                                   http.StatusBadRequest,
		"/admin/dead/email/999999":                              http.StatusNotFound,
		"/admin/dead/nope/1":                                    http.StatusNotFound,
		"/admin/money":                                          http.StatusOK,
		"/admin/money?user=" + strings.Repeat("u", 65):          http.StatusBadRequest,
		"/admin/money?user=nobody":                              http.StatusNotFound,
	} {
		expect(want, http.MethodGet, b.http.URL+page, "", asAdmin...)
	}

	// Every action, with the page's CSRF token and without, and to others.
	resp, text := send(t, http.MethodGet, b.http.URL+"/admin/dead", "", asAdmin...)
	require.Equal(t, http.StatusOK, resp.StatusCode, text)
	m := csrfField.FindStringSubmatch(text)
	require.NotNil(t, m, "the page's forms carry a CSRF token")
	var session []string
	for _, ck := range resp.Cookies() {
		session = append(session, ck.Name+"="+ck.Value)
	}
	withCSRF := []string{"Accept", browserAccept, "Cookie", strings.Join(append(session, adminCookie), "; ")}
	csrf := "csrf=" + url.QueryEscape(m[1])
	actions := map[string]string{"/admin/dead/replay": "ref=" + dead, "/admin/outbox/replay": "table=outbox&all=1", "/admin/jobs/outbox-purge/run": ""}
	for action, form := range actions {
		expect(http.StatusOK, http.MethodPost, b.http.URL+action, csrf+"&"+form, withCSRF...)
		expect(http.StatusForbidden, http.MethodPost, b.http.URL+action, form+"&x=1", asAdmin...)
		expect(http.StatusUnauthorized, http.MethodPost, b.http.URL+action, csrf+"&"+form, "Accept", browserAccept)
		expect(http.StatusForbidden, http.MethodPost, b.http.URL+action, csrf+"&"+form, "Authorization", "Bearer "+ann)
		expect(http.StatusBadRequest, http.MethodPost, b.http.URL+action, "csrf=%zz", withCSRF...)
		expect(http.StatusRequestEntityTooLarge, http.MethodPost, b.http.URL+action, csrf+"&pad="+strings.Repeat("x", 257<<10), withCSRF...)
		expect(http.StatusNotFound, http.MethodPost, bare.http.URL+action, csrf+"&"+form, "Authorization", "Bearer "+admin)
	}
	expect(http.StatusBadRequest, http.MethodPost, b.http.URL+"/admin/dead/replay", csrf, withCSRF...)
	expect(http.StatusBadRequest, http.MethodPost, b.http.URL+"/admin/outbox/replay", csrf+"&table=outbox", withCSRF...)
	expect(http.StatusNotFound, http.MethodPost, b.http.URL+"/admin/jobs/nope/run", csrf, withCSRF...)

	// What the document does not list is the router's 404 or 405.
	expect(http.StatusNotFound, http.MethodGet, b.http.URL+"/admin/nope", "", asAdmin...)
	expect(http.StatusNotFound, http.MethodPost, b.http.URL+"/admin/nope", csrf, withCSRF...)
	expect(http.StatusMethodNotAllowed, http.MethodGet, b.http.URL+"/admin/dead/replay", "", asAdmin...)
}

// storeDeadMessage stores a dead email message, as its DLQ consumer
// would, and returns its console reference (email/ID).
func storeDeadMessage(t *testing.T, b *testBundle) string {
	t.Helper()
	d, ok := b.tp.Domain(topology.DomainEmail)
	require.True(t, ok)
	body := []byte(`{"email":"ann@example.com","scene":"LOGIN","code":"123456"}`)
	why := "smtp: 550 mailbox unavailable"
	dl := &store.DeadLetter{
		DedupKey: store.DeadLetterKey(d.DLQ, "m-1", 0, body), Queue: d.DLQ, RoutingKey: d.DLQKey, MessageType: d.TypeID, MessageID: "m-1",
		TraceID: "t-1", Subject: "ann@example.com", Body: body, Headers: `{"x-dead-reason":"retries exhausted"}`,
		RetryCount: d.Retry.MaxRetries, LastError: &why, DeadAt: time.Now().UTC(),
	}
	saved, err := store.NewDeadLetters(b.db).Save(context.Background(), d.DLQTable, dl)
	require.NoError(t, err)
	require.True(t, saved)
	return fmt.Sprintf("%s/%d", d.Name, dl.ID)
}
