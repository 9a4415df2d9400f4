package paynotify_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/topology"
)

const mchID = "1900000109"

// transaction is the decrypted resource of a paid WeChat Pay notification.
func transaction() map[string]any {
	return map[string]any{
		"appid":            "wxd678efh567hg6787",
		"mchid":            mchID,
		"out_trade_no":     "AGT202611290002",
		"transaction_id":   "4200002000202611291234567890",
		"trade_type":       "NATIVE",
		"trade_state":      "SUCCESS",
		"trade_state_desc": "支付成功",
		"bank_type":        "OTHERS",
		"attach":           "",
		"success_time":     "2026-11-29T20:01:02+08:00",
		"payer":            map[string]any{"openid": "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"},
		"amount":           map[string]any{"total": 5000, "payer_total": 5000, "currency": "CNY", "payer_currency": "CNY"},
	}
}

// callback is one notification: its body and the headers that go with it.
type callback struct {
	header http.Header
	body   []byte
}

// wechatCallback encrypts tx with k's API v3 key and signs the body with k's
// platform key for serial at ts, as WeChat Pay does.
func wechatCallback(t *testing.T, k paynotify.TestKeys, tx map[string]any, serial string, ts time.Time) callback {
	t.Helper()
	plain, err := json.Marshal(tx)
	require.NoError(t, err)
	nonce := paynotify.NewWechatNonce(12)
	ct, err := paynotify.EncryptWechatResource(plain, k.APIv3Key, nonce, "transaction")
	require.NoError(t, err)
	body := []byte(`{"id":"EV-2018022511223320873","create_time":"2026-11-29T20:01:05+08:00",` +
		`"resource_type":"encrypt-resource","event_type":"TRANSACTION.SUCCESS","summary":"支付成功",` +
		`"resource":{"original_type":"transaction","algorithm":"AEAD_AES_256_GCM","ciphertext":"` + ct +
		`","associated_data":"transaction","nonce":"` + nonce + `"}}`)
	return signCallback(t, k, body, serial, ts)
}

func signCallback(t *testing.T, k paynotify.TestKeys, body []byte, serial string, ts time.Time) callback {
	t.Helper()
	stamp := strconv.FormatInt(ts.Unix(), 10)
	nonce := paynotify.NewWechatNonce(32)
	sig, err := paynotify.SignWechat(body, stamp, nonce, k.WechatPrivate)
	require.NoError(t, err)
	return callback{header: paynotify.WechatHeader(stamp, nonce, sig, serial), body: body}
}

func wechatVerifier(t *testing.T, cfg paynotify.WechatConfig) *paynotify.WechatVerifier {
	t.Helper()
	v, err := paynotify.NewWechatVerifier(cfg)
	require.NoError(t, err)
	return v
}

func TestPayWechatValidNoticeIsAcceptedAndDecrypted(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	cfg := k.WechatCertConfig()
	cfg.MchID = mchID
	cb := wechatCallback(t, k, transaction(), k.WechatSerial, now)

	n, err := wechatVerifier(t, cfg).VerifyWechat(cb.header, cb.body, now)
	require.NoError(t, err)
	require.Equal(t, "EV-2018022511223320873", n.ID)
	require.Equal(t, "TRANSACTION.SUCCESS", n.EventType)
	tx := n.Transaction
	require.Equal(t, "AGT202611290002", tx.OutTradeNo)
	require.Equal(t, "4200002000202611291234567890", tx.TransactionID)
	require.Equal(t, "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o", tx.Payer.OpenID)
	require.Equal(t, paynotify.WechatAmount{Total: 5000, PayerTotal: 5000, Currency: "CNY", PayerCurrency: "CNY"}, tx.Amount)
	paidAt := time.Date(2026, 11, 29, 12, 1, 2, 0, time.UTC)
	require.True(t, tx.PaidAt.Equal(paidAt), tx.PaidAt)

	c := n.Notice()
	require.Equal(t, paynotify.Notice{
		Channel:       paynotify.ChannelWechat,
		NotifyID:      "EV-2018022511223320873",
		OutTradeNo:    "AGT202611290002",
		TransactionID: "4200002000202611291234567890",
		TradeState:    paynotify.StateSuccess,
		ProviderState: "SUCCESS",
		AmountFen:     5000,
		Currency:      "CNY",
		PaidAt:        tx.PaidAt,
		Raw:           string(cb.body),
	}, c)
	require.True(t, paynotify.AmountMatches(c, 5000))
	require.False(t, paynotify.AmountMatches(c, 4999))

	m := c.Message()
	require.NoError(t, m.Validate())
	require.Equal(t, topology.PaymentNotify{
		NotifyID: c.NotifyID, Channel: "WECHAT", OutTradeNo: c.OutTradeNo, TransactionID: c.TransactionID,
		TradeState: "SUCCESS", SuccessTime: topology.OffsetDateTime{Time: tx.PaidAt}, VerifyOK: true, RawBody: string(cb.body),
		AmountFen: ptr(int64(5000)), Currency: "CNY",
	}, m)
}

