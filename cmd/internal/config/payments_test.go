package config_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/eisland/isle/cmd/internal/config"
	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/stretchr/testify/require"
)

// platformCert is a self-signed certificate of a new key with subject
// org, as a gateway's platform certificate would be.
func platformCert(t *testing.T, org string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(4242), Subject: pkix.Name{CommonName: org + " platform", Organization: []string{org}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// Test gateway keys (islectl pay keys: PAYMENT_TEST_KEYS in its
// payment.env, and a platform certificate whose subject says so) are
// refused unless ISLE_DEV=1: whoever has them can make the API take a
// payment. They used to be trusted like the gateways' own.
func TestTestGatewayKeysNeedDevMode(t *testing.T) {
	t.Parallel()
	k, err := paynotify.GenerateTestKeys()
	require.NoError(t, err)
	secret := strings.Repeat("k", 32)
	wechat := func(certs string, more map[string]string) map[string]string {
		m := map[string]string{"API_JWT_SECRET": secret, "PAYMENT_WECHAT_API_V3_KEY": k.APIv3Key, "PAYMENT_WECHAT_PLATFORM_CERTS": certs}
		for n, v := range more {
			m[n] = v
		}
		return m
	}
	alipay := map[string]string{"API_JWT_SECRET": secret, "PAYMENT_ALIPAY_PUBLIC_KEY": k.AlipayPublicPEM, "PAYMENT_ALIPAY_APP_ID": "2021000000000000"}

	for name, e := range map[string]map[string]string{
		"PAYMENT_TEST_KEYS=true":        {"API_JWT_SECRET": secret, "PAYMENT_TEST_KEYS": "true"},
		"PAYMENT_TEST_KEYS with Alipay": merge(alipay, map[string]string{"PAYMENT_TEST_KEYS": "true"}),
		"a test platform certificate":   wechat(k.WechatCertPEM, nil),
		"a test certificate among two":  wechat(platformCert(t, "Tenpay.com")+k.WechatCertPEM, nil),
		"the certificate, variable off": wechat(k.WechatCertPEM, map[string]string{"PAYMENT_TEST_KEYS": "false"}),
		"ISLE_DEV=0 is production":      wechat(k.WechatCertPEM, map[string]string{"ISLE_DEV": "0"}),
		"both marks, production mode":   wechat(k.WechatCertPEM, map[string]string{"PAYMENT_TEST_KEYS": "true"}),
		"PAYMENT_TEST_KEYS=1":           wechat(k.WechatCertPEM, map[string]string{"PAYMENT_TEST_KEYS": "1"}),
	} {
		_, err := config.LoadAPI(env(e))
		require.ErrorContains(t, err, "test payment gateway keys", name)
		require.ErrorContains(t, err, "ISLE_DEV=1", name)

		e["ISLE_DEV"] = "1"
		c, err := config.LoadAPI(env(e))
		require.NoError(t, err, "%s with ISLE_DEV=1", name)
		require.True(t, c.Payments.TestKeys, name)
	}

	for name, e := range map[string]map[string]string{
		"a gateway's certificate": wechat(platformCert(t, "Tenpay.com"), nil),
		"an unmarked Alipay key":  alipay,
		"no keys":                 {"API_JWT_SECRET": secret},
	} {
		c, err := config.LoadAPI(env(e))
		require.NoError(t, err, name)
		require.False(t, c.Payments.TestKeys, name)
	}
}

func merge(a, b map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// The worker reads the API's gateway keys, to verify the callback of a
// paid notification without its amount: test keys only with ISLE_DEV=1,
// a bad key refuses to start, and no keys start a worker whose gateways
// say which variables would configure them.
func TestWorkerReadsTheGatewayKeys(t *testing.T) {
	t.Parallel()
	k, err := paynotify.GenerateTestKeys()
	require.NoError(t, err)
	keys := map[string]string{"PAYMENT_ALIPAY_PUBLIC_KEY": k.AlipayPublicPEM, "PAYMENT_ALIPAY_APP_ID": "2021000000000000",
		"PAYMENT_WECHAT_API_V3_KEY": k.APIv3Key, "PAYMENT_WECHAT_PLATFORM_CERTS": k.WechatCertPEM, "PAYMENT_TEST_KEYS": "true"}
	_, err = config.LoadWorker(env(keys))
	require.ErrorContains(t, err, "test payment gateway keys")
	require.ErrorContains(t, err, "ISLE_DEV=1")

	c, err := config.LoadWorker(env(merge(keys, map[string]string{"ISLE_DEV": "1"})))
	require.NoError(t, err)
	require.True(t, c.Payments.TestKeys)
	g, err := c.Payments.Gateways()
	require.NoError(t, err)
	require.NotNil(t, g.Alipay)
	require.NotNil(t, g.Wechat)
	require.Empty(t, g.Missing)

	_, err = config.LoadWorker(env(map[string]string{"PAYMENT_ALIPAY_PUBLIC_KEY": "not a key", "PAYMENT_WECHAT_API_V3_KEY": "short"}))
	require.ErrorContains(t, err, "PAYMENT_ALIPAY_*")
	require.ErrorContains(t, err, "PAYMENT_WECHAT_*", "every bad key at once")

	c, err = config.LoadWorker(env(nil))
	require.NoError(t, err, "a worker without gateway keys starts")
	g, err = c.Payments.Gateways()
	require.NoError(t, err)
	require.Nil(t, g.Alipay)
	require.Nil(t, g.Wechat)
	require.Contains(t, g.Missing[paynotify.ChannelAlipay], "PAYMENT_ALIPAY_PUBLIC_KEY")
	require.Contains(t, g.Missing[paynotify.ChannelWechat], "PAYMENT_WECHAT_API_V3_KEY")

	for _, v := range config.Variables() {
		if v.Name == "PAYMENT_ALIPAY_PUBLIC_KEY" || v.Name == "PAYMENT_WECHAT_API_V3_KEY" || v.Name == "ISLE_DEV" {
			require.Contains(t, v.Binaries, "worker", v.Name)
		}
	}
}
