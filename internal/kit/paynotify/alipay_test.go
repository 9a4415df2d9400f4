package paynotify_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/topology"
)

const (
	appID    = "2021004100000001"
	sellerID = "2088100000000001"
)

// alipayForm is a notification as Alipay posts it for a paid order, before
// signing: the fields of a real TRADE_SUCCESS notification.
func alipayForm() url.Values {
	return url.Values{
		"app_id":         {appID},
		"seller_id":      {sellerID},
		"out_trade_no":   {"PRO202611290001"},
		"trade_no":       {"2026112922001400001234567890"},
		"trade_status":   {paynotify.AlipayTradeSuccess},
		"total_amount":   {"15.00"},
		"receipt_amount": {"15.00"},
		"notify_id":      {"2026112900222200102000001234567890"},
		"notify_type":    {"trade_status_sync"},
		"notify_time":    {"2026-11-29 20:01:05"},
		"gmt_create":     {"2026-11-29 20:00:40"},
		"gmt_payment":    {"2026-11-29 20:01:02"},
		"subject":        {"Isle Pro 1 month"},
		"charset":        {"utf-8"},
		"version":        {"1.0"},
		"auth_app_id":    {appID},
		"buyer_id":       {"2088000000000002"},
		"fund_bill_list": {`[{"amount":"15.00","fundChannel":"ALIPAYACCOUNT"}]`},
	}
}

// signed signs form with k's Alipay key, as Alipay does.
func signed(t *testing.T, form url.Values, k paynotify.TestKeys) url.Values {
	t.Helper()
	sig, err := paynotify.SignAlipay(form, k.AlipayPrivate)
	require.NoError(t, err)
	out := url.Values{}
	for key, vs := range form {
		out[key] = append([]string(nil), vs...)
	}
	out.Set("sign_type", "RSA2")
	out.Set("sign", sig)
	return out
}

func alipayVerifier(t *testing.T, cfg paynotify.AlipayConfig) *paynotify.AlipayVerifier {
	t.Helper()
	v, err := paynotify.NewAlipayVerifier(cfg)
	require.NoError(t, err)
	return v
}

func TestPayAlipayValidNoticeIsAccepted(t *testing.T) {
	t.Parallel()
	k := keys(t)
	v := alipayVerifier(t, k.AlipayConfig(appID, sellerID))

	n, err := v.VerifyAlipay(signed(t, alipayForm(), k))
	require.NoError(t, err)
	require.Equal(t, "PRO202611290001", n.OutTradeNo)
	require.Equal(t, "2026112922001400001234567890", n.TradeNo)
	require.Equal(t, int64(1500), n.AmountFen)
	require.Equal(t, "2026112900222200102000001234567890", n.NotifyID)
	require.True(t, n.GmtPayment.Equal(time.Date(2026, 11, 29, 12, 1, 2, 0, time.UTC)), n.GmtPayment)
	require.True(t, n.NotifyTime.Equal(time.Date(2026, 11, 29, 12, 1, 5, 0, time.UTC)), n.NotifyTime)

	c := n.Notice()
	require.Equal(t, paynotify.Notice{
		Channel:       paynotify.ChannelAlipay,
		NotifyID:      "2026112900222200102000001234567890",
		OutTradeNo:    "PRO202611290001",
		TransactionID: "2026112922001400001234567890",
		TradeState:    paynotify.StateSuccess,
		ProviderState: paynotify.AlipayTradeSuccess,
		AmountFen:     1500,
		Currency:      paynotify.CurrencyCNY,
		PaidAt:        n.GmtPayment,
		Raw:           n.Form.Encode(),
	}, c)
	require.True(t, paynotify.AmountMatches(c, 1500))
}

func TestPayAlipayTradeFinishedIsPaid(t *testing.T) {
	t.Parallel()
	k := keys(t)
	form := alipayForm()
	form.Set("trade_status", paynotify.AlipayTradeFinished)

	n, err := alipayVerifier(t, k.AlipayConfig(appID, "")).VerifyAlipay(signed(t, form, k))
	require.NoError(t, err)
	require.Equal(t, paynotify.StateSuccess, n.Notice().TradeState)
}

func TestPayAlipayTamperedParameterIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	form := signed(t, alipayForm(), k)
	form.Set("total_amount", "0.01")

	n, err := alipayVerifier(t, k.AlipayConfig(appID, sellerID)).VerifyAlipay(form)
	require.ErrorIs(t, err, paynotify.ErrBadSignature)
	require.NotErrorIs(t, err, paynotify.ErrSignType)
	require.Zero(t, n)
}

func TestPayAlipayAddedParameterIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	form := signed(t, alipayForm(), k)
	form.Set("refund_fee", "15.00")

	_, err := alipayVerifier(t, k.AlipayConfig(appID, sellerID)).VerifyAlipay(form)
	require.ErrorIs(t, err, paynotify.ErrBadSignature)
}

func TestPayAlipayOtherKeyIsRefused(t *testing.T) {
	t.Parallel()
	form := signed(t, alipayForm(), others(t))

	_, err := alipayVerifier(t, keys(t).AlipayConfig(appID, sellerID)).VerifyAlipay(form)
	require.ErrorIs(t, err, paynotify.ErrBadSignature)
}

func TestPayAlipayMissingOrGarbledSignIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	v := alipayVerifier(t, k.AlipayConfig(appID, sellerID))
	for name, sign := range map[string]string{"missing": "", "not base64": "%%%", "truncated": "AAAA"} {
		form := signed(t, alipayForm(), k)
		form.Set("sign", sign)
		_, err := v.VerifyAlipay(form)
		require.ErrorIs(t, err, paynotify.ErrBadSignature, name)
	}
}

func TestPayAlipayChangedSignTypeIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	v := alipayVerifier(t, k.AlipayConfig(appID, sellerID))
	for _, st := range []string{"RSA", "rsa2", ""} {
		form := signed(t, alipayForm(), k) // the signature itself is valid
		form.Set("sign_type", st)
		_, err := v.VerifyAlipay(form)
		require.ErrorIs(t, err, paynotify.ErrSignType, "sign_type %q", st)
		require.ErrorIs(t, err, paynotify.ErrBadSignature, "answered like a bad signature")
	}
}

func TestPayAlipayWrongAppIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	form := alipayForm()
	form.Set("app_id", "2021009999999999")

	n, err := alipayVerifier(t, k.AlipayConfig(appID, sellerID)).VerifyAlipay(signed(t, form, k))
	require.ErrorIs(t, err, paynotify.ErrWrongApp)
	require.Zero(t, n)
}

func TestPayAlipayWrongSellerIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	form := alipayForm()
	form.Set("seller_id", "2088999999999999")
	form = signed(t, form, k)

	_, err := alipayVerifier(t, k.AlipayConfig(appID, sellerID)).VerifyAlipay(form)
	require.ErrorIs(t, err, paynotify.ErrWrongMerchant)

	_, err = alipayVerifier(t, k.AlipayConfig(appID, "")).VerifyAlipay(form)
	require.NoError(t, err, "seller_id is checked only when configured")
}

func TestPayAlipayAmountMismatch(t *testing.T) {
	t.Parallel()
	k := keys(t)
	form := alipayForm()
	form.Set("total_amount", "14.99")

	n, err := alipayVerifier(t, k.AlipayConfig(appID, sellerID)).VerifyAlipay(signed(t, form, k))
	require.NoError(t, err, "the amount is the caller's to compare")
	require.False(t, paynotify.AmountMatches(n.Notice(), 1500))
	require.True(t, paynotify.AmountMatches(n.Notice(), 1499))
}

func TestPayAlipayNotPaid(t *testing.T) {
	t.Parallel()
	k := keys(t)
	v := alipayVerifier(t, k.AlipayConfig(appID, sellerID))
	for status, state := range map[string]string{
		paynotify.AlipayWaitBuyerPay: paynotify.StateNotPay,
		paynotify.AlipayTradeClosed:  paynotify.StateClosed,
	} {
		form := alipayForm()
		form.Set("trade_status", status)
		form.Del("gmt_payment")

		n, err := v.VerifyAlipay(signed(t, form, k))
		require.ErrorIs(t, err, paynotify.ErrNotPaid, status)
		require.Equal(t, status, n.TradeStatus, "the notice comes with the error")
		require.Equal(t, "PRO202611290001", n.OutTradeNo)
		c := n.Notice()
		require.Equal(t, state, c.TradeState)
		require.False(t, c.Paid())
		require.True(t, c.PaidAt.IsZero())
		require.NoError(t, c.Message().Validate())
	}
}