func TestPayWechatPublicKeyModeIsAccepted(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	cb := wechatCallback(t, k, transaction(), k.WechatPublicKeyID, now)

	n, err := wechatVerifier(t, k.WechatPublicKeyConfig()).VerifyWechat(cb.header, cb.body, now)
	require.NoError(t, err)
	require.Equal(t, "AGT202611290002", n.Transaction.OutTradeNo)
}

func TestPayWechatSerialIsCaseInsensitive(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	cb := wechatCallback(t, k, transaction(), "00"+strings.ToLower(k.WechatSerial), now)

	_, err := wechatVerifier(t, k.WechatCertConfig()).VerifyWechat(cb.header, cb.body, now)
	require.NoError(t, err)
}

func TestPayWechatBadSignatureIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	v := wechatVerifier(t, k.WechatCertConfig())

	// Signed by another key under our serial.
	forged := wechatCallback(t, others(t), transaction(), k.WechatSerial, now)
	n, err := v.VerifyWechat(forged.header, forged.body, now)
	require.ErrorIs(t, err, paynotify.ErrBadSignature)
	require.NotErrorIs(t, err, paynotify.ErrProbe)
	require.Zero(t, n)

	// A header changed after signing.
	cb := wechatCallback(t, k, transaction(), k.WechatSerial, now)
	cb.header.Set(paynotify.HeaderNonce, paynotify.NewWechatNonce(32))
	_, err = v.VerifyWechat(cb.header, cb.body, now)
	require.ErrorIs(t, err, paynotify.ErrBadSignature)

	// Not base64.
	cb = wechatCallback(t, k, transaction(), k.WechatSerial, now)
	cb.header.Set(paynotify.HeaderSignature, "not*base64")
	_, err = v.VerifyWechat(cb.header, cb.body, now)
	require.ErrorIs(t, err, paynotify.ErrBadSignature)
}

func TestPayWechatUnknownSerialIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	v := wechatVerifier(t, k.WechatCertConfig())
	for _, serial := range []string{others(t).WechatSerial, "not-hex"} {
		cb := wechatCallback(t, k, transaction(), serial, now)
		_, err := v.VerifyWechat(cb.header, cb.body, now)
		require.ErrorIs(t, err, paynotify.ErrUnknownSerial, serial)
		require.NotErrorIs(t, err, paynotify.ErrSerialMode, serial)
	}

	cb := wechatCallback(t, k, transaction(), others(t).WechatPublicKeyID, now)
	_, err := wechatVerifier(t, k.WechatPublicKeyConfig()).VerifyWechat(cb.header, cb.body, now)
	require.ErrorIs(t, err, paynotify.ErrUnknownSerial)
	require.NotErrorIs(t, err, paynotify.ErrSerialMode)
}

func TestPayWechatCertificateSerialInPublicKeyModeIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	// Same key, signed correctly: only the mode is wrong.
	cb := wechatCallback(t, k, transaction(), k.WechatSerial, now)

	_, err := wechatVerifier(t, k.WechatPublicKeyConfig()).VerifyWechat(cb.header, cb.body, now)
	require.ErrorIs(t, err, paynotify.ErrSerialMode)
	require.ErrorIs(t, err, paynotify.ErrUnknownSerial)
}

func TestPayWechatPublicKeyIDInCertificateModeIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	cb := wechatCallback(t, k, transaction(), k.WechatPublicKeyID, now)

	_, err := wechatVerifier(t, k.WechatCertConfig()).VerifyWechat(cb.header, cb.body, now)
	require.ErrorIs(t, err, paynotify.ErrSerialMode)
}

func TestPayWechatExpiredCertificateIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	later := time.Now().AddDate(11, 0, 0) // the test certificate is valid ten years
	cb := wechatCallback(t, k, transaction(), k.WechatSerial, later)

	_, err := wechatVerifier(t, k.WechatCertConfig()).VerifyWechat(cb.header, cb.body, later)
	require.ErrorIs(t, err, paynotify.ErrUnknownSerial)
	require.ErrorContains(t, err, "is valid")
}

func TestPayWechatProbeSignatureIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	cb := wechatCallback(t, k, transaction(), k.WechatSerial, now)
	cb.header.Set(paynotify.HeaderSignature, "WECHATPAY/SIGNTEST/"+base64.StdEncoding.EncodeToString([]byte("probe")))

	n, err := wechatVerifier(t, k.WechatCertConfig()).VerifyWechat(cb.header, cb.body, now)
	require.ErrorIs(t, err, paynotify.ErrProbe)
	require.ErrorIs(t, err, paynotify.ErrBadSignature, "answered like a bad signature")
	require.Zero(t, n)
}

func TestPayWechatTimestampWindow(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	v := wechatVerifier(t, k.WechatCertConfig())
	for _, tc := range []struct {
		name   string
		offset time.Duration
		want   error
	}{
		{"6 minutes old", -6 * time.Minute, paynotify.ErrStale},
		{"6 minutes ahead", 6 * time.Minute, paynotify.ErrStale},
		{"5 minutes 1 second old", -5*time.Minute - time.Second, paynotify.ErrStale},
		{"4 minutes old", -4 * time.Minute, nil},
		{"4 minutes ahead", 4 * time.Minute, nil},
		{"exactly 5 minutes old", -5 * time.Minute, nil},
	} {
		cb := wechatCallback(t, k, transaction(), k.WechatSerial, now.Add(tc.offset))
		_, err := v.VerifyWechat(cb.header, cb.body, now.Truncate(time.Second))
		if tc.want == nil {
			require.NoError(t, err, tc.name)
		} else {
			require.ErrorIs(t, err, tc.want, tc.name)
		}
	}
}

func TestPayWechatBadGCMTagIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	cb := wechatCallback(t, k, transaction(), k.WechatSerial, now)

	// Flip a bit of the tag and sign the altered body properly, so that
	// only the decryption can notice.
	var env map[string]any
	require.NoError(t, json.Unmarshal(cb.body, &env))
	res := env["resource"].(map[string]any)
	ct, err := base64.StdEncoding.DecodeString(res["ciphertext"].(string))
	require.NoError(t, err)
	ct[len(ct)-1] ^= 1
	res["ciphertext"] = base64.StdEncoding.EncodeToString(ct)
	body, err := json.Marshal(env)
	require.NoError(t, err)
	cb = signCallback(t, k, body, k.WechatSerial, now)

	n, err := wechatVerifier(t, k.WechatCertConfig()).VerifyWechat(cb.header, cb.body, now)
	require.ErrorIs(t, err, paynotify.ErrDecrypt)
	require.Zero(t, n)
}

func TestPayWechatOtherAPIv3KeyCannotDecrypt(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	cb := wechatCallback(t, k, transaction(), k.WechatSerial, now)
	cfg := k.WechatCertConfig()
	cfg.APIv3Key = others(t).APIv3Key

	_, err := wechatVerifier(t, cfg).VerifyWechat(cb.header, cb.body, now)
	require.ErrorIs(t, err, paynotify.ErrDecrypt)
}

func TestPayWechatReserialisedBodyIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	cb := wechatCallback(t, k, transaction(), k.WechatSerial, now)

	// What a framework that decodes and re-encodes the body hands on: the
	// same JSON content, other bytes (sorted keys, and indented).
	var content any
	require.NoError(t, json.Unmarshal(cb.body, &content))
	for _, re := range [][]byte{mustMarshal(t, content), mustIndent(t, content)} {
		require.NotEqual(t, cb.body, re)
		require.JSONEq(t, string(cb.body), string(re))
		_, err := wechatVerifier(t, k.WechatCertConfig()).VerifyWechat(cb.header, re, now)
		require.ErrorIs(t, err, paynotify.ErrBadSignature)
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func mustIndent(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	require.NoError(t, err)
	return b
}

func TestPayWechatNotPaid(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	v := wechatVerifier(t, k.WechatCertConfig())
	for _, state := range []string{"NOTPAY", "CLOSED", "REFUND", "PAYERROR"} {
		tx := transaction()
		tx["trade_state"] = state
		delete(tx, "success_time")
		cb := wechatCallback(t, k, tx, k.WechatSerial, now)

		n, err := v.VerifyWechat(cb.header, cb.body, now)
		require.ErrorIs(t, err, paynotify.ErrNotPaid, state)
		require.Equal(t, state, n.Transaction.TradeState, "the notice comes with the error")
		c := n.Notice()
		require.Equal(t, state, c.TradeState)
		require.False(t, c.Paid())
		require.NoError(t, c.Message().Validate())
	}
}

func TestPayWechatWrongMerchantOrAppIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	cb := wechatCallback(t, k, transaction(), k.WechatSerial, now)

	cfg := k.WechatCertConfig()
	cfg.MchID = "1900000999"
	_, err := wechatVerifier(t, cfg).VerifyWechat(cb.header, cb.body, now)
	require.ErrorIs(t, err, paynotify.ErrWrongMerchant)

	cfg = k.WechatCertConfig()
	cfg.AppID = "wx0000000000000000"
	_, err = wechatVerifier(t, cfg).VerifyWechat(cb.header, cb.body, now)
	require.ErrorIs(t, err, paynotify.ErrWrongApp)
}

