package e2e_test

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"path/filepath"
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

// payOrder creates an order through the API as user and returns its number.
func (f *billingFleet) payOrder(t *testing.T, token, product, channel string, fen int64, email string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"product": product, "amountFen": fen, "channel": channel, "receiptEmail": email})
	req, _ := http.NewRequest(http.MethodPost, "http://"+f.addr+"/v1/payments/orders", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var o struct{ OutTradeNo string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&o))
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	return o.OutTradeNo
}

// orderStatus is the order's status as its owner sees it through the API.
func (f *billingFleet) orderStatus(t *testing.T, token, no string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://"+f.addr+"/v1/payments/orders/"+no, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var o struct{ Status string }
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&o))
	return o.Status
}

// A recharge paid through a gateway callback, through the real api,
// worker and relay: the same callback twice at once and once more later
// make one transition, one RECHARGE ledger row and one receipt mail, and
// the money is spendable through /v1/agent/usage as soon as the order
// says PAID.
func TestRechargePaidByCallbackIsSpendableAndReceiptedOnce(t *testing.T) {
	t.Parallel()
	var keys string
	f := newBillingFleet(t, map[string]string{"rosa": "0"}, func(ae fleetEnv) { keys = payKeys(t, ae) })
	worker := start(t, f.env, "worker")
	worker.waitFor(t, 30*time.Second, "worker started")
	start(t, f.env, "relay").waitFor(t, 30*time.Second, "relay started")

	code, _ := f.usage(t, http.DefaultClient, "rosa", "before", 1000)
	require.Equal(t, http.StatusPaymentRequired, code, "nothing to spend yet")

	rosa := f.userToken(t, "rosa")
	no := f.payOrder(t, rosa, order.ProductAgentRecharge, order.ChannelAlipay, 5000, "rosa@example.com")
	ctl := maps.Clone(f.env)
	ctl["API_ADDR"] = f.addr
	simulate := func() {
		out, code := islectl(t, ctl, "pay", "simulate", "-dir", keys, "-order", no, "-notify-id", "nid-rosa", "-transaction-id", "2026120122009")
		require.Zero(t, code, out)
		require.Contains(t, out, "HTTP 200 OK\nsuccess\n")
	}
	var wg sync.WaitGroup
	for range 2 { // the gateway's retry arriving while the first is handled
		wg.Go(simulate)
	}
	wg.Wait()
	require.Eventually(t, func() bool { return f.orderStatus(t, rosa, no) == order.Paid }, 30*time.Second, 50*time.Millisecond)

	code, a := f.usage(t, http.DefaultClient, "rosa", "after", 1000)
	require.Equal(t, http.StatusOK, code, "the recharge is spendable")
	require.Equal(t, "3765.43211000", a.BalanceFen, "5000 fen less 1000 input tokens at 1,234,567.89 fen per million")

	simulate() // the same notification, replayed later: nothing changes
	var receipt store.PaymentOrder
	require.Eventually(t, func() bool {
		return f.db.Where("out_trade_no = ?", no).Take(&receipt).Error == nil && receipt.ReceiptSentAt != nil
	}, 30*time.Second, 50*time.Millisecond)
	worker.waitFor(t, 10*time.Second, `"outcome":"DUPLICATE"`)
	var rows, records int64
	require.NoError(t, f.db.Model(&store.LedgerEntry{}).Where("username = ? AND kind = ? AND entry_id = ?", "rosa", store.LedgerRecharge, no).Count(&rows).Error)
	require.EqualValues(t, 1, rows, "the ledger shows the recharge once")
	require.NoError(t, f.db.Model(&store.PaymentNotifyRecord{}).Where("out_trade_no = ?", no).Count(&records).Error)
	require.EqualValues(t, 1, records)

	mails, err := filepath.Glob(filepath.Join(f.env.mailDir(), "*.eml"))
	require.NoError(t, err)
	require.Len(t, mails, 1)
	require.Equal(t, 1, strings.Count(worker.output(), `"msg":"receipt sent"`), "one receipt mail")
	require.Equal(t, 1, strings.Count(worker.output(), `"msg":"order paid"`), "one transition")
}

// Whoever can publish to the payment exchange cannot pay an order with a
// message of its own making: a SUCCESS without the amount (as a Spring
// producer sends it) or with another amount goes to the DLQ, and the order
// stays PENDING; the same message with the order's amount and currency is
// what pays it. Before, the first message paid the order.
func TestForgedPaymentMessagesDoNotPay(t *testing.T) {
	t.Parallel()
	f := newBillingFleet(t, map[string]string{"fay": "0"})
	start(t, f.env, "worker").waitFor(t, 30*time.Second, "worker started")
	no := f.payOrder(t, f.userToken(t, "fay"), order.ProductAgentRecharge, order.ChannelAlipay, 5000, "")
	d, _ := f.tp.Domain(topology.DomainPaymentNotify)
	ch, err := f.conn.Channel()
	require.NoError(t, err)
	defer ch.Close()
	send := func(tail string) {
		body := `{"notifyId":"forged","channel":"ALIPAY","outTradeNo":"` + no + `","transactionId":"2026120199999","tradeState":"SUCCESS",` +
			`"successTime":"2026-12-01T10:00:00+08:00","verifyOk":true` + tail + `}`
		require.NoError(t, ch.Publish(d.Exchange, d.RoutingKey, true, false, amqp.Publishing{ContentType: "application/json",
			DeliveryMode: amqp.Persistent, Headers: amqp.Table{"__TypeId__": d.TypeID}, Body: []byte(body)}))
	}
	dead := func() int64 {
		var n int64
		require.NoError(t, f.db.Table(d.DLQTable).Count(&n).Error)
		return n
	}
	send(``)
	send(`,"amountFen":1,"currency":"CNY"`)
	require.Eventually(t, func() bool { return dead() == 2 }, 30*time.Second, 50*time.Millisecond, "both dead")
	var o store.PaymentOrder
	require.NoError(t, f.db.Where("out_trade_no = ?", no).Take(&o).Error)
	require.Equal(t, order.Pending, o.Status)

	send(`,"amountFen":5000,"currency":"CNY"`)
	require.Eventually(t, func() bool {
		return f.db.Where("out_trade_no = ?", no).Take(&o).Error == nil && o.Status == order.Paid
	}, 30*time.Second, 50*time.Millisecond, "the order's own amount pays it")
}
