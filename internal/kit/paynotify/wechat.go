package paynotify

import (
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// MaxBodyBytes is the largest callback body accepted (64 KiB; a WeChat
// notification is about 1 KiB, an Alipay form about 2 KiB). The handler
// enforces it while reading, with http.MaxBytesReader, before any decoding:
// WeChat's raw body is read once, whole, and those very bytes are verified
// and parsed.
const MaxBodyBytes = 64 << 10

// MaxClockSkew is how far Wechatpay-Timestamp may be from now, either way.
const MaxClockSkew = 5 * time.Minute

// WeChat Pay's notification headers.
const (
	HeaderTimestamp = "Wechatpay-Timestamp"
	HeaderNonce     = "Wechatpay-Nonce"
	HeaderSignature = "Wechatpay-Signature"
	HeaderSerial    = "Wechatpay-Serial"
)

// ProbePrefix starts the signatures of WeChat Pay's probe callbacks.
const ProbePrefix = "WECHATPAY/SIGNTEST/"

// PublicKeyIDPrefix starts the id of a WeChat Pay platform public key.
const PublicKeyIDPrefix = "PUB_KEY_ID_"

// APIv3KeyLen is the length of the API v3 key, an AES-256 key.
const APIv3KeyLen = 32

// WechatConfig configures a WechatVerifier: the API v3 key and exactly one
// key mode, platform certificates or a platform public key.
type WechatConfig struct {
	APIv3Key string // the 32-character API v3 key set in the merchant console

	// Certificate mode: the platform certificates, PEM, one or more
	// (several while WeChat rotates them). Each is chosen by its serial
	// number, in hex, compared case-insensitively.
	PlatformCerts string

	// Public-key mode: the platform public key (PEM) and its id, which
	// starts PUB_KEY_ID_.
	PublicKey   string
	PublicKeyID string

	MchID string // optional: when set, the transaction's mchid must equal it
	AppID string // optional: when set, the transaction's appid must equal it
}

// WechatVerifier checks WeChat Pay API v3 notifications. It is safe for
// concurrent use.
type WechatVerifier struct {
	apiV3Key []byte
	certs    map[string]*x509.Certificate // normalised serial → certificate; nil in public-key mode
	pubKey   *rsa.PublicKey               // public-key mode
	pubKeyID string
	mchID    string
	appID    string
}

// NewWechatVerifier checks cfg, reporting every problem at once.
func NewWechatVerifier(cfg WechatConfig) (*WechatVerifier, error) {
	v := &WechatVerifier{apiV3Key: []byte(cfg.APIv3Key), mchID: cfg.MchID, appID: cfg.AppID}
	var errs []error
	if len(v.apiV3Key) != APIv3KeyLen {
		errs = append(errs, fmt.Errorf("paynotify: wechat API v3 key is %d bytes, want %d", len(v.apiV3Key), APIv3KeyLen))
	}
	certMode, keyMode := cfg.PlatformCerts != "", cfg.PublicKey != "" || cfg.PublicKeyID != ""
	switch {
	case certMode && keyMode:
		errs = append(errs, errors.New("paynotify: wechat: configure platform certificates or a platform public key, not both"))
	case certMode:
		certs, err := parseCertificates(cfg.PlatformCerts)
		if err != nil {
			errs = append(errs, err)
			break
		}
		v.certs = make(map[string]*x509.Certificate, len(certs))
		for _, c := range certs {
			v.certs[normalSerial(fmt.Sprintf("%X", c.SerialNumber))] = c
		}
	case keyMode:
		if !strings.HasPrefix(cfg.PublicKeyID, PublicKeyIDPrefix) || len(cfg.PublicKeyID) == len(PublicKeyIDPrefix) {
			errs = append(errs, fmt.Errorf("paynotify: wechat public key id %q does not start %s", cfg.PublicKeyID, PublicKeyIDPrefix))
		}
		key, err := ParseRSAPublicKey(cfg.PublicKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("wechat public key: %w", err))
		}
		v.pubKey, v.pubKeyID = key, cfg.PublicKeyID
	default:
		errs = append(errs, errors.New("paynotify: wechat: no platform certificate or platform public key"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return v, nil
}

// normalSerial makes certificate serials comparable: upper case, without
// leading zeros (big.Int drops them; a header may keep them).
func normalSerial(s string) string {
	s = strings.TrimLeft(strings.ToUpper(s), "0")
	if s == "" {
		return "0"
	}
	return s
}

// key chooses the verification key by Wechatpay-Serial, never across modes.
func (v *WechatVerifier) key(serial string, now time.Time) (*rsa.PublicKey, error) {
	isKeyID := strings.HasPrefix(serial, PublicKeyIDPrefix)
	if v.certs == nil {
		switch {
		case !isKeyID:
			return nil, fmt.Errorf("%w: %q is not a public key id", ErrSerialMode, serial)
		case serial != v.pubKeyID:
			return nil, fmt.Errorf("%w: public key id %q", ErrUnknownSerial, serial)
		}
		return v.pubKey, nil
	}
	if isKeyID {
		return nil, fmt.Errorf("%w: %q while platform certificates are configured", ErrSerialMode, serial)
	}
	if serial == "" || strings.Trim(strings.ToUpper(serial), "0123456789ABCDEF") != "" {
		return nil, fmt.Errorf("%w: %q is not a hex serial", ErrUnknownSerial, serial)
	}
	cert, ok := v.certs[normalSerial(serial)]
	if !ok {
		return nil, fmt.Errorf("%w: certificate %s", ErrUnknownSerial, serial)
	}
	if now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return nil, fmt.Errorf("%w: certificate %s is valid %s to %s", ErrUnknownSerial, serial,
			cert.NotBefore.Format(time.RFC3339), cert.NotAfter.Format(time.RFC3339))
	}
	return cert.PublicKey.(*rsa.PublicKey), nil // checked by parseCertificates
}

// wechatHeader is the four notification headers, all required.
type wechatHeader struct{ timestamp, nonce, signature, serial string }

func readWechatHeader(h http.Header) (wechatHeader, error) {
	w := wechatHeader{
		timestamp: h.Get(HeaderTimestamp),
		nonce:     h.Get(HeaderNonce),
		signature: h.Get(HeaderSignature),
		serial:    h.Get(HeaderSerial),
	}
	var missing []string
	for _, f := range []struct{ name, v string }{
		{HeaderTimestamp, w.timestamp}, {HeaderNonce, w.nonce}, {HeaderSignature, w.signature}, {HeaderSerial, w.serial},
	} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return w, fmt.Errorf("%w: missing header %s", ErrMalformed, strings.Join(missing, ", "))
	}
	return w, nil
}