func TestPayAlipayEmptyValuesAreNotSigned(t *testing.T) {
	t.Parallel()
	k := keys(t)
	v := alipayVerifier(t, k.AlipayConfig(appID, sellerID))

	// Alipay leaves parameters with an empty value out of what it signs.
	form := signed(t, alipayForm(), k)
	form.Set("body", "")
	form.Set("passback_params", "")
	_, err := v.VerifyAlipay(form)
	require.NoError(t, err)

	// A signer that kept "body=" signed another string: refused.
	withEmpty := alipayForm()
	withEmpty.Set("body", "")
	canonical := "auth_app_id=" + appID + "&body=&buyer_id=2088000000000002"
	require.Contains(t, naiveSignedString(withEmpty), canonical)
	form = withEmpty
	form.Set("sign_type", "RSA2")
	form.Set("sign", signRaw(t, naiveSignedString(withEmpty), k.AlipayPrivate))
	_, err = v.VerifyAlipay(form)
	require.ErrorIs(t, err, paynotify.ErrBadSignature)
}

// naiveSignedString keeps empty values, as a wrong canonicalisation would.
func naiveSignedString(form url.Values) string {
	s := ""
	for _, k := range slices.Sorted(maps.Keys(form)) {
		if k == "sign" || k == "sign_type" {
			continue
		}
		if s != "" {
			s += "&"
		}
		s += k + "=" + form.Get(k)
	}
	return s
}

func signRaw(t *testing.T, msg string, priv *rsa.PrivateKey) string {
	t.Helper()
	digest := sha256.Sum256([]byte(msg))
	sig, err := rsa.SignPKCS1v15(nil, priv, crypto.SHA256, digest[:])
	require.NoError(t, err)
	return base64.StdEncoding.EncodeToString(sig)
}

func TestPayAlipaySignedStringIsSortedAndDecoded(t *testing.T) {
	t.Parallel()
	form, err := url.ParseQuery("b=2&a=x%26y%3Dz&sign=S&sign_type=RSA2&c=&subject=%E4%BC%9A%E5%91%98+1")
	require.NoError(t, err)
	require.Equal(t, "a=x&y=z&b=2&subject=会员 1", paynotify.AlipaySignedString(form))
}

func TestPayAlipayRepeatedParameterIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	form := signed(t, alipayForm(), k)
	form.Add("out_trade_no", "PRO202611290002")

	_, err := alipayVerifier(t, k.AlipayConfig(appID, sellerID)).VerifyAlipay(form)
	require.ErrorIs(t, err, paynotify.ErrMalformed)
}

func TestPayAlipayMissingFieldsAreMalformed(t *testing.T) {
	t.Parallel()
	k := keys(t)
	v := alipayVerifier(t, k.AlipayConfig(appID, sellerID))
	for _, field := range []string{"out_trade_no", "trade_no", "trade_status", "total_amount", "notify_id"} {
		form := alipayForm()
		form.Del(field)
		_, err := v.VerifyAlipay(signed(t, form, k))
		require.ErrorIs(t, err, paynotify.ErrMalformed, field)
		require.ErrorContains(t, err, field)
	}
	form := alipayForm()
	form.Set("total_amount", "15.001")
	_, err := v.VerifyAlipay(signed(t, form, k))
	require.ErrorIs(t, err, paynotify.ErrMalformed)
}

