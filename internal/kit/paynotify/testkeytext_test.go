package paynotify_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/eisland/isle/internal/kit/paynotify"
)

// Keys written as text and parsed back sign what the original keys'
// verifiers accept, and carry the same public halves and serial.
func TestPayTestKeysTextRoundTrip(t *testing.T) {
	t.Parallel()
	k := keys(t)
	text, err := k.Text()
	require.NoError(t, err)
	got, err := paynotify.ParseTestKeys(text)
	require.NoError(t, err)

	require.True(t, k.AlipayPrivate.Equal(got.AlipayPrivate))
	require.True(t, k.WechatPrivate.Equal(got.WechatPrivate))
	require.Equal(t, k.AlipayPublicPEM, got.AlipayPublicPEM)
	require.Equal(t, k.WechatPublicPEM, got.WechatPublicPEM)
	require.Equal(t, k.WechatCertPEM, got.WechatCertPEM)
	require.Equal(t, k.WechatSerial, got.WechatSerial)
	require.Equal(t, k.WechatPublicKeyID, got.WechatPublicKeyID)
	require.Equal(t, k.APIv3Key, got.APIv3Key)

	_, err = alipayVerifier(t, k.AlipayConfig(appID, sellerID)).VerifyAlipay(signed(t, alipayForm(), got))
	require.NoError(t, err)
	cb := wechatCallback(t, got, transaction(), got.WechatSerial, time.Now())
	_, err = wechatVerifier(t, k.WechatCertConfig()).VerifyWechat(cb.header, cb.body, time.Now())
	require.NoError(t, err)
}

// A PKCS#1 private key is read too; keys that do not fit together are
// refused, every problem named.
func TestPayParseTestKeysChecksTheKeys(t *testing.T) {
	t.Parallel()
	k, other := keys(t), others(t)
	text, err := k.Text()
	require.NoError(t, err)

	pkcs1 := text
	pkcs1.AlipayPrivatePEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k.AlipayPrivate)}))
	got, err := paynotify.ParseTestKeys(pkcs1)
	require.NoError(t, err)
	require.True(t, k.AlipayPrivate.Equal(got.AlipayPrivate))

	bad := text
	bad.WechatCertPEM = other.WechatCertPEM
	bad.APIv3Key = "short"
	bad.WechatPublicKeyID = "KEY_1"
	_, err = paynotify.ParseTestKeys(bad)
	require.ErrorContains(t, err, "not of the wechat private key")
	require.ErrorContains(t, err, "API v3 key is 5 bytes")
	require.ErrorContains(t, err, "does not start with PUB_KEY_ID_")

	small, err := rsa.GenerateKey(rand.Reader, 1024)
	require.NoError(t, err)
	weak := text
	weak.AlipayPrivatePEM = string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(small)}))
	weak.WechatPrivatePEM = k.WechatCertPEM
	_, err = paynotify.ParseTestKeys(weak)
	require.ErrorContains(t, err, "alipay private key: paynotify: RSA key of 1024 bits")
	require.ErrorContains(t, err, `wechat private key: paynotify: PEM block "CERTIFICATE" is not a private key`)
}

// The platform certificate of test keys says so in its subject, and only
// it: a configuration holding it is known to trust test keys.
func TestPayTestCertificateIsMarked(t *testing.T) {
	t.Parallel()
	k := keys(t)
	block, _ := pem.Decode([]byte(k.WechatCertPEM))
	require.NotNil(t, block)
	cert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	require.True(t, paynotify.IsTestCertificate(cert))
	require.Contains(t, cert.Subject.CommonName, "TEST")
	require.True(t, paynotify.HasTestCertificate(k.WechatCertPEM))

	gateway := selfSigned(t, "Tenpay.com")
	require.False(t, paynotify.HasTestCertificate(gateway))
	require.True(t, paynotify.HasTestCertificate(gateway+k.WechatCertPEM), "one test certificate among others")
	require.False(t, paynotify.HasTestCertificate(""))
	require.False(t, paynotify.HasTestCertificate(k.WechatPublicPEM), "a public key is no certificate")
}

// selfSigned is a certificate of a new key whose subject organization is
// org, as a gateway's platform certificate is.
func selfSigned(t *testing.T, org string) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: org + " platform", Organization: []string{org}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
