package paynotify

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"slices"
	"time"
)

// TestKeys are locally generated gateway keys, for tests and
// `islectl pay simulate`: the private halves sign callbacks the way the
// gateways do, the public halves configure the verifiers. Never configure
// them in production.
type TestKeys struct {
	AlipayPrivate   *rsa.PrivateKey
	AlipayPublicPEM string // PKIX "PUBLIC KEY"

	WechatPrivate     *rsa.PrivateKey
	WechatCertPEM     string // self-signed platform certificate of WechatPrivate's key
	WechatSerial      string // its serial, upper-case hex, as Wechatpay-Serial carries it
	WechatPublicPEM   string // the same key, PKIX, for public-key mode
	WechatPublicKeyID string // PUB_KEY_ID_...

	APIv3Key string // 32 characters
}

// TestCertOrganization is the subject organization of the platform
// certificates GenerateTestKeys makes: IsTestCertificate tells them by it,
// so that an API configured with one knows it trusts test keys.
const TestCertOrganization = "Isle test"

// testCertName is the subject common name of a test platform certificate,
// for whoever reads it with openssl.
const testCertName = "Isle TEST WeChat Pay platform: never in production"

// IsTestCertificate reports whether c is a test platform certificate: its
// subject's organization is TestCertOrganization.
func IsTestCertificate(c *x509.Certificate) bool {
	return slices.Contains(c.Subject.Organization, TestCertOrganization)
}

// HasTestCertificate reports whether the PEM text (the platform
// certificates a WeChat Pay verifier is configured with) holds a test
// platform certificate. Blocks that do not parse are skipped: the
// verifier's configuration refuses them.
func HasTestCertificate(text string) bool {
	rest := []byte(text)
	for {
		var block *pem.Block
		if block, rest = pem.Decode(rest); block == nil {
			return false
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(block.Bytes); err == nil && IsTestCertificate(c) {
			return true
		}
	}
}

// GenerateTestKeys makes two 2048-bit RSA keys, a platform certificate valid
// from an hour ago for ten years whose subject marks it as a test one
// (IsTestCertificate), a public key id and an API v3 key.
func GenerateTestKeys() (TestKeys, error) {
	alipay, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return TestKeys{}, fmt.Errorf("paynotify: alipay test key: %w", err)
	}
	wechat, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return TestKeys{}, fmt.Errorf("paynotify: wechat test key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 159))
	if err != nil {
		return TestKeys{}, err
	}
	serial.SetBit(serial, 158, 1) // 40 hex digits, like WeChat's serials
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: testCertName, Organization: []string{TestCertOrganization}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.AddDate(10, 0, 0),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	certDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &wechat.PublicKey, wechat)
	if err != nil {
		return TestKeys{}, fmt.Errorf("paynotify: wechat test certificate: %w", err)
	}
	alipayPub, err := pkixPEM(&alipay.PublicKey)
	if err != nil {
		return TestKeys{}, err
	}
	wechatPub, err := pkixPEM(&wechat.PublicKey)
	if err != nil {
		return TestKeys{}, err
	}
	return TestKeys{
		AlipayPrivate:     alipay,
		AlipayPublicPEM:   alipayPub,
		WechatPrivate:     wechat,
		WechatCertPEM:     string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER})),
		WechatSerial:      fmt.Sprintf("%X", serial),
		WechatPublicPEM:   wechatPub,
		WechatPublicKeyID: PublicKeyIDPrefix + randomText(24),
		APIv3Key:          randomText(APIv3KeyLen),
	}, nil
}

func pkixPEM(pub *rsa.PublicKey) (string, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", fmt.Errorf("paynotify: marshal public key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})), nil
}

// randomText is n random letters and digits, like WeChat's keys and nonces.
func randomText(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	out := make([]byte, 0, n)
	buf := make([]byte, 2*n)
	for len(out) < n {
		rand.Read(buf) // never fails (crypto/rand, Go 1.24+)
		for _, c := range buf {
			if int(c) < 4*len(alphabet) && len(out) < n { // 248: no modulo bias
				out = append(out, alphabet[int(c)%len(alphabet)])
			}
		}
	}
	return string(out)
}

// AlipayConfig configures a verifier that accepts what k signs.
func (k TestKeys) AlipayConfig(appID, sellerID string) AlipayConfig {
	return AlipayConfig{PublicKey: k.AlipayPublicPEM, AppID: appID, SellerID: sellerID}
}

// WechatCertConfig configures a certificate-mode verifier for k.
func (k TestKeys) WechatCertConfig() WechatConfig {
	return WechatConfig{APIv3Key: k.APIv3Key, PlatformCerts: k.WechatCertPEM}
}

// WechatPublicKeyConfig configures a public-key-mode verifier for k.
func (k TestKeys) WechatPublicKeyConfig() WechatConfig {
	return WechatConfig{APIv3Key: k.APIv3Key, PublicKey: k.WechatPublicPEM, PublicKeyID: k.WechatPublicKeyID}
}

// SignAlipay is Alipay's RSA2 signature of form: base64 SHA256withRSA over
// AlipaySignedString(form). The caller sets it as sign, with sign_type RSA2.
func SignAlipay(form url.Values, priv *rsa.PrivateKey) (string, error) {
	return signBase64([]byte(AlipaySignedString(form)), priv)
}

// SignWechat is WeChat Pay's Wechatpay-Signature of a notification: base64
// SHA256withRSA over WechatSignedMessage(ts, nonce, body).
func SignWechat(body []byte, ts, nonce string, priv *rsa.PrivateKey) (string, error) {
	return signBase64(WechatSignedMessage(ts, nonce, body), priv)
}

func signBase64(msg []byte, priv *rsa.PrivateKey) (string, error) {
	digest := sha256.Sum256(msg)
	sig, err := rsa.SignPKCS1v15(nil, priv, crypto.SHA256, digest[:])
	if err != nil {
		return "", fmt.Errorf("paynotify: sign: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// WechatHeader is the notification headers for a signature made with
// SignWechat.
func WechatHeader(ts, nonce, signature, serial string) http.Header {
	h := http.Header{}
	h.Set(HeaderTimestamp, ts)
	h.Set(HeaderNonce, nonce)
	h.Set(HeaderSignature, signature)
	h.Set(HeaderSerial, serial)
	return h
}

// EncryptWechatResource seals plaintext as a notification's
// resource.ciphertext: AES-256-GCM with the API v3 key, the 12-byte nonce
// and aad as associated data, base64 of ciphertext and tag.
func EncryptWechatResource(plaintext []byte, apiV3Key, nonce, aad string) (string, error) {
	if len(apiV3Key) != APIv3KeyLen {
		return "", fmt.Errorf("paynotify: API v3 key is %d bytes, want %d", len(apiV3Key), APIv3KeyLen)
	}
	gcm, err := newGCM([]byte(apiV3Key))
	if err != nil {
		return "", err
	}
	if len(nonce) != gcm.NonceSize() {
		return "", fmt.Errorf("paynotify: nonce of %d bytes, want %d", len(nonce), gcm.NonceSize())
	}
	return base64.StdEncoding.EncodeToString(gcm.Seal(nil, []byte(nonce), plaintext, []byte(aad))), nil
}

// NewWechatNonce is a random 12-character resource nonce or 32-character
// header nonce, as WeChat Pay makes them.
func NewWechatNonce(n int) string { return randomText(n) }
