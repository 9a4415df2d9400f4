package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/stretchr/testify/require"
)

// noEnv is an environment with nothing set.
func noEnv(string) (string, bool) { return "", false }

// islectl runs a command in-process; out is what it printed.
func islectl(t *testing.T, lookupEnv func(string) (string, bool), args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), args, lookupEnv, &out, &out)
	return out.String(), err
}

// newPayKeys runs `pay keys` into a new directory.
func newPayKeys(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "paykeys")
	out, err := islectl(t, noEnv, "pay", "keys", "-dir", dir)
	require.NoError(t, err, out)
	return dir
}

var paymentVars = []string{"PAYMENT_ALIPAY_PUBLIC_KEY", "PAYMENT_ALIPAY_APP_ID", "PAYMENT_WECHAT_API_V3_KEY",
	"PAYMENT_WECHAT_PLATFORM_CERTS", "PAYMENT_WECHAT_MCH_ID", "PAYMENT_TEST_KEYS"}

// sourced is what bash has in vars after sourcing file, with nothing else
// in its environment.
func sourced(t *testing.T, file string, vars ...string) map[string]string {
	t.Helper()
	script := `set -eu; . "$1"; shift; for v in "$@"; do printf '%s\0' "${!v}"; done`
	cmd := exec.Command("bash", append([]string{"-c", script, "bash", file}, vars...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, stderr.String())
	values := strings.Split(string(out), "\x00")
	require.Len(t, values, len(vars)+1)
	got := map[string]string{}
	for i, v := range vars {
		got[v] = values[i]
	}
	return got
}

// apiPayments is the API's payment configuration from env, read by the
// API's own loader in development mode (ISLE_DEV=1), as scripts/up starts
// the API with test keys.
func apiPayments(t *testing.T, env map[string]string) config.Payments {
	t.Helper()
	env["API_JWT_SECRET"] = strings.Repeat("k", 32)
	env["ISLE_DEV"] = "1"
	cfg, err := config.LoadAPI(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	return cfg.Payments
}

func verifiers(t *testing.T, p config.Payments) (*paynotify.AlipayVerifier, *paynotify.WechatVerifier) {
	t.Helper()
	a, err := paynotify.NewAlipayVerifier(paynotify.AlipayConfig{PublicKey: p.AlipayPublicKey, AppID: p.AlipayAppID, SellerID: p.AlipaySellerID})
	require.NoError(t, err)
	w, err := paynotify.NewWechatVerifier(paynotify.WechatConfig{APIv3Key: p.WechatAPIv3Key, PlatformCerts: p.WechatPlatformCerts,
		PublicKey: p.WechatPublicKey, PublicKeyID: p.WechatPublicKeyID, MchID: p.WechatMchID, AppID: p.WechatAppID})
	require.NoError(t, err)
	return a, w
}

func verifyAlipay(t *testing.T, v *paynotify.AlipayVerifier, cb callback) (paynotify.Notice, error) {
	t.Helper()
	form, err := url.ParseQuery(string(cb.Body))
	require.NoError(t, err)
	n, err := v.VerifyAlipay(form)
	return n.Notice(), err
}

func verifyWechat(t *testing.T, v *paynotify.WechatVerifier, cb callback) (paynotify.Notice, error) {
	t.Helper()
	n, err := v.VerifyWechat(cb.Header, cb.Body, time.Now())
	return n.Notice(), err
}

// The keys `pay keys` writes, sourced by bash as scripts/up does and read
// by the API's configuration loader, verify the callbacks `pay simulate`
// builds from the same directory; keys of another directory do not.
func TestPayKeysVerifyTheSimulatedCallbacks(t *testing.T) {
	t.Parallel()
	dir := newPayKeys(t)
	info, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), info.Mode().Perm())
	for _, name := range append(payKeyNames(), payEnvFile) {
		info, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), name)
	}

	k, err := loadPayKeys(dir)
	require.NoError(t, err)
	env := sourced(t, filepath.Join(dir, payEnvFile), paymentVars...)
	require.Equal(t, map[string]string{
		"PAYMENT_ALIPAY_PUBLIC_KEY":     k.AlipayPublicPEM,
		"PAYMENT_ALIPAY_APP_ID":         localAlipayAppID,
		"PAYMENT_WECHAT_API_V3_KEY":     k.APIv3Key,
		"PAYMENT_WECHAT_PLATFORM_CERTS": k.WechatCertPEM,
		"PAYMENT_WECHAT_MCH_ID":         localWechatMchID,
		"PAYMENT_TEST_KEYS":             "true",
	}, env, "bash reads the exact PEMs")
	raw, err := os.ReadFile(filepath.Join(dir, "wechat_platform_cert.pem"))
	require.NoError(t, err)
	require.Equal(t, string(raw), env["PAYMENT_WECHAT_PLATFORM_CERTS"])
	raw, err = os.ReadFile(filepath.Join(dir, payEnvFile))
	require.NoError(t, err)
	parsed, err := parseEnvFile(string(raw))
	require.NoError(t, err)
	require.Equal(t, env, parsed, "islectl reads payment.env as bash does")

	alipay, wechat := verifiers(t, apiPayments(t, env))
	p := payment{OutTradeNo: "20261130200102abcdef0123456789abcd", Subject: "agent-recharge", AmountFen: 5000,
		State: paynotify.AlipayTradeSuccess, OrderedAt: time.Now().Add(-time.Minute)}
	cb, err := alipayCallback(k, p, time.Now())
	require.NoError(t, err)
	n, err := verifyAlipay(t, alipay, cb)
	require.NoError(t, err)
	require.Equal(t, paynotify.Notice{Channel: paynotify.ChannelAlipay, NotifyID: n.NotifyID, OutTradeNo: p.OutTradeNo,
		TransactionID: n.TransactionID, TradeState: paynotify.StateSuccess, ProviderState: paynotify.AlipayTradeSuccess,
		AmountFen: 5000, Currency: paynotify.CurrencyCNY, PaidAt: n.PaidAt, Raw: n.Raw}, n)
	require.Len(t, n.NotifyID, 32)
	require.Len(t, n.TransactionID, 28)
	require.WithinDuration(t, time.Now(), n.PaidAt, 2*time.Second)
	require.True(t, paynotify.AmountMatches(n, 5000))

	p.State = paynotify.WechatTradeSuccess
	cb, err = wechatCallback(k, p, time.Now())
	require.NoError(t, err)
	n, err = verifyWechat(t, wechat, cb)
	require.NoError(t, err)
	require.Equal(t, paynotify.ChannelWechat, n.Channel)
	require.Equal(t, p.OutTradeNo, n.OutTradeNo)
	require.Equal(t, paynotify.StateSuccess, n.TradeState)
	require.Equal(t, int64(5000), n.AmountFen)
	require.Len(t, n.TransactionID, 28)
	require.True(t, paynotify.AmountMatches(n, 5000))

	// A closed trade: recorded by the API, never paid.
	for _, c := range []struct {
		build  func(payKeys, payment, time.Time) (callback, error)
		verify func(*testing.T, callback) (paynotify.Notice, error)
		state  string
	}{
		{alipayCallback, func(t *testing.T, cb callback) (paynotify.Notice, error) {
			t.Helper()
			return verifyAlipay(t, alipay, cb)
		}, paynotify.AlipayTradeClosed},
		{wechatCallback, func(t *testing.T, cb callback) (paynotify.Notice, error) {
			t.Helper()
			return verifyWechat(t, wechat, cb)
		}, "CLOSED"},
	} {
		p.State, p.NotifyID, p.TransactionID = c.state, "replayed-1", "T-1"
		cb, err := c.build(k, p, time.Now())
		require.NoError(t, err)
		n, err := c.verify(t, cb)
		require.ErrorIs(t, err, paynotify.ErrNotPaid, c.state)
		require.Equal(t, paynotify.StateClosed, n.TradeState)
		require.Equal(t, "replayed-1", n.NotifyID, "-notify-id is sent as given")
		require.Equal(t, "T-1", n.TransactionID, "-transaction-id is sent as given")
	}

	// Another directory's keys sign callbacks these verifiers refuse.
	other, err := loadPayKeys(newPayKeys(t))
	require.NoError(t, err)
	p.State, p.NotifyID, p.TransactionID = paynotify.AlipayTradeSuccess, "", ""
	cb, err = alipayCallback(other, p, time.Now())
	require.NoError(t, err)
	_, err = verifyAlipay(t, alipay, cb)
	require.ErrorIs(t, err, paynotify.ErrBadSignature)
	p.State = paynotify.WechatTradeSuccess
	cb, err = wechatCallback(other, p, time.Now())
	require.NoError(t, err)
	_, err = verifyWechat(t, wechat, cb)
	require.ErrorIs(t, err, paynotify.ErrUnknownSerial)
}

