package handlers_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// The gateways' keys, and another set standing for someone else's: RSA
// key generation takes a while, so the tests share them.
var (
	gatewayKeys = sync.OnceValues(paynotify.GenerateTestKeys)
	strayKeys   = sync.OnceValues(paynotify.GenerateTestKeys)
)

const proofAppID = "2021000000000000"

// callbacks signs gateway callbacks as the gateways (and islectl pay
// simulate) do.
type callbacks struct{ k paynotify.TestKeys }

// alipay is the form of Alipay's notification that order no was paid fen
// (trade_status as given), signed RSA2.
func (c callbacks) alipay(t *testing.T, no, txID, status string, fen int64) string {
	t.Helper()
	now := time.Now().In(topology.UTC8).Format("2006-01-02 15:04:05")
	form := url.Values{"notify_type": {"trade_status_sync"}, "notify_id": {"nid-" + txID}, "notify_time": {now}, "charset": {"utf-8"},
		"version": {"1.0"}, "app_id": {proofAppID}, "out_trade_no": {no}, "trade_no": {txID}, "trade_status": {status},
		"total_amount": {paynotify.FormatYuan(fen)}, "gmt_payment": {now}, "subject": {"agent-recharge"}}
	sig, err := paynotify.SignAlipay(form, c.k.AlipayPrivate)
	require.NoError(t, err)
	form.Set("sign_type", "RSA2")
	form.Set("sign", sig)
	return form.Encode()
}

// wechat is the body of WeChat Pay's notification that order no was paid
// fen (trade_state as given), its transaction sealed with the API v3 key.
func (c callbacks) wechat(t *testing.T, no, txID, state string, fen int64) string {
	t.Helper()
	tx := paynotify.WechatTransaction{OutTradeNo: no, TransactionID: txID, TradeType: "NATIVE", TradeState: state,
		Amount: paynotify.WechatAmount{Total: fen, PayerTotal: fen, Currency: "CNY", PayerCurrency: "CNY"}}
	if state == "SUCCESS" {
		tx.SuccessTime = time.Now().Format(time.RFC3339)
	}
	plain, err := json.Marshal(tx)
	require.NoError(t, err)
	nonce := paynotify.NewWechatNonce(12)
	sealed, err := paynotify.EncryptWechatResource(plain, c.k.APIv3Key, nonce, "transaction")
	require.NoError(t, err)
	body, err := json.Marshal(map[string]any{"id": "wx-" + txID, "create_time": time.Now().Format(time.RFC3339), "resource_type": "encrypt-resource",
		"event_type": "TRANSACTION." + state, "summary": state, "resource": map[string]string{"original_type": "transaction",
			"algorithm": paynotify.ResourceAlgorithm, "ciphertext": sealed, "associated_data": "transaction", "nonce": nonce}})
	require.NoError(t, err)
	return string(body)
}

// paid is the callback of channel saying no was paid fen.
func (c callbacks) paid(t *testing.T, channel, no, txID string, fen int64) string {
	t.Helper()
	if channel == order.ChannelAlipay {
		return c.alipay(t, no, txID, paynotify.AlipayTradeSuccess, fen)
	}
	return c.wechat(t, no, txID, "SUCCESS", fen)
}

// tamper changes a callback after its gateway made it: Alipay's amount,
// one bit of WeChat Pay's sealed transaction.
func tamper(t *testing.T, channel, raw string) string {
	t.Helper()
	if channel == order.ChannelAlipay {
		form, err := url.ParseQuery(raw)
		require.NoError(t, err)
		form.Set("total_amount", "0.01")
		return form.Encode()
	}
	var env map[string]any
	require.NoError(t, json.Unmarshal([]byte(raw), &env))
	res := env["resource"].(map[string]any)
	sealed, err := base64.StdEncoding.DecodeString(res["ciphertext"].(string))
	require.NoError(t, err)
	sealed[0] ^= 1
	res["ciphertext"] = base64.StdEncoding.EncodeToString(sealed)
	out, err := json.Marshal(env)
	require.NoError(t, err)
	return string(out)
}

// springPaid is a paid PaymentNotifyMessage as the Spring producer sends
// it: no amountFen, no currency, the callback in rawBody.
func springPaid(channel, no, txID, raw string) topology.PaymentNotify {
	return topology.PaymentNotify{NotifyID: "n-" + txID, Channel: channel, OutTradeNo: no, TransactionID: txID, TradeState: order.TradeSuccess,
		SuccessTime: topology.OffsetDateTime{Time: time.Now()}, VerifyOK: true, RawBody: raw}
}

type proofBundle struct {
	db      *gorm.DB
	orders  *store.Orders
	notify  *handlers.NoticeApplier
	cb      callbacks
	stray   callbacks
	nextUID int
}