func TestPayWechatMissingHeaderIsMalformed(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	v := wechatVerifier(t, k.WechatCertConfig())
	for _, h := range []string{paynotify.HeaderTimestamp, paynotify.HeaderNonce, paynotify.HeaderSignature, paynotify.HeaderSerial} {
		cb := wechatCallback(t, k, transaction(), k.WechatSerial, now)
		cb.header.Del(h)
		_, err := v.VerifyWechat(cb.header, cb.body, now)
		require.ErrorIs(t, err, paynotify.ErrMalformed, h)
		require.ErrorContains(t, err, h)
	}
	cb := wechatCallback(t, k, transaction(), k.WechatSerial, now)
	cb.header.Set(paynotify.HeaderTimestamp, "-"+cb.header.Get(paynotify.HeaderTimestamp))
	_, err := v.VerifyWechat(cb.header, cb.body, now)
	require.ErrorIs(t, err, paynotify.ErrMalformed)
}

func TestPayWechatMalformedTransactionIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	v := wechatVerifier(t, k.WechatCertConfig())
	for field, value := range map[string]any{
		"transaction_id": "",
		"success_time":   "yesterday",
		"amount":         map[string]any{"total": 50.5, "currency": "CNY"},
		"out_trade_no":   "",
	} {
		tx := transaction()
		tx[field] = value
		cb := wechatCallback(t, k, tx, k.WechatSerial, now)
		_, err := v.VerifyWechat(cb.header, cb.body, now)
		require.ErrorIs(t, err, paynotify.ErrMalformed, field)
	}
}

func TestPayWechatBodyLargerThanTheLimitIsRefused(t *testing.T) {
	t.Parallel()
	k := keys(t)
	now := time.Now()
	body := append([]byte(`{"id":"x","pad":"`), bytes.Repeat([]byte("a"), paynotify.MaxBodyBytes)...)
	body = append(body, `"}`...)
	cb := signCallback(t, k, body, k.WechatSerial, now)

	_, err := wechatVerifier(t, k.WechatCertConfig()).VerifyWechat(cb.header, cb.body, now)
	require.ErrorIs(t, err, paynotify.ErrTooLarge)
}

func TestPayWechatConfigIsChecked(t *testing.T) {
	t.Parallel()
	k := keys(t)
	both := k.WechatCertConfig()
	both.PublicKey, both.PublicKeyID = k.WechatPublicPEM, k.WechatPublicKeyID
	_, err := paynotify.NewWechatVerifier(both)
	require.ErrorContains(t, err, "not both")

	_, err = paynotify.NewWechatVerifier(paynotify.WechatConfig{APIv3Key: "short", PublicKey: k.WechatPublicPEM, PublicKeyID: "KEY1"})
	require.ErrorContains(t, err, "want 32")
	require.ErrorContains(t, err, "does not start PUB_KEY_ID_", "every problem at once")

	_, err = paynotify.NewWechatVerifier(paynotify.WechatConfig{APIv3Key: k.APIv3Key})
	require.ErrorContains(t, err, "no platform certificate")

	_, err = paynotify.NewWechatVerifier(paynotify.WechatConfig{APIv3Key: k.APIv3Key, PlatformCerts: k.WechatPublicPEM})
	require.ErrorContains(t, err, `PEM block "PUBLIC KEY"`)
}

func FuzzPayVerifyWechat(f *testing.F) {
	k, err := testKeys()
	if err != nil {
		f.Fatal(err)
	}
	v, err := paynotify.NewWechatVerifier(k.WechatCertConfig())
	if err != nil {
		f.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	f.Add("1800000000", "nonce", "c2ln", k.WechatSerial, []byte(`{"id":"1"}`))
	f.Add("1800000100", "n", "WECHATPAY/SIGNTEST/abc", "PUB_KEY_ID_1", []byte(`{}`))
	f.Fuzz(func(t *testing.T, ts, nonce, sig, serial string, body []byte) {
		n, err := v.VerifyWechat(paynotify.WechatHeader(ts, nonce, sig, serial), body, now)
		require.Error(t, err, "nothing unsigned verifies")
		require.Zero(t, n)
	})
}