func TestPayAlipayKeyFormats(t *testing.T) {
	t.Parallel()
	k := keys(t)
	pub := &k.AlipayPrivate.PublicKey
	pkix, err := x509.MarshalPKIXPublicKey(pub)
	require.NoError(t, err)
	formats := map[string]string{
		"PKIX PEM":    string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix})),
		"PKCS#1 PEM":  string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(pub)})),
		"bare base64": base64.StdEncoding.EncodeToString(pkix),
	}
	form := signed(t, alipayForm(), k)
	for name, text := range formats {
		v := alipayVerifier(t, paynotify.AlipayConfig{PublicKey: text, AppID: appID})
		_, err := v.VerifyAlipay(form)
		require.NoError(t, err, name)
	}

	_, err = paynotify.NewAlipayVerifier(paynotify.AlipayConfig{PublicKey: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"})
	require.ErrorContains(t, err, "not a public key")
	require.ErrorContains(t, err, "app id is required", "every problem at once")
}

func TestPayAlipayMessage(t *testing.T) {
	t.Parallel()
	k := keys(t)
	n, err := alipayVerifier(t, k.AlipayConfig(appID, sellerID)).VerifyAlipay(signed(t, alipayForm(), k))
	require.NoError(t, err)

	m := n.Notice().Message()
	require.NoError(t, m.Validate())
	require.Equal(t, topology.PaymentNotify{
		NotifyID:      n.NotifyID,
		Channel:       "ALIPAY",
		OutTradeNo:    n.OutTradeNo,
		TransactionID: n.TradeNo,
		TradeState:    "SUCCESS",
		SuccessTime:   topology.OffsetDateTime{Time: n.GmtPayment},
		VerifyOK:      true,
		RawBody:       n.Form.Encode(),
		AmountFen:     ptr(int64(1500)),
		Currency:      "CNY",
	}, m)
}

func ptr[T any](v T) *T { return &v }

// Whatever form arrives, VerifyAlipay never panics and refuses it with one
// of its errors and the zero notice, unless Alipay's key signed exactly
// what the form says (the seeds signed here): nothing else verifies, and a
// verified notice says what its form says.
func FuzzPayVerifyAlipay(f *testing.F) {
	// Alipay's key, and another (a small one: it only signs a seed). Each
	// fuzz worker makes its own, so no more than needed.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		f.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		f.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		f.Fatal(err)
	}
	v, err := paynotify.NewAlipayVerifier(paynotify.AlipayConfig{AppID: appID, SellerID: sellerID,
		PublicKey: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}))})
	if err != nil {
		f.Fatal(err)
	}
	signedBy := map[string]string{} // the signed string of each seed Alipay's key signed -> its sign
	seed := func(form url.Values, by *rsa.PrivateKey) {
		sig, err := paynotify.SignAlipay(form, by)
		if err != nil {
			f.Fatal(err)
		}
		if by == key {
			signedBy[paynotify.AlipaySignedString(form)] = sig
		}
		form.Set("sign_type", "RSA2")
		form.Set("sign", sig)
		f.Add(form.Encode())
	}
	with := func(k, v string) url.Values { form := alipayForm(); form.Set(k, v); return form }
	seed(alipayForm(), key)
	seed(with("trade_status", paynotify.AlipayWaitBuyerPay), key)
	seed(with("trade_status", paynotify.AlipayTradeClosed), key)
	seed(with("app_id", "2021999999999999"), key)
	seed(with("total_amount", "15.001"), key)
	seed(alipayForm(), other)
	f.Add(alipayForm().Encode())
	f.Add("sign_type=RSA&sign=AAAA&app_id=" + appID)
	f.Add("a=1&a=2&sign_type=RSA2&sign=%ZZ")
	f.Fuzz(func(t *testing.T, body string) {
		form, err := url.ParseQuery(body)
		if err != nil {
			return // the handler's ParseForm refuses it first
		}
		n, err := v.VerifyAlipay(form)
		if err != nil && !errors.Is(err, paynotify.ErrNotPaid) {
			for _, want := range []error{paynotify.ErrMalformed, paynotify.ErrBadSignature, paynotify.ErrWrongApp, paynotify.ErrWrongMerchant} {
				if errors.Is(err, want) {
					require.Zero(t, n, "%q", body)
					return
				}
			}
			t.Fatalf("%q: refused with %v, not one of VerifyAlipay's errors", body, err)
		}
		sig, ok := signedBy[paynotify.AlipaySignedString(form)]
		require.True(t, ok && sig == form.Get("sign"), "%q verified, and Alipay's key never signed it", body)
		fen, perr := paynotify.ParseYuan(form.Get("total_amount"))
		require.NoError(t, perr)
		require.Equal(t, []string{form.Get("out_trade_no"), form.Get("trade_no"), form.Get("notify_id"), appID, fmt.Sprint(fen)},
			[]string{n.OutTradeNo, n.TradeNo, n.NotifyID, n.AppID, fmt.Sprint(n.AmountFen)}, "%q", body)
	})
}