// pay keys does not replace keys unless told to.
func TestPayKeysRefuseToOverwrite(t *testing.T) {
	t.Parallel()
	dir := newPayKeys(t)
	before, err := loadPayKeys(dir)
	require.NoError(t, err)
	out, err := islectl(t, noEnv, "pay", "keys", "-dir", dir)
	require.ErrorContains(t, err, "already holds keys")
	require.ErrorContains(t, err, "-force")
	same, err := loadPayKeys(dir)
	require.NoError(t, err)
	require.True(t, before.AlipayPrivate.Equal(same.AlipayPrivate), out)

	require.NoError(t, os.Remove(filepath.Join(dir, payEnvFile)))
	_, err = islectl(t, noEnv, "pay", "keys", "-dir", dir)
	require.ErrorContains(t, err, "alipay_private_key.pem", "any key file counts")

	out, err = islectl(t, noEnv, "pay", "keys", "-dir", dir, "-force")
	require.NoError(t, err, out)
	after, err := loadPayKeys(dir)
	require.NoError(t, err)
	require.False(t, before.AlipayPrivate.Equal(after.AlipayPrivate))
	info, err := os.Stat(filepath.Join(dir, payEnvFile))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	leftovers, err := filepath.Glob(filepath.Join(dir, ".*"))
	require.NoError(t, err)
	require.Empty(t, leftovers, "no temporary files left")
}

