package httpapi_test

import (
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/stretchr/testify/require"
)

// corruptBase64 flips one bit of the i-th byte that s, standard base64,
// encodes (i < 0 counts from the end) and encodes the result again: always
// another value, unlike putting a character in a place that may hold it
// already. It fails the test if the result is s.
func corruptBase64(t testing.TB, s string, i int) string {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(s)
	require.NoError(t, err)
	require.NotEmpty(t, raw)
	if i < 0 {
		i += len(raw)
	}
	raw[i] ^= 1
	out := base64.StdEncoding.EncodeToString(raw)
	require.NotEqual(t, s, out, "the corruption changed nothing")
	return out
}

// corruptSignature is a bad signature made out of a good one: its first
// byte changed.
func corruptSignature(t testing.TB, s string) string {
	t.Helper()
	return corruptBase64(t, s, 0)
}

// The corruption changes a value that an edit of one character could
// leave as it was: a signature beginning with "A" stays valid when its
// first character is replaced with "A".
func TestCorruptBase64AlwaysChanges(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"AAAA", "AZwP", "QUFB", "/w==", "AAAAAA==", "////"} {
		require.NotEqual(t, s, corruptBase64(t, s, 0), s)
		require.NotEqual(t, s, corruptBase64(t, s, -1), s)
	}
	require.Equal(t, "AZwP", "A"+"AZwP"[1:], "the old corruption was a no-op here")
}

// A bad signature is bad however the good one it came from begins: a
// corruption that can leave the signature as it was lets a refusal test
// pass a valid callback now and then (1 run in 64 when the first base64
// character is replaced by "A").
func TestWechatBadSignatureIsNeverTheGoodOne(t *testing.T) {
	b := setup(t, options{})
	k := payKeys(t).keys
	o := b.order(t, "cyd", paynotify.ChannelWechat, 3000)
	good := wechatBody(t, o, k.APIv3Key, false)
	stamp := strconv.FormatInt(time.Now().Unix(), 10)
	// A nonce whose signature begins with "A": 1 in 64, so 2000 tries
	// find one but once in 10^13.
	var nonce, sig string
	for range 2000 {
		nonce = paynotify.NewWechatNonce(32)
		s, err := paynotify.SignWechat(good, stamp, nonce, k.WechatPrivate)
		require.NoError(t, err)
		if strings.HasPrefix(s, "A") {
			sig = s
			break
		}
	}
	require.NotEmpty(t, sig, "no signature beginning with A in 2000 tries")

	bad := corruptSignature(t, sig)
	require.NotEqual(t, sig, bad)
	req, err := http.NewRequest(http.MethodPost, b.http.URL+"/v1/payments/notify/wechat", strings.NewReader(string(good)))
	require.NoError(t, err)
	req.Header = paynotify.WechatHeader(stamp, nonce, bad, k.WechatSerial)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	require.Zero(t, b.notified(t), "nothing published")
}
