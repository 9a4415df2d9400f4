package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/objstore"
	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/internal/service/billing"
	"github.com/eisland/isle/internal/service/httpapi"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/prometheus/client_golang/prometheus"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

var secret = []byte("test-secret-test-secret-test-secret!")

type testBundle struct {
	srv   *httpapi.Server
	http  *httptest.Server
	db    *gorm.DB
	redis *store.Redis
	pub   *messaging.Publisher
	tp    *topology.Topology
	reg   *prometheus.Registry
	log   *slog.Logger // the server's: as cmd/api's, it adds the correlation ids
	now   time.Time

	objects objstore.Store // the source store, a directory
	objDir  string
}

type options struct {
	redisAddr     string // default: the test Redis
	amqpURL       string // default: the test RabbitMQ
	routes        []httpapi.Route
	maxBody       int64
	logOut        io.Writer       // where the server logs, as JSON; default: nowhere
	avatarMax     int64           // largest avatar; default: the API's
	wallMax       int64           // largest wallpaper; default: the API's
	scoreRate     int             // score submissions per user and game a minute; default: the API's
	proxies       httpapi.Proxies // whose X-Forwarded-For to believe; default: none
	publicMetrics bool            // serve /metrics on the API's address
}

// setup serves the platform (and extra routes) over real services.
func setup(t *testing.T, o options) *testBundle {
	t.Helper()
	_, prefix := storetest.AMQP(t)
	tp, err := topology.New(topology.Config{Prefix: prefix})
	require.NoError(t, err)
	var out = io.Discard
	if o.logOut != nil {
		out = o.logOut
	}
	log := slog.New(correlation.Handler(slog.NewJSONHandler(out, nil)))
	b := &testBundle{db: storetest.MySQL(t), tp: tp, reg: prometheus.NewRegistry(), log: log, now: time.Now()}
	b.redis = storetest.Redis(t)
	if o.redisAddr != "" {
		r, err := store.OpenRedis(store.RedisConfig{Addr: o.redisAddr, KeyPrefix: b.redis.Keys().Prefix(), Timeout: 500 * time.Millisecond})
		require.NoError(t, err)
		t.Cleanup(func() { r.Close() })
		b.redis = r
	}
	amqpURL := o.amqpURL
	if amqpURL == "" {
		amqpURL = storetest.AMQPURL()
	}
	b.pub, err = messaging.NewPublisher(messaging.PublisherConfig{URL: amqpURL, Timeout: 500 * time.Millisecond}, tp, nil, log)
	require.NoError(t, err)
	t.Cleanup(func() { b.pub.Close() })
	b.objDir = t.TempDir()
	b.objects, err = objstore.Open("file://"+b.objDir, objstore.Options{})
	require.NoError(t, err)
	b.srv, err = httpapi.New(httpapi.Config{JWTSecret: secret, MaxBodyBytes: o.maxBody, BanCheckInterval: banPeriod, AvatarMaxBytes: o.avatarMax,
		WallpaperMaxBytes: o.wallMax, ScoreSubmitPerMinute: o.scoreRate, Proxies: o.proxies, PublicMetrics: o.publicMetrics},
		httpapi.Backends{DB: b.db, Redis: b.redis, Publisher: b.pub, Billing: billing.New(b.db, b.redis), Log: log, Registry: b.reg,
			Topology: tp, Objects: b.objects, Alipay: payKeys(t).alipay, Wechat: payKeys(t).wechat})
	require.NoError(t, err)
	watchCtx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() { b.srv.WatchBans(watchCtx); close(watched) }()
	t.Cleanup(func() { stopWatch(); <-watched })
	for _, rt := range o.routes {
		b.srv.Handle(rt)
	}
	b.http = httptest.NewServer(b.srv)
	t.Cleanup(b.http.Close)
	return b
}

// conn opens an AMQP connection for inspecting the test's queues.
func (b *testBundle) conn(t *testing.T) (*amqp.Connection, error) {
	t.Helper()
	c, err := amqp.Dial(storetest.AMQPURL())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c, nil
}

func (b *testBundle) token(t *testing.T, sub string, role httpapi.Role) string {
	t.Helper()
	tok, err := httpapi.MintToken(secret, sub, role, time.Hour, time.Now())
	require.NoError(t, err)
	return tok
}

// do sends a request and returns the status, headers and decoded JSON body.
func (b *testBundle) do(t *testing.T, method, path, token, body string, headers ...string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, b.http.URL+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(raw, &out), "%s", raw)
	}
	return resp.StatusCode, resp.Header, out
}

// status sends a request with a JSON body and returns the answer's status,
// or the error that kept it from coming: for goroutines, where do's
// assertions may not stop the test.
func (b *testBundle) status(method, path, token, body string) (int, error) {
	req, err := http.NewRequestWithContext(context.Background(), method, b.http.URL+path, strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

// errorCode returns the error model's code, failing when the body is not one.
func errorCode(t *testing.T, body map[string]any) string {
	t.Helper()
	e, ok := body["error"].(map[string]any)
	require.True(t, ok, "not the error model: %v", body)
	require.NotEmpty(t, e["message"])
	return e["code"].(string)
}

// metric returns the value of one Prometheus series, or 0.
func (b *testBundle) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := b.reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	series:
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// The gateways' test keys and the verifiers the API trusts, made once.
const (
	testAlipayApp = "2021000000000001"
	testWechatMch = "1900000109"
)

type gatewayKeys struct {
	keys   paynotify.TestKeys
	alipay *paynotify.AlipayVerifier
	wechat *paynotify.WechatVerifier
}

var (
	payKeysOnce sync.Once
	payKeysVal  gatewayKeys
	payKeysErr  error
)

func payKeys(t *testing.T) gatewayKeys {
	t.Helper()
	payKeysOnce.Do(func() {
		k, err := paynotify.GenerateTestKeys()
		if err != nil {
			payKeysErr = err
			return
		}
		payKeysVal.keys = k
		if payKeysVal.alipay, err = paynotify.NewAlipayVerifier(k.AlipayConfig(testAlipayApp, "")); err != nil {
			payKeysErr = err
			return
		}
		wc := k.WechatCertConfig()
		wc.MchID = testWechatMch
		payKeysVal.wechat, payKeysErr = paynotify.NewWechatVerifier(wc)
	})
	require.NoError(t, payKeysErr)
	return payKeysVal
}
