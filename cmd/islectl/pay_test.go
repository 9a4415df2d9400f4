package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"
)

// gateway is the API's callback endpoints in small: the real verifiers,
// the channel and amount checked against the order, and the API's answers
// (doc/payments.md): Alipay "success" or 400 "fail", WeChat 204 or a 4xx.
type gateway struct {
	alipay *paynotify.AlipayVerifier
	wechat *paynotify.WechatVerifier
	orders map[string]store.PaymentOrder // by out_trade_no

	mu      sync.Mutex
	notices []paynotify.Notice // verified, paid or not
}

func (g *gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var n paynotify.Notice
	var err error
	switch r.URL.Path {
	case "/v1/payments/notify/alipay":
		if err = r.ParseForm(); err == nil {
			var an paynotify.AlipayNotice
			an, err = g.alipay.VerifyAlipay(r.PostForm)
			n = an.Notice()
		}
	case "/v1/payments/notify/wechat":
		raw, _ := io.ReadAll(r.Body)
		var wn paynotify.WechatNotice
		wn, err = g.wechat.VerifyWechat(r.Header, raw, time.Now())
		n = wn.Notice()
	default:
		http.NotFound(w, r)
		return
	}
	o := g.orders[n.OutTradeNo]
	ok := errors.Is(err, paynotify.ErrNotPaid) || err == nil && n.Channel == o.Channel && paynotify.AmountMatches(n, o.AmountFen)
	if err == nil || errors.Is(err, paynotify.ErrNotPaid) {
		g.mu.Lock()
		g.notices = append(g.notices, n)
		g.mu.Unlock()
	}
	switch {
	case r.URL.Path == "/v1/payments/notify/alipay" && ok:
		_, _ = io.WriteString(w, "success")
	case r.URL.Path == "/v1/payments/notify/alipay":
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, "fail")
	case ok:
		w.WriteHeader(http.StatusNoContent)
	default:
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"code":"FAIL","message":"refused"}`)
	}
}

func (g *gateway) received() []paynotify.Notice {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]paynotify.Notice(nil), g.notices...)
}

// simBundle is a database with two orders, the test keys, and a gateway
// endpoint trusting them.
type simBundle struct {
	env            func(string) (string, bool)
	dir            string
	alipay, wechat store.PaymentOrder
	gw             *gateway
	api            string
}

func setupSim(t *testing.T) simBundle {
	t.Helper()
	db := storetest.MySQL(t)
	dsn, err := mysql.ParseDSN(storetest.MySQLServerDSN())
	require.NoError(t, err)
	dsn.DBName = db.Migrator().CurrentDatabase()

	b := simBundle{dir: newPayKeys(t)}
	b.env = func(k string) (string, bool) {
		if k == "MYSQL_DSN" {
			return dsn.FormatDSN(), true
		}
		return "", false
	}
	newOrder := func(channel string, fen int64) store.PaymentOrder {
		no, err := order.NewOutTradeNo(time.Now())
		require.NoError(t, err)
		o := store.PaymentOrder{OutTradeNo: no, Username: "ann", ProductCode: order.ProductAgentRecharge, AmountFen: fen,
			Currency: paynotify.CurrencyCNY, Channel: channel, Status: order.Pending, ExpireAt: time.Now().Add(order.TTL)}
		require.NoError(t, db.Create(&o).Error)
		return o
	}
	b.alipay, b.wechat = newOrder(order.ChannelAlipay, 5000), newOrder(order.ChannelWechat, 3000)

	raw, err := os.ReadFile(filepath.Join(b.dir, payEnvFile))
	require.NoError(t, err)
	vars, err := parseEnvFile(string(raw))
	require.NoError(t, err)
	b.gw = &gateway{orders: map[string]store.PaymentOrder{b.alipay.OutTradeNo: b.alipay, b.wechat.OutTradeNo: b.wechat}}
	b.gw.alipay, b.gw.wechat = verifiers(t, apiPayments(t, vars))
	srv := httptest.NewServer(b.gw)
	t.Cleanup(srv.Close)
	b.api = srv.URL
	return b
}

func (b simBundle) simulate(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return islectl(t, b.env, append([]string{"pay", "simulate", "-dir", b.dir, "-api", b.api}, args...)...)
}

// pay simulate posts a callback the real verifier accepts, for the
// order's channel and amount by default, and succeeds only when the
// endpoint answers as the gateway wants.
func TestPaySimulatePostsVerifiedCallbacks(t *testing.T) {
	t.Parallel()
	b := setupSim(t)

	out, err := b.simulate(t, "-order", b.alipay.OutTradeNo)
	require.NoError(t, err, out)
	require.Contains(t, out, "Alipay TRADE_SUCCESS of order "+b.alipay.OutTradeNo+", 50.00 yuan")
	require.Contains(t, out, "HTTP 200 OK\nsuccess\n")
	out, err = b.simulate(t, "-order", b.wechat.OutTradeNo)
	require.NoError(t, err, out)
	require.Contains(t, out, "WeChat Pay SUCCESS of order "+b.wechat.OutTradeNo+", 3000 fen")
	require.Contains(t, out, "HTTP 204 No Content")

	// Each run is a new callback; -notify-id and -transaction-id replay one.
	for range 2 {
		out, err = b.simulate(t, "-order", b.alipay.OutTradeNo, "-notify-id", "n-1", "-transaction-id", "t-1")
		require.NoError(t, err, out)
	}
	out, err = b.simulate(t, "-order", b.wechat.OutTradeNo, "-state", "closed")
	require.NoError(t, err, out)
	got := b.gw.received()
	require.Len(t, got, 5)
	require.Equal(t, paynotify.Notice{Channel: paynotify.ChannelAlipay, NotifyID: got[0].NotifyID, OutTradeNo: b.alipay.OutTradeNo,
		TransactionID: got[0].TransactionID, TradeState: paynotify.StateSuccess, ProviderState: paynotify.AlipayTradeSuccess,
		AmountFen: 5000, Currency: paynotify.CurrencyCNY, PaidAt: got[0].PaidAt, Raw: got[0].Raw}, got[0])
	require.Equal(t, paynotify.ChannelWechat, got[1].Channel)
	require.Equal(t, int64(3000), got[1].AmountFen)
	require.NotEqual(t, got[0].NotifyID, got[1].NotifyID)
	require.Equal(t, []string{"n-1", "n-1"}, []string{got[2].NotifyID, got[3].NotifyID})
	require.Equal(t, []string{"t-1", "t-1"}, []string{got[2].TransactionID, got[3].TransactionID})
	require.Equal(t, paynotify.StateClosed, got[4].TradeState)
}

// A callback the endpoint refuses is an error (islectl exits 1), the
// answer printed; a channel other than the order's is refused before
// anything is sent, unless forced.
func TestPaySimulateFailsWhenRefused(t *testing.T) {
	t.Parallel()
	b := setupSim(t)

	out, err := b.simulate(t, "-order", b.alipay.OutTradeNo, "-amount", "4999")
	require.ErrorContains(t, err, "the API did not accept the callback (HTTP 400)")
	require.NotErrorIs(t, err, errUsage)
	require.Contains(t, out, "49.99 yuan")
	require.Contains(t, out, "note: the callback differs from the order")
	require.Contains(t, out, "HTTP 400 Bad Request\nfail\n")
	out, err = b.simulate(t, "-order", b.wechat.OutTradeNo, "-amount", "1")
	require.ErrorContains(t, err, "(HTTP 401)")
	require.Contains(t, out, `{"code":"FAIL","message":"refused"}`)

	sent := len(b.gw.received())
	require.Equal(t, 2, sent, "verified, refused for the amount")
	_, err = b.simulate(t, "-order", b.alipay.OutTradeNo, "-channel", "wechat")
	require.ErrorContains(t, err, "was made for ALIPAY, not WECHAT")
	require.Len(t, b.gw.received(), sent, "nothing sent")
	out, err = b.simulate(t, "-order", b.alipay.OutTradeNo, "-channel", "wechat", "-force")
	require.ErrorContains(t, err, "(HTTP 401)", out)

	// Keys the endpoint does not trust.
	other := newPayKeys(t)
	out, err = islectl(t, b.env, "pay", "simulate", "-dir", other, "-api", b.api, "-order", b.alipay.OutTradeNo)
	require.ErrorContains(t, err, "did not accept", out)

	_, err = b.simulate(t, "-order", "20990101000000ffffffffffffffffffff")
	require.ErrorContains(t, err, "no order 20990101000000ffffffffffffffffffff")
	_, err = b.simulate(t, "-order", b.alipay.OutTradeNo, "-state", "REFUND")
	require.ErrorIs(t, err, errUsage)
	require.ErrorContains(t, err, "Alipay knows SUCCESS")
	_, err = b.simulate(t)
	require.ErrorIs(t, err, errUsage)
	_, err = b.simulate(t, "-order", b.alipay.OutTradeNo, "-channel", "paypal")
	require.ErrorIs(t, err, errUsage)
}
