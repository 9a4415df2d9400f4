package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/topology"
	"github.com/google/uuid"
)

// A simulated callback is built the way the gateway builds it, from the
// gateway's side of the keys: SignAlipay, or EncryptWechatResource and
// SignWechat, the inverse of what the API verifies (doc/payments.md).

// payment is what a simulated callback says about an order.
type payment struct {
	OutTradeNo    string
	Subject       string    // Alipay's subject: the order's product
	AmountFen     int64     // what was paid
	State         string    // the gateway's own: alipayStates or wechatStates
	NotifyID      string    // the callback's identity; "" = a new one
	TransactionID string    // Alipay trade_no, WeChat transaction_id; "" = a new one
	OrderedAt     time.Time // Alipay's gmt_create; zero = absent
}

// callback is a notification ready to post.
type callback struct {
	Channel string // paynotify.ChannelAlipay or ChannelWechat
	Path    string // of the API's notify endpoint
	Header  http.Header
	Body    []byte
	Summary string // what it says, for the operator
}

// Accepted reports whether the API's answer is one after which the gateway
// stops resending: Alipay's body exactly "success", WeChat's 200 or 204.
func (c callback) Accepted(status int, body []byte) bool {
	if c.Channel == paynotify.ChannelAlipay {
		return string(body) == "success"
	}
	return status == http.StatusOK || status == http.StatusNoContent
}

// alipayStates maps -state to trade_status: Isle's states (those of
// PaymentNotifyMessage) or Alipay's own.
var alipayStates = map[string]string{
	paynotify.StateSuccess: paynotify.AlipayTradeSuccess,
	paynotify.StateNotPay:  paynotify.AlipayWaitBuyerPay,
	paynotify.StateClosed:  paynotify.AlipayTradeClosed,
	"FINISHED":             paynotify.AlipayTradeFinished,

	paynotify.AlipayTradeSuccess:  paynotify.AlipayTradeSuccess,
	paynotify.AlipayTradeFinished: paynotify.AlipayTradeFinished,
	paynotify.AlipayWaitBuyerPay:  paynotify.AlipayWaitBuyerPay,
	paynotify.AlipayTradeClosed:   paynotify.AlipayTradeClosed,
}

// wechatStates are WeChat Pay's trade_state values.
var wechatStates = []string{"SUCCESS", "REFUND", "NOTPAY", "CLOSED", "REVOKED", "USERPAYING", "PAYERROR"}

// gatewayState is -state as channel spells it.
func gatewayState(channel, state string) (string, error) {
	state = strings.ToUpper(state)
	if channel == paynotify.ChannelAlipay {
		if s, ok := alipayStates[state]; ok {
			return s, nil
		}
		return "", fmt.Errorf("-state %s: Alipay knows SUCCESS, FINISHED, NOTPAY, CLOSED (or TRADE_SUCCESS, TRADE_FINISHED, WAIT_BUYER_PAY, TRADE_CLOSED)", state)
	}
	if slices.Contains(wechatStates, state) {
		return state, nil
	}
	return "", fmt.Errorf("-state %s: WeChat Pay knows %s", state, strings.Join(wechatStates, ", "))
}

// alipayTimeLayout is how Alipay writes times: Beijing wall time.
const alipayTimeLayout = "2006-01-02 15:04:05"

// alipayCallback is Alipay's asynchronous notification of p at now: the
// form of a trade_status_sync, signed RSA2 with Alipay's key.
func alipayCallback(k payKeys, p payment, now time.Time) (callback, error) {
	now = now.In(topology.UTC8)
	notifyID := p.NotifyID
	if notifyID == "" {
		notifyID = newAlipayNotifyID()
	}
	tradeNo := p.TransactionID
	if tradeNo == "" {
		tradeNo = now.Format("20060102") + "22001" + randomDigits(15)
	}
	amount := paynotify.FormatYuan(p.AmountFen)
	form := url.Values{
		"notify_type":  {"trade_status_sync"},
		"notify_id":    {notifyID},
		"notify_time":  {now.Format(alipayTimeLayout)},
		"charset":      {"utf-8"},
		"version":      {"1.0"},
		"app_id":       {k.alipayAppID},
		"auth_app_id":  {k.alipayAppID},
		"out_trade_no": {p.OutTradeNo},
		"trade_no":     {tradeNo},
		"trade_status": {p.State},
		"total_amount": {amount},
		"subject":      {p.Subject},
	}
	if k.alipaySellerID != "" {
		form.Set("seller_id", k.alipaySellerID)
	}
	if !p.OrderedAt.IsZero() {
		form.Set("gmt_create", p.OrderedAt.In(topology.UTC8).Format(alipayTimeLayout))
	}
	switch p.State {
	case paynotify.AlipayTradeSuccess, paynotify.AlipayTradeFinished:
		form.Set("gmt_payment", now.Format(alipayTimeLayout))
		form.Set("receipt_amount", amount)
		form.Set("buyer_pay_amount", amount)
	case paynotify.AlipayTradeClosed:
		form.Set("gmt_close", now.Format(alipayTimeLayout))
	}
	sig, err := paynotify.SignAlipay(form, k.AlipayPrivate)
	if err != nil {
		return callback{}, err
	}
	form.Set("sign_type", "RSA2")
	form.Set("sign", sig)
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	return callback{
		Channel: paynotify.ChannelAlipay,
		Path:    "/v1/payments/notify/alipay",
		Header:  h,
		Body:    []byte(form.Encode()),
		Summary: fmt.Sprintf("Alipay %s of order %s, %s yuan (notify_id %s, trade_no %s)", p.State, p.OutTradeNo, amount, notifyID, tradeNo),
	}, nil
}

