package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/eisland/isle/internal/kit/paynotify"
)

// The key directory of `islectl pay keys`: local TEST gateway keys, one
// file each (0600, in a 0700 directory), and payment.env, the PAYMENT_*
// variables that make the API trust them. Anyone who holds the directory
// can sign callbacks the API takes for payments: never configure these
// keys in production. They say what they are (PAYMENT_TEST_KEYS, and the
// platform certificate's subject), and the API refuses them unless
// ISLE_DEV=1.
const (
	payKeysDirDefault = "var/paykeys"
	payEnvFile        = "payment.env"

	// The fixed local identities payment.env configures: the app id Alipay
	// callbacks must carry and WeChat Pay's merchant id.
	localAlipayAppID = "2021000000000000"
	localWechatMchID = "1900000000"
	// localWechatAppID is the appid of a simulated WeChat Pay transaction
	// when payment.env configures none.
	localWechatAppID = "wx0000000000000000"
)

// payKeyFiles are the files of the key directory but payment.env, in the
// order they are written.
var payKeyFiles = []struct {
	name string
	text func(*paynotify.TestKeyText) *string
}{
	{"alipay_private_key.pem", func(t *paynotify.TestKeyText) *string { return &t.AlipayPrivatePEM }},
	{"wechat_private_key.pem", func(t *paynotify.TestKeyText) *string { return &t.WechatPrivatePEM }},
	{"wechat_platform_cert.pem", func(t *paynotify.TestKeyText) *string { return &t.WechatCertPEM }},
	{"wechat_public_key_id", func(t *paynotify.TestKeyText) *string { return &t.WechatPublicKeyID }},
	{"wechat_api_v3_key", func(t *paynotify.TestKeyText) *string { return &t.APIv3Key }},
}

// payKeysPresent names the files of a key directory that exist in dir.
func payKeysPresent(dir string) ([]string, error) {
	var found []string
	for _, name := range append(payKeyNames(), payEnvFile) {
		_, err := os.Lstat(filepath.Join(dir, name))
		switch {
		case err == nil:
			found = append(found, name)
		case !errors.Is(err, fs.ErrNotExist):
			return nil, err
		}
	}
	return found, nil
}

func payKeyNames() []string {
	names := make([]string, 0, len(payKeyFiles))
	for _, f := range payKeyFiles {
		names = append(names, f.name)
	}
	return names
}

// writePayKeys writes k and its payment.env into dir, made 0700 if
// missing. Each file is written whole, 0600, and renamed into place.
func writePayKeys(dir string, k paynotify.TestKeys) error {
	text, err := k.Text()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, f := range payKeyFiles {
		if err := writePrivate(filepath.Join(dir, f.name), []byte(*f.text(&text))); err != nil {
			return err
		}
	}
	return writePrivate(filepath.Join(dir, payEnvFile), paymentEnv(k, dir))
}

// writePrivate replaces path with data, readable by this user only.
func writePrivate(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*") // mode 0600
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err = cmp.Or(err, f.Chmod(0o600), f.Close()); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return os.Rename(f.Name(), path)
}

// paymentEnv is payment.env: the variables that make the API trust k
// (doc/config.md), each an export a POSIX shell can source, and
// PAYMENT_TEST_KEYS, which marks them as test keys: the API refuses them
// unless ISLE_DEV=1. A value is single-quoted, so a PEM keeps its lines
// and nothing in it is expanded.
func paymentEnv(k paynotify.TestKeys, dir string) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `# Local TEST payment gateway keys, made by islectl pay keys: the API trusts
# the callbacks islectl pay simulate signs with the private keys beside this
# file. Never use them in production: PAYMENT_TEST_KEYS says what they are,
# and the API refuses them unless ISLE_DEV=1 (scripts/up sets it when it
# loads them). Load them with: . %s
`, filepath.Join(dir, payEnvFile))
	for _, v := range []struct{ name, value string }{
		{"PAYMENT_ALIPAY_PUBLIC_KEY", k.AlipayPublicPEM},
		{"PAYMENT_ALIPAY_APP_ID", localAlipayAppID},
		{"PAYMENT_WECHAT_API_V3_KEY", k.APIv3Key},
		{"PAYMENT_WECHAT_PLATFORM_CERTS", k.WechatCertPEM},
		{"PAYMENT_WECHAT_MCH_ID", localWechatMchID},
		{"PAYMENT_TEST_KEYS", "true"},
	} {
		fmt.Fprintf(&b, "export %s=%s\n", v.name, shellQuote(v.value))
	}
	return b.Bytes()
}

// shellQuote quotes s for a POSIX shell: in single quotes, where a quote
// of s ends them, is escaped with a backslash and opens them again.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// payKeys are the keys of a key directory and who the callbacks are for,
// as its payment.env configures the API.
type payKeys struct {
	paynotify.TestKeys
	alipayAppID    string
	alipaySellerID string // "" unless payment.env sets PAYMENT_ALIPAY_SELLER_ID
	wechatMchID    string
	wechatAppID    string
}

// loadPayKeys reads a key directory written by writePayKeys. The app and
// merchant ids come from payment.env, which may have been edited; the
// local ones stand in for those it does not set.
func loadPayKeys(dir string) (payKeys, error) {
	var text paynotify.TestKeyText
	for _, f := range payKeyFiles {
		raw, err := os.ReadFile(filepath.Join(dir, f.name))
		if errors.Is(err, fs.ErrNotExist) {
			return payKeys{}, fmt.Errorf("no test keys in %s (%w): make them with islectl pay keys -dir %s", dir, err, dir)
		}
		if err != nil {
			return payKeys{}, err
		}
		*f.text(&text) = string(raw)
	}
	k, err := paynotify.ParseTestKeys(text)
	if err != nil {
		return payKeys{}, fmt.Errorf("test keys in %s: %w", dir, err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, payEnvFile))
	if err != nil {
		return payKeys{}, err
	}
	vars, err := parseEnvFile(string(raw))
	if err != nil {
		return payKeys{}, fmt.Errorf("%s: %w", filepath.Join(dir, payEnvFile), err)
	}
	return payKeys{
		TestKeys:       k,
		alipayAppID:    cmp.Or(vars["PAYMENT_ALIPAY_APP_ID"], localAlipayAppID),
		alipaySellerID: vars["PAYMENT_ALIPAY_SELLER_ID"],
		wechatMchID:    cmp.Or(vars["PAYMENT_WECHAT_MCH_ID"], localWechatMchID),
		wechatAppID:    cmp.Or(vars["PAYMENT_WECHAT_APP_ID"], localWechatAppID),
	}, nil
}
