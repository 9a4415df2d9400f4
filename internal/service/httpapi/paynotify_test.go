package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// order makes a PENDING order to pay.
func (b *testBundle) order(t *testing.T, user, channel string, fen int64) store.PaymentOrder {
	t.Helper()
	o, err := store.NewOrders(b.db, b.redis).Create(t.Context(), order.New{Username: user, Product: order.ProductAgentRecharge,
		AmountFen: fen, Channel: channel})
	require.NoError(t, err)
	return o
}

// notified is how many PaymentNotifyMessages wait on the notify queue.
func (b *testBundle) notified(t *testing.T) int {
	t.Helper()
	conn, _ := b.conn(t)
	d, _ := b.tp.Domain(topology.DomainPaymentNotify)
	return storetest.QueueDepth(t, conn, d.Queue)
}

func alipayNotice(o store.PaymentOrder, status, amount string) url.Values {
	return url.Values{
		"app_id": {testAlipayApp}, "out_trade_no": {o.OutTradeNo}, "trade_no": {"2026113022001400009"},
		"trade_status": {status}, "total_amount": {amount}, "notify_id": {"nid-" + o.OutTradeNo + "-" + status},
		"notify_time": {"2026-11-30 20:01:05"}, "gmt_payment": {"2026-11-30 20:01:02"}, "subject": {"recharge"},
	}
}

func (b *testBundle) postAlipay(t *testing.T, form url.Values, sign bool) (int, string) {
	t.Helper()
	if sign {
		sig, err := paynotify.SignAlipay(form, payKeys(t).keys.AlipayPrivate)
		require.NoError(t, err)
		form.Set("sign_type", "RSA2")
		form.Set("sign", sig)
	}
	resp, err := http.Post(b.http.URL+"/v1/payments/notify/alipay", "application/x-www-form-urlencoded", strings.NewReader(form.Encode()))
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(raw)
}

func TestAlipayCallbacks(t *testing.T) {
	b := setup(t, options{})
	o := b.order(t, "ann", paynotify.ChannelAlipay, 5000)

	for _, c := range []struct {
		name   string
		form   func() url.Values
		answer string
	}{
		{"tampered parameter", func() url.Values {
			f := alipayNotice(o, "TRADE_SUCCESS", "50.00")
			sig, _ := paynotify.SignAlipay(f, payKeys(t).keys.AlipayPrivate)
			f.Set("sign_type", "RSA2")
			f.Set("sign", sig)
			f.Set("total_amount", "0.01")
			return f
		}, "fail"},
		{"changed sign_type", func() url.Values {
			f := alipayNotice(o, "TRADE_SUCCESS", "50.00")
			sig, _ := paynotify.SignAlipay(f, payKeys(t).keys.AlipayPrivate)
			f.Set("sign_type", "RSA")
			f.Set("sign", sig)
			return f
		}, "fail"},
	} {
		status, body := b.postAlipay(t, c.form(), false)
		require.Equal(t, c.answer, body, c.name)
		require.Equal(t, http.StatusBadRequest, status, c.name)
	}
	wrongApp := alipayNotice(o, "TRADE_SUCCESS", "50.00")
	wrongApp.Set("app_id", "2021999999999999")
	for _, c := range []struct {
		name   string
		form   url.Values
		answer string
	}{
		{"wrong app id", wrongApp, "fail"},
		{"amount mismatch", alipayNotice(o, "TRADE_SUCCESS", "49.99"), "fail"},
		{"WAIT_BUYER_PAY", alipayNotice(o, "WAIT_BUYER_PAY", "50.00"), "success"},
	} {
		_, body := b.postAlipay(t, c.form, true)
		require.Equal(t, c.answer, body, c.name)
	}
	require.Zero(t, b.notified(t), "nothing published for a refused or unpaid callback")

	_, body := b.postAlipay(t, alipayNotice(o, "TRADE_CLOSED", "50.00"), true)
	require.Equal(t, "success", body, "TRADE_CLOSED is recorded")
	_, body = b.postAlipay(t, alipayNotice(o, "TRADE_SUCCESS", "50.00"), true)
	require.Equal(t, "success", body)
	require.Eventually(t, func() bool { return b.notified(t) == 2 }, 5*time.Second, 20*time.Millisecond)

	conn, _ := b.conn(t)
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	d, _ := b.tp.Domain(topology.DomainPaymentNotify)
	var states []string
	for range 2 {
		got, ok, err := ch.Get(d.Queue, true)
		require.NoError(t, err)
		require.True(t, ok)
		var m topology.PaymentNotify
		require.NoError(t, json.Unmarshal(got.Body, &m))
		require.True(t, m.VerifyOK)
		require.Equal(t, o.OutTradeNo, m.OutTradeNo)
		require.Equal(t, "notify:ALIPAY:"+m.NotifyID, got.MessageId)
		if m.TradeState == "SUCCESS" {
			require.NotNil(t, m.AmountFen, "the amount paid, for the consumer to check")
			require.Equal(t, o.AmountFen, *m.AmountFen)
			require.Equal(t, "CNY", m.Currency)
		}
		states = append(states, m.TradeState)
	}
	require.Equal(t, []string{"CLOSED", "SUCCESS"}, states)
}

