package e2e_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// gatewayCatcher stands where the API is for `islectl pay simulate -api`:
// it keeps the body of each callback posted to it and answers as the API
// does when it accepts one, so that a test holds callbacks exactly as
// simulate makes them, to put in a record's rawBody.
type gatewayCatcher struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newGatewayCatcher(t *testing.T) *gatewayCatcher {
	t.Helper()
	c := &gatewayCatcher{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.bodies = append(c.bodies, string(body))
		c.mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/alipay") {
			_, _ = io.WriteString(w, "success")
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// callback runs islectl pay simulate for the order with args and returns
// the callback it posted.
func (c *gatewayCatcher) callback(t *testing.T, env fleetEnv, keys, no string, args ...string) string {
	t.Helper()
	c.mu.Lock()
	before := len(c.bodies)
	c.mu.Unlock()
	out, code := islectl(t, env, append([]string{"pay", "simulate", "-dir", keys, "-api", c.srv.URL, "-order", no}, args...)...)
	require.Zero(t, code, out)
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Len(t, c.bodies, before+1, out)
	return c.bodies[before]
}

// springNotice is a PaymentNotifyMessage as the Spring producer publishes
// it: the record's fields only, no amountFen or currency, the gateway's
// callback in rawBody, no message id.
func springNotice(channel, no, notifyID, txID, rawBody string) []byte {
	body, _ := json.Marshal(map[string]any{"notifyId": notifyID, "channel": channel, "outTradeNo": no, "transactionId": txID,
		"tradeState": "SUCCESS", "successTime": "2026-12-01T10:00:00+08:00", "verifyOk": true, "rawBody": rawBody, "lastError": nil})
	return body
}

// publishSpring publishes body to the payment-notify exchange as the
// Spring producer does (a __TypeId__ header, no message id).
func (f *billingFleet) publishSpring(t *testing.T, body []byte) {
	t.Helper()
	d, _ := f.tp.Domain(topology.DomainPaymentNotify)
	ch, err := f.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	require.NoError(t, ch.Publish(d.Exchange, d.RoutingKey, true, false, amqp.Publishing{ContentType: "application/json",
		DeliveryMode: amqp.Persistent, Headers: amqp.Table{"__TypeId__": d.TypeID}, Body: body}))
}

// deadNotices are the last errors of the payment-notify messages stored
// dead, oldest first.
func (f *billingFleet) deadNotices(t *testing.T) []string {
	t.Helper()
	d, _ := f.tp.Domain(topology.DomainPaymentNotify)
	var errs []string
	require.NoError(t, f.db.Table(d.DLQTable).Order("id").Pluck("last_error", &errs).Error)
	return errs
}

// waitDead waits until n payment-notify messages are dead and returns
// their last errors.
func (f *billingFleet) waitDead(t *testing.T, n int) []string {
	t.Helper()
	var errs []string
	require.Eventually(t, func() bool { errs = f.deadNotices(t); return len(errs) >= n }, 30*time.Second, 50*time.Millisecond)
	require.Len(t, errs, n, "%q", errs)
	return errs
}

// granted says what the order's payment granted: the order, its RECHARGE
// ledger rows, its PAID notification records and its receipt messages.
func (f *billingFleet) granted(t *testing.T, no string) (o store.PaymentOrder, ledger, paid, receipts int64) {
	t.Helper()
	require.NoError(t, f.db.Where("out_trade_no = ?", no).Take(&o).Error)
	require.NoError(t, f.db.Model(&store.LedgerEntry{}).Where("kind = ? AND entry_id = ?", store.LedgerRecharge, no).Count(&ledger).Error)
	require.NoError(t, f.db.Model(&store.PaymentNotifyRecord{}).Where("out_trade_no = ? AND outcome = ?", no, order.NotifyPaid).Count(&paid).Error)
	require.NoError(t, f.db.Model(&store.OutboxMessage{}).Where("domain = ? AND payload LIKE ?", topology.DomainPaymentReceipt, "%"+no+"%").Count(&receipts).Error)
	return o, ledger, paid, receipts
}

// A Spring producer's paid notification carries no amount, only the
// gateway's callback in rawBody. The worker, configured with the gateways'
// keys as the API is, verifies that callback and grants what it says, once:
// for Alipay its RSA2 signature, for WeChat Pay its resource, which only
// the API v3 key opens. A callback altered after signing, another order's,
// or one of another amount grants nothing: each goes to the DLQ with why,
// and the order stays PENDING until its own callback comes.
func TestSpringPaymentGrantedFromItsCallback(t *testing.T) {
	t.Parallel()
	var keys string
	var payEnv fleetEnv
	f := newBillingFleet(t, map[string]string{"ali": "0", "alo": "0", "wei": "0", "wen": "0"},
		func(ae fleetEnv) { keys = payKeys(t, ae); payEnv = ae })
	we := maps.Clone(f.env) // the worker reads the same PAYMENT_* as the API, and ISLE_DEV for test keys
	for _, n := range scriptsUpPayVars {
		if v, ok := payEnv[n]; ok {
			we[n] = v
		}
	}
	worker := start(t, we, "worker")
	worker.waitFor(t, 30*time.Second, "worker started")
	gw := newGatewayCatcher(t)

	dead := 0
	for _, c := range []struct {
		channel     string
		payer, peer string // the order paid, and another user's of the same channel
		tamper      func(t *testing.T, raw string) string
	}{
		{order.ChannelAlipay, "ali", "alo", func(t *testing.T, raw string) string {
			t.Helper()
			form, err := url.ParseQuery(raw)
			require.NoError(t, err)
			form.Set("total_amount", "100.00") // more than was paid: the signature no longer holds
			return form.Encode()
		}},
		{order.ChannelWechat, "wei", "wen", func(t *testing.T, raw string) string {
			t.Helper()
			var env map[string]any
			require.NoError(t, json.Unmarshal([]byte(raw), &env))
			res := env["resource"].(map[string]any)
			sealed, err := base64.StdEncoding.DecodeString(res["ciphertext"].(string))
			require.NoError(t, err)
			sealed[len(sealed)/2] ^= 1 // one bit of the sealed transaction
			res["ciphertext"] = base64.StdEncoding.EncodeToString(sealed)
			out, err := json.Marshal(env)
			require.NoError(t, err)
			return string(out)
		}},
	} {
		t.Logf("%s", c.channel)
		no := f.payOrder(t, f.userToken(t, c.payer), order.ProductAgentRecharge, c.channel, 5000, c.payer+"@example.com")
		peer := f.payOrder(t, f.userToken(t, c.peer), order.ProductAgentRecharge, c.channel, 5000, "")
		txID := map[string]string{order.ChannelAlipay: "2026120122001000000000001", order.ChannelWechat: "4200000000202612010000000001"}[c.channel]
		own := gw.callback(t, f.env, keys, no, "-notify-id", "nid-"+c.payer, "-transaction-id", txID)
		others := gw.callback(t, f.env, keys, peer, "-notify-id", "nid-"+c.peer, "-transaction-id", txID+"9")
		cheap := gw.callback(t, f.env, keys, no, "-amount", "1", "-notify-id", "nid-cheap-"+c.payer, "-transaction-id", txID+"8")

		// Refused for good: each is dead with why, nothing granted.
		f.publishSpring(t, springNotice(c.channel, no, "nid-"+c.payer, txID, c.tamper(t, own)))
		f.publishSpring(t, springNotice(c.channel, no, "nid-"+c.peer, txID+"9", others))
		f.publishSpring(t, springNotice(c.channel, no, "nid-cheap-"+c.payer, txID+"8", cheap))
		dead += 3
		errs := f.waitDead(t, dead)
		t.Logf("%s refused: %q", c.channel, errs[dead-3:])
		for _, e := range errs[dead-3:] {
			require.Contains(t, e, no, "the reason names the order")
		}
		require.Contains(t, strings.Join(errs[dead-3:], "\n"), "1 CNY paid, the order is 5000 CNY", "the verified amount is the order's or nothing")
		o, ledger, paid, receipts := f.granted(t, no)
		require.Equal(t, order.Pending, o.Status, "%q", errs)
		require.Zero(t, ledger+paid+receipts)

		// Its own callback pays it, once however often it comes.
		f.publishSpring(t, springNotice(c.channel, no, "nid-"+c.payer, txID, own))
		f.publishSpring(t, springNotice(c.channel, no, "nid-"+c.payer, txID, own))
		require.Eventually(t, func() bool { o, _, _, _ = f.granted(t, no); return o.Status == order.Paid }, 30*time.Second, 50*time.Millisecond,
			"%q", f.deadNotices(t))
		worker.waitFor(t, 10*time.Second, `"outcome":"DUPLICATE"`, no)
		o, ledger, paid, receipts = f.granted(t, no)
		require.Equal(t, txID, *o.TransactionID, "the transaction is the callback's")
		require.Equal(t, []int64{1, 1, 1}, []int64{ledger, paid, receipts}, "one RECHARGE, one transition, one receipt")
		var acct store.UserAccount
		require.NoError(t, f.db.Where("username = ?", c.payer).Take(&acct).Error)
		require.Equal(t, "5000", acct.BalanceFen.String(), "the recharge is granted once")
		o, _, _, _ = f.granted(t, peer)
		require.Equal(t, order.Pending, o.Status, "the other order's callback paid nothing")
		require.Len(t, f.deadNotices(t), dead)
	}
}

// A worker with no gateway keys starts, and refuses an amount-less paid
// notification for good, saying which keys it lacks: it cannot check the
// callback, and the broker's word is not enough.
func TestSpringPaymentWithoutGatewayKeysIsDeadWithWhy(t *testing.T) {
	t.Parallel()
	var keys string
	f := newBillingFleet(t, map[string]string{"kim": "0", "kit": "0"}, func(ae fleetEnv) { keys = payKeys(t, ae) })
	start(t, f.env, "worker").waitFor(t, 30*time.Second, "worker started")
	gw := newGatewayCatcher(t)
	for i, c := range []struct{ user, channel, missing string }{
		{"kim", order.ChannelAlipay, "PAYMENT_ALIPAY_PUBLIC_KEY"},
		{"kit", order.ChannelWechat, "PAYMENT_WECHAT_API_V3_KEY"},
	} {
		no := f.payOrder(t, f.userToken(t, c.user), order.ProductAgentRecharge, c.channel, 1500, "")
		raw := gw.callback(t, f.env, keys, no, "-notify-id", "nid-"+c.user, "-transaction-id", "tx-"+c.user)
		f.publishSpring(t, springNotice(c.channel, no, "nid-"+c.user, "tx-"+c.user, raw))
		errs := f.waitDead(t, i+1)
		require.Contains(t, errs[i], c.missing, "the reason says which keys are missing")
		o, ledger, paid, receipts := f.granted(t, no)
		require.Equal(t, order.Pending, o.Status)
		require.Zero(t, ledger+paid+receipts)
	}
}
