package paynotify

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/eisland/isle/topology"
)

// AlipayConfig configures an AlipayVerifier.
type AlipayConfig struct {
	// PublicKey is Alipay's public key (not the app's own key): PEM, PKIX
	// ("PUBLIC KEY") or PKCS#1 ("RSA PUBLIC KEY"), or the bare base64 the
	// console shows.
	PublicKey string
	AppID     string // required: app_id must equal it
	SellerID  string // optional: when set, seller_id must equal it
}

// AlipayVerifier checks Alipay asynchronous notifications (RSA2). It is
// safe for concurrent use.
type AlipayVerifier struct {
	key      *rsa.PublicKey
	appID    string
	sellerID string
}

// NewAlipayVerifier checks cfg and parses the key.
func NewAlipayVerifier(cfg AlipayConfig) (*AlipayVerifier, error) {
	var errs []error
	key, err := ParseRSAPublicKey(cfg.PublicKey)
	if err != nil {
		errs = append(errs, fmt.Errorf("alipay public key: %w", err))
	}
	if cfg.AppID == "" {
		errs = append(errs, errors.New("paynotify: alipay app id is required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &AlipayVerifier{key: key, appID: cfg.AppID, sellerID: cfg.SellerID}, nil
}

// Alipay trade_status values.
const (
	AlipayTradeSuccess  = "TRADE_SUCCESS"
	AlipayTradeFinished = "TRADE_FINISHED"
	AlipayWaitBuyerPay  = "WAIT_BUYER_PAY"
	AlipayTradeClosed   = "TRADE_CLOSED"
)

// alipayTimeLayout is Alipay's time format, Beijing wall time.
const alipayTimeLayout = "2006-01-02 15:04:05"

// AlipayNotice is a verified Alipay notification.
type AlipayNotice struct {
	AppID       string
	SellerID    string
	OutTradeNo  string
	TradeNo     string
	TradeStatus string    // as sent: TRADE_SUCCESS, TRADE_FINISHED, WAIT_BUYER_PAY, TRADE_CLOSED
	TotalAmount string    // as sent, in yuan
	AmountFen   int64     // TotalAmount in fen, exactly
	NotifyID    string    // Alipay's id of this notification
	NotifyTime  time.Time // UTC+8; zero when absent
	GmtPayment  time.Time // UTC+8; zero when absent (unpaid trades)
	Form        url.Values
}

// Notice is n in the form common to both gateways.
func (n AlipayNotice) Notice() Notice {
	state := n.TradeStatus
	switch n.TradeStatus {
	case AlipayTradeSuccess, AlipayTradeFinished:
		state = StateSuccess
	case AlipayWaitBuyerPay:
		state = StateNotPay
	case AlipayTradeClosed:
		state = StateClosed
	}
	paidAt := time.Time{}
	if state == StateSuccess {
		paidAt = n.GmtPayment
	}
	return Notice{
		Channel:       ChannelAlipay,
		NotifyID:      n.NotifyID,
		OutTradeNo:    n.OutTradeNo,
		TransactionID: n.TradeNo,
		TradeState:    state,
		ProviderState: n.TradeStatus,
		AmountFen:     n.AmountFen,
		Currency:      CurrencyCNY,
		PaidAt:        paidAt,
		Raw:           n.Form.Encode(),
	}
}

// VerifyAlipay checks a notification's form (the handler's r.PostForm:
// URL-decoded values), in this order: every parameter appears once;
// sign_type is RSA2 (ErrSignType); the RSA2 signature over AlipaySignedString
// (ErrBadSignature); app_id (ErrWrongApp); seller_id when configured
// (ErrWrongMerchant); the fields (ErrMalformed); trade_status. A trade that
// is not paid returns the notice with ErrNotPaid. On other errors the notice
// is the zero value.
func (v *AlipayVerifier) VerifyAlipay(form url.Values) (AlipayNotice, error) {
	for k, vs := range form {
		if len(vs) != 1 {
			return AlipayNotice{}, fmt.Errorf("%w: alipay parameter %q appears %d times", ErrMalformed, k, len(vs))
		}
	}
	if st := form.Get("sign_type"); st != "RSA2" {
		return AlipayNotice{}, fmt.Errorf("%w (got %q)", ErrSignType, st)
	}
	sig, err := base64.StdEncoding.DecodeString(form.Get("sign"))
	if err != nil || len(sig) == 0 {
		return AlipayNotice{}, fmt.Errorf("%w: alipay sign is missing or not base64", ErrBadSignature)
	}
	digest := sha256.Sum256([]byte(AlipaySignedString(form)))
	if err := rsa.VerifyPKCS1v15(v.key, crypto.SHA256, digest[:], sig); err != nil {
		return AlipayNotice{}, fmt.Errorf("%w: alipay RSA2", ErrBadSignature)
	}
	if got := form.Get("app_id"); got != v.appID {
		return AlipayNotice{}, fmt.Errorf("%w: app_id %q", ErrWrongApp, got)
	}
	if got := form.Get("seller_id"); v.sellerID != "" && got != v.sellerID {
		return AlipayNotice{}, fmt.Errorf("%w: seller_id %q", ErrWrongMerchant, got)
	}
	n, err := parseAlipay(form)
	if err != nil {
		return AlipayNotice{}, err
	}
	if n.TradeStatus != AlipayTradeSuccess && n.TradeStatus != AlipayTradeFinished {
		return n, fmt.Errorf("%w: alipay trade_status %s", ErrNotPaid, n.TradeStatus)
	}
	return n, nil
}

func parseAlipay(form url.Values) (AlipayNotice, error) {
	n := AlipayNotice{
		AppID:       form.Get("app_id"),
		SellerID:    form.Get("seller_id"),
		OutTradeNo:  form.Get("out_trade_no"),
		TradeNo:     form.Get("trade_no"),
		TradeStatus: form.Get("trade_status"),
		TotalAmount: form.Get("total_amount"),
		NotifyID:    form.Get("notify_id"),
		Form:        form,
	}
	var errs []error
	for _, f := range []struct{ name, v string }{
		{"out_trade_no", n.OutTradeNo}, {"trade_no", n.TradeNo}, {"trade_status", n.TradeStatus},
		{"total_amount", n.TotalAmount}, {"notify_id", n.NotifyID},
	} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("%s is missing", f.name))
		}
	}
	var err error
	if n.TotalAmount != "" {
		if n.AmountFen, err = ParseYuan(n.TotalAmount); err != nil {
			errs = append(errs, fmt.Errorf("total_amount: %w", err))
		}
	}
	if n.NotifyTime, err = alipayTime(form.Get("notify_time")); err != nil {
		errs = append(errs, fmt.Errorf("notify_time: %w", err))
	}
	if n.GmtPayment, err = alipayTime(form.Get("gmt_payment")); err != nil {
		errs = append(errs, fmt.Errorf("gmt_payment: %w", err))
	}
	if len(errs) > 0 {
		return AlipayNotice{}, fmt.Errorf("%w: alipay: %w", ErrMalformed, errors.Join(errs...))
	}
	return n, nil
}

func alipayTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.ParseInLocation(alipayTimeLayout, s, topology.UTC8)
}

// AlipaySignedString is the string Alipay signs: the parameters but sign,
// sign_type and those with an empty value, sorted by key, joined as
// k=v&k=v with the values as received (URL-decoded, not re-encoded). Of a
// repeated key only the first value counts; VerifyAlipay refuses repeats.
func AlipaySignedString(form url.Values) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		if k != "sign" && k != "sign_type" && form.Get(k) != "" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(form.Get(k))
	}
	return b.String()
}
