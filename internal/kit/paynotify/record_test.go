package paynotify_test

import (
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/topology"
)

// recordGateways verifies records with k's keys, as the worker configured
// with the gateways' keys does.
func recordGateways(t *testing.T, k paynotify.TestKeys) paynotify.Gateways {
	t.Helper()
	return paynotify.Gateways{Alipay: alipayVerifier(t, k.AlipayConfig(appID, sellerID)), Wechat: wechatVerifier(t, k.WechatCertConfig())}
}

// A record's rawBody is the callback as its producer received it: Alipay's
// form as posted, WeChat Pay's body without its headers. Each proves the
// message the API would have published for it.
func TestPayRecordProvesWhatTheCallbackSays(t *testing.T) {
	t.Parallel()
	k := keys(t)
	g := recordGateways(t, k)

	form := signed(t, alipayForm(), k)
	m, err := g.VerifyRecord(paynotify.ChannelAlipay, form.Encode()+"\n")
	require.NoError(t, err)
	n, err := alipayVerifier(t, k.AlipayConfig(appID, sellerID)).VerifyAlipay(form)
	require.NoError(t, err)
	require.Equal(t, n.Notice().Message(), m)
	require.EqualValues(t, 1500, *m.AmountFen)

	cb := wechatCallback(t, k, transaction(), k.WechatSerial, time.Now())
	m, err = g.VerifyRecord(paynotify.ChannelWechat, string(cb.body))
	require.NoError(t, err)
	require.Equal(t, topology.PaymentNotify{NotifyID: "EV-2018022511223320873", Channel: "WECHAT", OutTradeNo: "AGT202611290002",
		TransactionID: "4200002000202611291234567890", TradeState: "SUCCESS", VerifyOK: true, RawBody: string(cb.body),
		SuccessTime: topology.OffsetDateTime{Time: time.Date(2026, 11, 29, 20, 1, 2, 0, topology.UTC8)}, AmountFen: ptr(int64(5000)), Currency: "CNY"},
		normalTime(m))
	// Its headers are not part of the record: an old body opens all the
	// same, which the signature's 5-minute window would refuse.
	old := wechatCallback(t, k, transaction(), k.WechatSerial, time.Now().Add(-48*time.Hour))
	_, err = g.VerifyRecord(paynotify.ChannelWechat, string(old.body))
	require.NoError(t, err)
}

// normalTime makes m's success time comparable with ==.
func normalTime(m topology.PaymentNotify) topology.PaymentNotify {
	m.SuccessTime.Time = m.SuccessTime.In(topology.UTC8)
	return m
}

// Nothing but a callback the gateway's keys made proves anything.
func TestPayRecordRefusesWhatTheKeysDidNotMake(t *testing.T) {
	t.Parallel()
	k, other := keys(t), others(t)
	g := recordGateways(t, k)
	alipay := signed(t, alipayForm(), k)
	tampered := signed(t, alipayForm(), k)
	tampered.Set("total_amount", "0.01")
	wechat := wechatCallback(t, k, transaction(), k.WechatSerial, time.Now()).body
	var env map[string]any
	require.NoError(t, json.Unmarshal(wechat, &env))
	env["resource"].(map[string]any)["associated_data"] = "refund"
	notPaid := transaction()
	notPaid["trade_state"] = "NOTPAY"

	for _, c := range []struct {
		name, channel, raw string
		want               error
	}{
		{"an Alipay amount changed", paynotify.ChannelAlipay, tampered.Encode(), paynotify.ErrBadSignature},
		{"another Alipay key", paynotify.ChannelAlipay, signed(t, alipayForm(), other).Encode(), paynotify.ErrBadSignature},
		{"an Alipay form unsigned", paynotify.ChannelAlipay, alipayForm().Encode(), paynotify.ErrBadSignature},
		{"not a form", paynotify.ChannelAlipay, "%zz=1", paynotify.ErrMalformed},
		{"WeChat's body as Alipay's", paynotify.ChannelAlipay, string(wechat), paynotify.ErrBadSignature},
		{"another API v3 key", paynotify.ChannelWechat, string(wechatCallback(t, other, transaction(), other.WechatSerial, time.Now()).body), paynotify.ErrDecrypt},
		{"associated data changed", paynotify.ChannelWechat, string(mustMarshal(t, env)), paynotify.ErrDecrypt},
		{"Alipay's form as WeChat's", paynotify.ChannelWechat, alipay.Encode(), paynotify.ErrMalformed},
		{"a trade not paid", paynotify.ChannelWechat, string(wechatCallback(t, k, notPaid, k.WechatSerial, time.Now()).body), paynotify.ErrNotPaid},
		{"an unknown channel", "PAYPAL", alipay.Encode(), paynotify.ErrMalformed},
		{"too large", paynotify.ChannelWechat, strings.Repeat(" ", paynotify.MaxBodyBytes+1), paynotify.ErrTooLarge},
	} {
		m, err := g.VerifyRecord(c.channel, c.raw)
		require.ErrorIs(t, err, c.want, c.name)
		if !errors.Is(err, paynotify.ErrNotPaid) {
			require.Zero(t, m, c.name)
			continue
		}
		require.Equal(t, "NOTPAY", m.TradeState, c.name)
		require.Nil(t, m.AmountFen, "%s: an unpaid trade pays nothing", c.name)
	}
}