func setupProofs(t *testing.T, g handlers.PaymentProofs) *proofBundle {
	t.Helper()
	db, rdb := storetest.MySQL(t), storetest.Redis(t)
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	receipts, _ := tp.Domain(topology.DomainPaymentReceipt)
	k, err := gatewayKeys()
	require.NoError(t, err)
	s, err := strayKeys()
	require.NoError(t, err)
	orders := store.NewOrders(db, rdb)
	return &proofBundle{db: db, orders: orders, notify: handlers.NewNoticeApplier(orders, g, receipts, quiet), cb: callbacks{k}, stray: callbacks{s}}
}

// gateways verifies with k's public halves, as the worker configured with
// the gateways' keys does.
func gateways(t *testing.T, k paynotify.TestKeys) paynotify.Gateways {
	t.Helper()
	a, err := paynotify.NewAlipayVerifier(k.AlipayConfig(proofAppID, ""))
	require.NoError(t, err)
	w, err := paynotify.NewWechatVerifier(k.WechatCertConfig())
	require.NoError(t, err)
	return paynotify.Gateways{Alipay: a, Wechat: w}
}

// order opens a pending recharge of fen through channel for a new user.
func (b *proofBundle) order(t *testing.T, channel string, fen int64) store.PaymentOrder {
	t.Helper()
	b.nextUID++
	o, err := b.orders.Create(t.Context(), order.New{Username: fmt.Sprintf("payer-%d", b.nextUID), Product: order.ProductAgentRecharge,
		AmountFen: fen, Channel: channel, ReceiptEmail: "payer@example.com"})
	require.NoError(t, err)
	return o
}

// granted counts what the order's payment granted: RECHARGE ledger rows,
// PAID records and receipt messages; and its status.
func (b *proofBundle) granted(t *testing.T, no string) (string, int64) {
	t.Helper()
	o, err := b.orders.Get(t.Context(), no)
	require.NoError(t, err)
	var ledger, paid, receipts int64
	require.NoError(t, b.db.Model(&store.LedgerEntry{}).Where("kind = ? AND entry_id = ?", store.LedgerRecharge, no).Count(&ledger).Error)
	require.NoError(t, b.db.Model(&store.PaymentNotifyRecord{}).Where("out_trade_no = ? AND outcome = ?", no, order.NotifyPaid).Count(&paid).Error)
	require.NoError(t, b.db.Model(&store.OutboxMessage{}).Where("domain = ? AND payload LIKE ?", topology.DomainPaymentReceipt, "%"+no+"%").Count(&receipts).Error)
	return o.Status, ledger + paid + receipts
}