// wechatEnvelope and wechatResource are a WeChat Pay v3 notification body,
// its fields in WeChat's order.
type wechatEnvelope struct {
	ID           string         `json:"id"`
	CreateTime   string         `json:"create_time"`
	ResourceType string         `json:"resource_type"`
	EventType    string         `json:"event_type"`
	Summary      string         `json:"summary"`
	Resource     wechatResource `json:"resource"`
}

type wechatResource struct {
	OriginalType   string `json:"original_type"`
	Algorithm      string `json:"algorithm"`
	Ciphertext     string `json:"ciphertext"`
	AssociatedData string `json:"associated_data"`
	Nonce          string `json:"nonce"`
}

// wechatCallback is WeChat Pay's API v3 transaction notification of p at
// now: the transaction sealed with the API v3 key (associated data
// "transaction", a fresh nonce), the body signed with the platform key and
// the Wechatpay-* headers of the certificate's serial.
func wechatCallback(k payKeys, p payment, now time.Time) (callback, error) {
	now = now.In(topology.UTC8)
	notifyID := p.NotifyID
	if notifyID == "" {
		notifyID = uuid.NewString()
	}
	txID := p.TransactionID
	if txID == "" {
		txID = "4200000000" + now.Format("20060102") + randomDigits(10)
	}
	tx := paynotify.WechatTransaction{
		AppID: k.wechatAppID, MchID: k.wechatMchID, OutTradeNo: p.OutTradeNo, TransactionID: txID,
		TradeType: "NATIVE", TradeState: p.State, BankType: "OTHERS",
		Payer:  paynotify.WechatPayer{OpenID: "oIsleLocalTestPayer000000000"},
		Amount: paynotify.WechatAmount{Total: p.AmountFen, PayerTotal: p.AmountFen, Currency: paynotify.CurrencyCNY, PayerCurrency: paynotify.CurrencyCNY},
	}
	event, summary := "TRANSACTION."+p.State, p.State
	if p.State == paynotify.WechatTradeSuccess {
		tx.TradeStateDesc, tx.SuccessTime = "支付成功", now.Format(time.RFC3339)
		summary = tx.TradeStateDesc
	}
	plain, err := json.Marshal(tx)
	if err != nil {
		return callback{}, err
	}
	nonce := paynotify.NewWechatNonce(12)
	sealed, err := paynotify.EncryptWechatResource(plain, k.APIv3Key, nonce, "transaction")
	if err != nil {
		return callback{}, err
	}
	body, err := json.Marshal(wechatEnvelope{
		ID: notifyID, CreateTime: now.Format(time.RFC3339), ResourceType: "encrypt-resource", EventType: event, Summary: summary,
		Resource: wechatResource{OriginalType: "transaction", Algorithm: paynotify.ResourceAlgorithm, Ciphertext: sealed,
			AssociatedData: "transaction", Nonce: nonce},
	})
	if err != nil {
		return callback{}, err
	}
	stamp, headerNonce := strconv.FormatInt(now.Unix(), 10), paynotify.NewWechatNonce(32)
	sig, err := paynotify.SignWechat(body, stamp, headerNonce, k.WechatPrivate)
	if err != nil {
		return callback{}, err
	}
	h := paynotify.WechatHeader(stamp, headerNonce, sig, k.WechatSerial)
	h.Set("Content-Type", "application/json")
	return callback{
		Channel: paynotify.ChannelWechat,
		Path:    "/v1/payments/notify/wechat",
		Header:  h,
		Body:    body,
		Summary: fmt.Sprintf("WeChat Pay %s of order %s, %d fen (id %s, transaction_id %s)", p.State, p.OutTradeNo, p.AmountFen, notifyID, txID),
	}, nil
}

// newAlipayNotifyID is a fresh notify_id: 32 random hex digits.
func newAlipayNotifyID() string {
	b := make([]byte, 16)
	rand.Read(b) // never fails (crypto/rand, Go 1.24+)
	return hex.EncodeToString(b)
}

// randomDigits is n random decimal digits.
func randomDigits(n int) string {
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(n)), nil)
	v, _ := rand.Int(rand.Reader, limit) // never fails (crypto/rand, Go 1.24+)
	s := v.String()
	return strings.Repeat("0", n-len(s)) + s
}