// A gateway without keys proves nothing, and says what to configure.
func TestPayRecordWithoutKeysSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	k := keys(t)
	g := paynotify.Gateways{Wechat: wechatVerifier(t, k.WechatCertConfig()), Missing: map[string]string{paynotify.ChannelAlipay: "ALIPAY_KEY is not set"}}
	_, err := g.VerifyRecord(paynotify.ChannelAlipay, signed(t, alipayForm(), k).Encode())
	require.ErrorIs(t, err, paynotify.ErrNoKeys)
	require.ErrorContains(t, err, "ALIPAY_KEY is not set")
	_, err = paynotify.Gateways{}.VerifyRecord(paynotify.ChannelWechat, string(wechatCallback(t, k, transaction(), k.WechatSerial, time.Now()).body))
	require.ErrorIs(t, err, paynotify.ErrNoKeys)
}

// Whatever a record's rawBody holds, VerifyRecord never panics, refuses
// with one of its errors and the zero message, and proves only what the
// gateways' keys made (the seeds made here): a proven message says what
// the callback said.
func FuzzPayVerifyRecord(f *testing.F) {
	k, err := testKeys()
	if err != nil {
		f.Fatal(err)
	}
	a, err := paynotify.NewAlipayVerifier(k.AlipayConfig(appID, sellerID))
	if err != nil {
		f.Fatal(err)
	}
	w, err := paynotify.NewWechatVerifier(k.WechatCertConfig())
	if err != nil {
		f.Fatal(err)
	}
	g := paynotify.Gateways{Alipay: a, Wechat: w}
	form := alipayForm()
	signedString := paynotify.AlipaySignedString(form) // what Alipay's key signed
	sig, err := paynotify.SignAlipay(form, k.AlipayPrivate)
	if err != nil {
		f.Fatal(err)
	}
	form.Set("sign_type", "RSA2")
	form.Set("sign", sig)
	f.Add("ALIPAY", form.Encode())
	plain, _ := json.Marshal(transaction())
	nonce := "0123456789ab"
	ct, err := paynotify.EncryptWechatResource(plain, k.APIv3Key, nonce, "transaction")
	if err != nil {
		f.Fatal(err)
	}
	body := `{"id":"EV-1","resource":{"algorithm":"AEAD_AES_256_GCM","ciphertext":"` + ct + `","associated_data":"transaction","nonce":"` + nonce + `"}}`
	f.Add("WECHAT", body)
	f.Add("WECHAT", `{"id":"1","resource":{"algorithm":"AEAD_AES_256_GCM","ciphertext":"AAAA","nonce":"0123456789ab"}}`)
	f.Add("ALIPAY", "sign_type=RSA2&sign=AAAA&out_trade_no=1")
	f.Add("OTHER", "")
	f.Fuzz(func(t *testing.T, channel, raw string) {
		m, err := g.VerifyRecord(channel, raw)
		if err != nil {
			for _, want := range []error{paynotify.ErrMalformed, paynotify.ErrBadSignature, paynotify.ErrDecrypt, paynotify.ErrTooLarge,
				paynotify.ErrWrongApp, paynotify.ErrWrongMerchant, paynotify.ErrNotPaid} {
				if errors.Is(err, want) {
					if want != paynotify.ErrNotPaid {
						require.Zero(t, m, "%s %q", channel, raw)
					}
					return
				}
			}
			t.Fatalf("%s %q: refused with %v, not one of the verifiers' errors", channel, raw, err)
		}
		if channel == paynotify.ChannelWechat {
			// GCM authenticates the transaction, not the envelope around it:
			// the same sealed resource in another envelope proves the same.
			require.Equal(t, []any{"AGT202611290002", "4200002000202611291234567890", int64(5000), "CNY"},
				[]any{m.OutTradeNo, m.TransactionID, *m.AmountFen, m.Currency}, "%q", raw)
			return
		}
		got, perr := url.ParseQuery(strings.TrimSpace(raw))
		require.NoError(t, perr)
		require.True(t, paynotify.AlipaySignedString(got) == signedString && got.Get("sign") == sig, "%q proved, and Alipay's key never signed it", raw)
		require.EqualValues(t, 1500, *m.AmountFen, "%q", raw)
		require.Equal(t, "PRO202611290001", m.OutTradeNo, "%q", raw)
	})
}