// A paid notification without its amount (the Spring producer's) is
// granted what the gateway's callback in its rawBody says once the
// gateway's keys verify it, once however often it comes; and nothing, for
// good, when the callback does not verify or says anything else than the
// message about the order, its state, its transaction or what was paid.
// Before, every such message went to the DLQ, paid or not.
func TestSpringNoticeGrantedWhatItsCallbackProves(t *testing.T) {
	t.Parallel()
	k, err := gatewayKeys()
	require.NoError(t, err)
	b := setupProofs(t, gateways(t, k))
	for _, channel := range []string{order.ChannelAlipay, order.ChannelWechat} {
		o, peer := b.order(t, channel, 5000), b.order(t, channel, 5000)
		other := order.ChannelWechat
		if channel == other {
			other = order.ChannelAlipay
		}
		own := b.cb.paid(t, channel, o.OutTradeNo, "tx-"+o.OutTradeNo, 5000)
		notPaid := b.cb.alipay(t, o.OutTradeNo, "tx-"+o.OutTradeNo, paynotify.AlipayWaitBuyerPay, 5000)
		if channel == order.ChannelWechat {
			notPaid = b.cb.wechat(t, o.OutTradeNo, "tx-"+o.OutTradeNo, "NOTPAY", 5000)
		}
		for _, c := range []struct {
			name string
			m    topology.PaymentNotify
			want error
			says string // in the refusal
		}{
			{"altered after signing", springPaid(channel, o.OutTradeNo, "tx-"+o.OutTradeNo, tamper(t, channel, own)), order.ErrUnproven, o.OutTradeNo},
			{"another key's", springPaid(channel, o.OutTradeNo, "tx-"+o.OutTradeNo, b.stray.paid(t, channel, o.OutTradeNo, "tx-"+o.OutTradeNo, 5000)), order.ErrUnproven, o.OutTradeNo},
			{"another order's", springPaid(channel, o.OutTradeNo, "tx-"+peer.OutTradeNo, b.cb.paid(t, channel, peer.OutTradeNo, "tx-"+peer.OutTradeNo, 5000)),
				order.ErrMismatch, "the callback of order " + peer.OutTradeNo},
			{"another amount", springPaid(channel, o.OutTradeNo, "tx-cheap", b.cb.paid(t, channel, o.OutTradeNo, "tx-cheap", 1)), order.ErrMismatch, "1 CNY paid, the order is 5000 CNY"},
			{"another transaction", springPaid(channel, o.OutTradeNo, "tx-other", own), order.ErrMismatch, "tx-other"},
			{"not paid", springPaid(channel, o.OutTradeNo, "tx-"+o.OutTradeNo, notPaid), order.ErrUnproven, "not paid"},
			{"the other gateway's", springPaid(channel, o.OutTradeNo, "tx-"+o.OutTradeNo, b.cb.paid(t, other, o.OutTradeNo, "tx-"+o.OutTradeNo, 5000)), order.ErrUnproven, o.OutTradeNo},
			{"no callback", springPaid(channel, o.OutTradeNo, "tx-"+o.OutTradeNo, ""), order.ErrUnproven, "rawBody is empty"},
			{"not a callback", springPaid(channel, o.OutTradeNo, "tx-"+o.OutTradeNo, "{}"), order.ErrUnproven, o.OutTradeNo},
		} {
			err := b.notify.Handle(t.Context(), c.m)
			require.True(t, messaging.IsPermanent(err), "%s %s: %v", channel, c.name, err)
			require.ErrorIs(t, err, c.want, "%s %s", channel, c.name)
			require.ErrorContains(t, err, c.says, "%s %s", channel, c.name)
			status, granted := b.granted(t, o.OutTradeNo)
			require.Equal(t, order.Pending, status, "%s %s", channel, c.name)
			require.Zero(t, granted, "%s %s", channel, c.name)
		}
		unverified := springPaid(channel, o.OutTradeNo, "tx-"+o.OutTradeNo, own)
		unverified.VerifyOK = false
		require.ErrorIs(t, b.notify.Handle(t.Context(), unverified), order.ErrUnverified, "a valid callback does not make verifyOk=false true")

		for range 2 { // the callback, and its copy
			require.NoError(t, b.notify.Handle(t.Context(), springPaid(channel, o.OutTradeNo, "tx-"+o.OutTradeNo, own)), channel)
		}
		got, err := b.orders.Get(t.Context(), o.OutTradeNo)
		require.NoError(t, err)
		require.Equal(t, order.Paid, got.Status, channel)
		require.Equal(t, "tx-"+o.OutTradeNo, *got.TransactionID, channel)
		_, granted := b.granted(t, o.OutTradeNo)
		require.EqualValues(t, 3, granted, "%s: one RECHARGE row, one PAID record, one receipt", channel)
		var rec store.PaymentNotifyRecord
		require.NoError(t, b.db.Where("out_trade_no = ?", o.OutTradeNo).Take(&rec).Error)
		require.Equal(t, own, *rec.RawBody, "the record keeps the callback as it came")
		status, granted := b.granted(t, peer.OutTradeNo)
		require.Equal(t, order.Pending, status)
		require.Zero(t, granted)
	}
}

// Without the gateway's keys nothing can check the callback: a paid
// notification without its amount is refused for good, and the reason
// says which keys are missing.
func TestSpringNoticeWithoutKeysSaysWhichAreMissing(t *testing.T) {
	t.Parallel()
	k, err := gatewayKeys()
	require.NoError(t, err)
	only := gateways(t, k)
	only.Wechat = nil
	only.Missing = map[string]string{order.ChannelWechat: "PAYMENT_WECHAT_API_V3_KEY is not set"}
	b := setupProofs(t, only)
	o := b.order(t, order.ChannelWechat, 3000)
	m := springPaid(order.ChannelWechat, o.OutTradeNo, "tx-1", b.cb.wechat(t, o.OutTradeNo, "tx-1", "SUCCESS", 3000))
	err = b.notify.Handle(t.Context(), m)
	require.True(t, messaging.IsPermanent(err), "%v", err)
	require.ErrorIs(t, err, paynotify.ErrNoKeys)
	require.ErrorContains(t, err, "PAYMENT_WECHAT_API_V3_KEY")

	none := setupProofs(t, nil)
	o = none.order(t, order.ChannelAlipay, 3000)
	err = none.notify.Handle(t.Context(), springPaid(order.ChannelAlipay, o.OutTradeNo, "tx-2", none.cb.alipay(t, o.OutTradeNo, "tx-2", paynotify.AlipayTradeSuccess, 3000)))
	require.True(t, messaging.IsPermanent(err), "%v", err)
	require.ErrorIs(t, err, order.ErrUnproven)
	require.ErrorContains(t, err, "no gateway keys")
	status, granted := none.granted(t, o.OutTradeNo)
	require.Equal(t, order.Pending, status)
	require.Zero(t, granted)
}