func (b *testBundle) postWechat(t *testing.T, body []byte, ts time.Time, sig func(string) string, serial string) int {
	t.Helper()
	k := payKeys(t).keys
	stamp := strconv.FormatInt(ts.Unix(), 10)
	nonce := paynotify.NewWechatNonce(32)
	s, err := paynotify.SignWechat(body, stamp, nonce, k.WechatPrivate)
	require.NoError(t, err)
	if sig != nil {
		s = sig(s)
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, b.http.URL+"/v1/payments/notify/wechat", bytes.NewReader(body))
	req.Header = paynotify.WechatHeader(stamp, nonce, s, serial)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

func wechatBody(t *testing.T, o store.PaymentOrder, key string, corrupt bool) []byte {
	t.Helper()
	return wechatStateBody(t, o, key, "SUCCESS", corrupt)
}

// wechatStateBody is a notification of o's transaction in trade state
// state; success_time only when it is SUCCESS.
func wechatStateBody(t *testing.T, o store.PaymentOrder, key, state string, corrupt bool) []byte {
	t.Helper()
	trade := map[string]any{"appid": "wx1", "mchid": testWechatMch, "out_trade_no": o.OutTradeNo,
		"transaction_id": "4200000001" + o.OutTradeNo[:6], "trade_state": state,
		"amount": map[string]any{"total": o.AmountFen, "payer_total": o.AmountFen, "currency": "CNY", "payer_currency": "CNY"}}
	if state == "SUCCESS" {
		trade["success_time"] = "2026-11-30T20:01:02+08:00"
	}
	tx, err := json.Marshal(trade)
	require.NoError(t, err)
	nonce := paynotify.NewWechatNonce(12)
	ct, err := paynotify.EncryptWechatResource(tx, key, nonce, "transaction")
	require.NoError(t, err)
	if corrupt {
		ct = corruptBase64(t, ct, -1) // the GCM tag's last byte
	}
	return []byte(`{"id":"EV-` + o.OutTradeNo + `-` + state + `","create_time":"2026-11-30T20:01:05+08:00","resource_type":"encrypt-resource",` +
		`"event_type":"TRANSACTION.SUCCESS","summary":"ok","resource":{"original_type":"transaction","algorithm":"AEAD_AES_256_GCM",` +
		`"ciphertext":"` + ct + `","associated_data":"transaction","nonce":"` + nonce + `"}}`)
}

func TestWechatCallbacks(t *testing.T) {
	b := setup(t, options{})
	k := payKeys(t).keys
	o := b.order(t, "bob", paynotify.ChannelWechat, 3000)
	now := time.Now()
	good := wechatBody(t, o, k.APIv3Key, false)

	var reserialised bytes.Buffer
	require.NoError(t, json.Indent(&reserialised, good, "", " "))
	refusals := []struct {
		name   string
		status int
	}{
		{"bad signature", b.postWechat(t, good, now, func(s string) string { return corruptSignature(t, s) }, k.WechatSerial)},
		{"unknown serial", b.postWechat(t, good, now, nil, "0123ABCD")},
		{"probe signature", b.postWechat(t, good, now, func(string) string { return "WECHATPAY/SIGNTEST/abc" }, k.WechatSerial)},
		{"6 minutes old", b.postWechat(t, good, now.Add(-6*time.Minute), nil, k.WechatSerial)},
		{"bad GCM tag", b.postWechat(t, wechatBody(t, o, k.APIv3Key, true), now, nil, k.WechatSerial)},
	}
	for _, r := range refusals {
		require.GreaterOrEqual(t, r.status, 400, r.name)
	}
	// The body re-serialised after signing: verification is over raw bytes.
	stamp := strconv.FormatInt(now.Unix(), 10)
	sig, err := paynotify.SignWechat(good, stamp, "n1", k.WechatPrivate)
	require.NoError(t, err)
	req, _ := http.NewRequest(http.MethodPost, b.http.URL+"/v1/payments/notify/wechat", bytes.NewReader(reserialised.Bytes()))
	req.Header = paynotify.WechatHeader(stamp, "n1", sig, k.WechatSerial)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "re-serialised body")
	require.Zero(t, b.notified(t), "nothing published for a refused callback")

	require.Equal(t, http.StatusNoContent, b.postWechat(t, good, now, nil, k.WechatSerial))
	require.Equal(t, http.StatusNoContent, b.postWechat(t, good, now, nil, k.WechatSerial), "a duplicate is answered the same")
	require.Eventually(t, func() bool { return b.notified(t) == 2 }, 5*time.Second, 20*time.Millisecond,
		"both published; the consumer tells them apart by the callback id")
}

