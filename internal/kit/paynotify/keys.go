package paynotify

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
)

// MinKeyBits is the smallest gateway RSA key accepted; both gateways issue
// 2048-bit keys.
const MinKeyBits = 2048

// ParseRSAPublicKey reads an RSA public key from a PEM block "PUBLIC KEY"
// (PKIX), "RSA PUBLIC KEY" (PKCS#1) or "CERTIFICATE", or from bare base64
// DER (PKIX or PKCS#1), the form Alipay's console shows.
func ParseRSAPublicKey(text string) (*rsa.PublicKey, error) {
	text = strings.TrimSpace(text)
	var der []byte
	kind := ""
	if block, _ := pem.Decode([]byte(text)); block != nil {
		der, kind = block.Bytes, block.Type
	} else {
		var err error
		der, err = base64.StdEncoding.DecodeString(strings.Join(strings.Fields(text), ""))
		if err != nil {
			return nil, errors.New("paynotify: public key is neither PEM nor base64 DER")
		}
	}
	var pub any
	var err error
	switch kind {
	case "PUBLIC KEY":
		pub, err = x509.ParsePKIXPublicKey(der)
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(der)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(der); err == nil {
			pub = cert.PublicKey
		}
	case "":
		if pub, err = x509.ParsePKIXPublicKey(der); err != nil {
			pub, err = x509.ParsePKCS1PublicKey(der)
		}
	default:
		return nil, fmt.Errorf("paynotify: PEM block %q is not a public key", kind)
	}
	if err != nil {
		return nil, fmt.Errorf("paynotify: public key: %w", err)
	}
	return checkRSA(pub)
}

func checkRSA(pub any) (*rsa.PublicKey, error) {
	key, ok := pub.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("paynotify: public key is %T, not RSA", pub)
	}
	if key.N.BitLen() < MinKeyBits {
		return nil, fmt.Errorf("paynotify: RSA key of %d bits, want at least %d", key.N.BitLen(), MinKeyBits)
	}
	return key, nil
}

// parseCertificates reads every CERTIFICATE block of text; anything else in
// it is an error, so a pasted private key is not silently skipped.
func parseCertificates(text string) ([]*x509.Certificate, error) {
	rest := []byte(strings.TrimSpace(text))
	var certs []*x509.Certificate
	for len(rest) > 0 {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return nil, errors.New("paynotify: platform certificates: text outside PEM blocks")
		}
		if block.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("paynotify: platform certificates: PEM block %q", block.Type)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("paynotify: platform certificate: %w", err)
		}
		if _, err := checkRSA(cert.PublicKey); err != nil {
			return nil, fmt.Errorf("platform certificate %X: %w", cert.SerialNumber, err)
		}
		certs = append(certs, cert)
		rest = []byte(strings.TrimSpace(string(rest)))
	}
	if len(certs) == 0 {
		return nil, errors.New("paynotify: no platform certificate")
	}
	return certs, nil
}