// payment.env may be edited: the ids it sets are the ones simulate sends.
func TestPayKeysTakeTheIDsOfTheEnvFile(t *testing.T) {
	t.Parallel()
	dir := newPayKeys(t)
	f, err := os.OpenFile(filepath.Join(dir, payEnvFile), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("export PAYMENT_ALIPAY_APP_ID=2021000000000042 # edited\nPAYMENT_ALIPAY_SELLER_ID='2088000000000001'\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	k, err := loadPayKeys(dir)
	require.NoError(t, err)
	require.Equal(t, "2021000000000042", k.alipayAppID)
	require.Equal(t, "2088000000000001", k.alipaySellerID)
	require.Equal(t, localWechatMchID, k.wechatMchID)
	require.Equal(t, localWechatAppID, k.wechatAppID)

	_, err = loadPayKeys(t.TempDir())
	require.ErrorContains(t, err, "islectl pay keys -dir")
}

// parseEnvFile reads what bash reads, and refuses what it would have to
// expand.
func TestEnvFileIsReadAsBashReadsIt(t *testing.T) {
	t.Parallel()
	values := map[string]string{
		"A": "it's $HOME and `date` \\n \"quoted\"\n",
		"B": "",
		"C": "-----BEGIN X-----\nline\n-----END X-----\n",
		"D": "tab\there # not a comment",
		"E": "'",
	}
	var b strings.Builder
	b.WriteString("# a comment\n\n")
	names := []string{"A", "B", "C", "D", "E"}
	for _, n := range names {
		b.WriteString("export " + n + "=" + shellQuote(values[n]) + "\n")
	}
	b.WriteString("F=plain\\ word#kept # comment\n  export\tG=a'b'\\'c\n")
	values["F"], values["G"] = "plain word#kept", "ab'c"
	names = append(names, "F", "G")

	file := filepath.Join(t.TempDir(), "x.env")
	require.NoError(t, os.WriteFile(file, []byte(b.String()), 0o600))
	require.Equal(t, values, sourced(t, file, names...))
	got, err := parseEnvFile(b.String())
	require.NoError(t, err)
	require.Equal(t, values, got)

	for text, want := range map[string]string{
		"A=$HOME\n":       `line 1: A: '$' is not supported`,
		"\nA=\"x\"\n":     `line 2: A: '"' is not supported`,
		"A='open\n":       "line 1: A: unterminated single quote",
		"A=x y\n":         "line 1: A: text after the value",
		"just words\n":    "line 1: want NAME=VALUE",
		"1A=x\n":          "line 1: want NAME=VALUE",
		"A=x\nB=`date`\n": "line 2: B: '`' is not supported",
	} {
		_, err := parseEnvFile(text)
		require.ErrorContains(t, err, want, text)
	}
}

// Whatever a value holds, shellQuote writes it so parseEnvFile reads it
// back.
func FuzzEnvFileQuoting(f *testing.F) {
	f.Add("-----BEGIN PUBLIC KEY-----\nabc\n-----END PUBLIC KEY-----\n", "x'y")
	f.Add("", "'''")
	f.Fuzz(func(t *testing.T, a, b string) {
		text := "export A=" + shellQuote(a) + "\n# c\nB=" + shellQuote(b)
		got, err := parseEnvFile(text)
		require.NoError(t, err)
		require.Equal(t, map[string]string{"A": a, "B": b}, got)
	})
}

// What `pay keys` writes says it is test keys twice: PAYMENT_TEST_KEYS in
// payment.env, and the platform certificate's subject. The API refuses
// either unless ISLE_DEV=1, which scripts/up sets only for keys it made.
func TestPayKeysAreMarkedAsTestKeys(t *testing.T) {
	t.Parallel()
	dir := newPayKeys(t)
	env := sourced(t, filepath.Join(dir, payEnvFile), paymentVars...)
	require.Equal(t, "true", env["PAYMENT_TEST_KEYS"])
	k, err := loadPayKeys(dir)
	require.NoError(t, err)
	require.True(t, paynotify.HasTestCertificate(k.WechatCertPEM))

	env["API_JWT_SECRET"] = strings.Repeat("k", 32)
	_, err = config.LoadAPI(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.ErrorContains(t, err, "ISLE_DEV=1")
	delete(env, "PAYMENT_TEST_KEYS")
	_, err = config.LoadAPI(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.ErrorContains(t, err, "ISLE_DEV=1", "the certificate alone tells them")
	require.True(t, apiPayments(t, env).TestKeys, "with ISLE_DEV=1")
}