// A REVOKED WeChat transaction (a payment the payer cancelled) is
// published like CLOSED, and its order closes: it used to be answered 204
// and dropped, the order left PENDING.
func TestWechatRevokedNoticeClosesItsOrder(t *testing.T) {
	b := setup(t, options{})
	k := payKeys(t).keys
	o := b.order(t, "rev", paynotify.ChannelWechat, 1200)

	revoked := wechatStateBody(t, o, k.APIv3Key, "REVOKED", false)
	require.Equal(t, http.StatusNoContent, b.postWechat(t, revoked, time.Now(), nil, k.WechatSerial))
	require.Eventually(t, func() bool { return b.notified(t) == 1 }, 5*time.Second, 20*time.Millisecond, "REVOKED is published")

	conn, _ := b.conn(t)
	ch, err := conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	d, _ := b.tp.Domain(topology.DomainPaymentNotify)
	got, ok, err := ch.Get(d.Queue, true)
	require.NoError(t, err)
	require.True(t, ok)
	var m topology.PaymentNotify
	require.NoError(t, json.Unmarshal(got.Body, &m))
	require.Equal(t, "REVOKED", m.TradeState)
	require.True(t, m.VerifyOK)
	require.Nil(t, m.AmountFen, "nothing was paid")

	receipts, _ := b.tp.Domain(topology.DomainPaymentReceipt)
	orders := store.NewOrders(b.db, b.redis)
	res, err := orders.ApplyNotify(t.Context(), m, receipts, "")
	require.NoError(t, err)
	require.Equal(t, order.NotifyClosed, res.Outcome)
	after, err := orders.Get(t.Context(), o.OutTradeNo)
	require.NoError(t, err)
	require.Equal(t, order.Closed, after.Status)
}
