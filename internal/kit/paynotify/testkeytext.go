package paynotify

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// TestKeyText is TestKeys as text, to keep them in files (`islectl pay
// keys`) and read them back with ParseTestKeys. The public halves and the
// certificate's serial are derived from it, not kept.
type TestKeyText struct {
	AlipayPrivatePEM  string // PKCS#8 "PRIVATE KEY"
	WechatPrivatePEM  string // PKCS#8 "PRIVATE KEY"
	WechatCertPEM     string // the platform certificate of WechatPrivatePEM's key
	WechatPublicKeyID string // PUB_KEY_ID_...
	APIv3Key          string
}

// Text is k as text, for ParseTestKeys.
func (k TestKeys) Text() (TestKeyText, error) {
	alipay, err := privatePEM(k.AlipayPrivate)
	if err != nil {
		return TestKeyText{}, err
	}
	wechat, err := privatePEM(k.WechatPrivate)
	if err != nil {
		return TestKeyText{}, err
	}
	return TestKeyText{AlipayPrivatePEM: alipay, WechatPrivatePEM: wechat, WechatCertPEM: k.WechatCertPEM,
		WechatPublicKeyID: k.WechatPublicKeyID, APIv3Key: k.APIv3Key}, nil
}

func privatePEM(key *rsa.PrivateKey) (string, error) {
	if key == nil {
		return "", errors.New("paynotify: no private key")
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return "", fmt.Errorf("paynotify: marshal private key: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), nil
}

// ParseTestKeys reads keys written by TestKeys.Text and checks that they
// fit together: RSA keys of at least MinKeyBits, one platform certificate
// whose key is WechatPrivatePEM's, a PUB_KEY_ID_ id and an API v3 key of
// APIv3KeyLen bytes. Every problem is reported at once.
func ParseTestKeys(t TestKeyText) (TestKeys, error) {
	var errs []error
	alipay, err := parsePrivatePEM(t.AlipayPrivatePEM)
	if err != nil {
		errs = append(errs, fmt.Errorf("alipay private key: %w", err))
	}
	wechat, err := parsePrivatePEM(t.WechatPrivatePEM)
	if err != nil {
		errs = append(errs, fmt.Errorf("wechat private key: %w", err))
	}
	k := TestKeys{AlipayPrivate: alipay, WechatPrivate: wechat, WechatCertPEM: t.WechatCertPEM,
		WechatPublicKeyID: t.WechatPublicKeyID, APIv3Key: t.APIv3Key}
	certs, err := parseCertificates(t.WechatCertPEM)
	switch {
	case err != nil:
		errs = append(errs, err)
	case len(certs) != 1:
		errs = append(errs, fmt.Errorf("paynotify: %d platform certificates, want one", len(certs)))
	case wechat != nil && !wechat.PublicKey.Equal(certs[0].PublicKey):
		errs = append(errs, errors.New("paynotify: the platform certificate is not of the wechat private key"))
	default:
		k.WechatSerial = fmt.Sprintf("%X", certs[0].SerialNumber)
	}
	if !strings.HasPrefix(t.WechatPublicKeyID, PublicKeyIDPrefix) {
		errs = append(errs, fmt.Errorf("paynotify: public key id %q does not start with %s", t.WechatPublicKeyID, PublicKeyIDPrefix))
	}
	if len(t.APIv3Key) != APIv3KeyLen {
		errs = append(errs, fmt.Errorf("paynotify: API v3 key is %d bytes, want %d", len(t.APIv3Key), APIv3KeyLen))
	}
	if alipay != nil {
		if k.AlipayPublicPEM, err = pkixPEM(&alipay.PublicKey); err != nil {
			errs = append(errs, err)
		}
	}
	if wechat != nil {
		if k.WechatPublicPEM, err = pkixPEM(&wechat.PublicKey); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return TestKeys{}, err
	}
	return k, nil
}

// parsePrivatePEM reads one RSA private key, PKCS#8 ("PRIVATE KEY") or
// PKCS#1 ("RSA PRIVATE KEY"), and nothing else.
func parsePrivatePEM(text string) (*rsa.PrivateKey, error) {
	block, rest := pem.Decode([]byte(strings.TrimSpace(text)))
	if block == nil || strings.TrimSpace(string(rest)) != "" {
		return nil, errors.New("paynotify: want one PEM block")
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, fmt.Errorf("paynotify: PEM block %q is not a private key", block.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("paynotify: private key: %w", err)
	}
	rsaKey, ok := key.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("paynotify: private key is %T, not RSA", key)
	}
	if _, err := checkRSA(&rsaKey.PublicKey); err != nil {
		return nil, err
	}
	return rsaKey, nil
}
