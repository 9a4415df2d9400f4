package config

import (
	"errors"
	"fmt"

	"github.com/eisland/isle/internal/kit/paynotify"
)

// Payments holds the gateways' keys the API verifies callbacks with, and
// the worker the callback in the rawBody of a paid notification without
// its amount (doc/payments.md). A gateway left unconfigured refuses its
// callbacks, and the worker such notifications of its channel.
type Payments struct {
	// TestKeys says the keys are local test keys (islectl pay keys):
	// PAYMENT_TEST_KEYS, or a platform certificate whose subject marks it
	// as a test one. The API and the worker refuse them unless ISLE_DEV=1.
	TestKeys bool

	AlipayPublicKey string
	AlipayAppID     string
	AlipaySellerID  string

	WechatAPIv3Key      string
	WechatPlatformCerts string
	WechatPublicKey     string
	WechatPublicKeyID   string
	WechatMchID         string
	WechatAppID         string
}

// AlipayConfigured says whether the Alipay gateway has keys.
func (p Payments) AlipayConfigured() bool { return p.AlipayPublicKey != "" || p.AlipayAppID != "" }

// WechatConfigured says whether the WeChat Pay gateway has its key.
func (p Payments) WechatConfigured() bool { return p.WechatAPIv3Key != "" }

func loadPayments(l *loader) Payments {
	p := Payments{
		AlipayPublicKey: l.String("PAYMENT_ALIPAY_PUBLIC_KEY", "", "Alipay's public key (PEM, or the bare base64 its console shows): callbacks are verified against it, by the API and by the worker for a paid notification without its amount (its rawBody). Empty: Alipay callbacks are refused, and such notifications of Alipay payments."),
		AlipayAppID:     l.String("PAYMENT_ALIPAY_APP_ID", "", "The app id Alipay callbacks must carry."),
		AlipaySellerID:  l.String("PAYMENT_ALIPAY_SELLER_ID", "", "The seller id Alipay callbacks must carry; empty: not checked."),
		WechatAPIv3Key:  l.Secret("PAYMENT_WECHAT_API_V3_KEY", "", "WeChat Pay API v3 key (32 bytes), which decrypts callbacks, in the API and in the worker for a paid notification without its amount (its rawBody). Empty: WeChat Pay callbacks are refused, and such notifications of WeChat Pay payments."),
		WechatPlatformCerts: l.String("PAYMENT_WECHAT_PLATFORM_CERTS", "",
			"WeChat Pay platform certificates (PEM, one or more), chosen by Wechatpay-Serial; or set PAYMENT_WECHAT_PUBLIC_KEY instead, never both."),
		WechatPublicKey:   l.String("PAYMENT_WECHAT_PUBLIC_KEY", "", "WeChat Pay platform public key (PEM), for public-key mode."),
		WechatPublicKeyID: l.String("PAYMENT_WECHAT_PUBLIC_KEY_ID", "", "Its id (PUB_KEY_ID_...), which Wechatpay-Serial carries in public-key mode."),
		WechatMchID:       l.String("PAYMENT_WECHAT_MCH_ID", "", "The merchant id WeChat Pay callbacks must carry; empty: not checked."),
		WechatAppID:       l.String("PAYMENT_WECHAT_APP_ID", "", "The app id WeChat Pay callbacks must carry; empty: not checked."),
		TestKeys: l.Bool("PAYMENT_TEST_KEYS", false,
			"The PAYMENT_* keys are local test keys, whose private halves sign callbacks (islectl pay keys sets it in its payment.env): the API and the worker refuse to start with them unless ISLE_DEV=1, and warn while they run with them. "+
				"A WeChat Pay platform certificate made by islectl pay keys counts as test keys whatever this says."),
	}
	p.TestKeys = p.TestKeys || paynotify.HasTestCertificate(p.WechatPlatformCerts)
	return p
}

// errTestKeys is why the API and the worker do not start with test
// gateway keys in production mode.
var errTestKeys = errors.New("PAYMENT_*: these are local test payment gateway keys (PAYMENT_TEST_KEYS, or a platform certificate of islectl pay keys): " +
	"whoever has their private halves can make Isle take a payment. Configure the gateways' own keys, or set ISLE_DEV=1 for local experiments")

// refuseTestKeys reports test gateway keys as an error unless dev
// (ISLE_DEV=1).
func (p Payments) refuseTestKeys(l *loader, dev bool) {
	if p.TestKeys && !dev {
		l.errs = append(l.errs, errTestKeys)
	}
}

// What a gateway without keys lacks, as Gateways says it.
const (
	missingAlipay = "PAYMENT_ALIPAY_PUBLIC_KEY and PAYMENT_ALIPAY_APP_ID are not set"
	missingWechat = "PAYMENT_WECHAT_API_V3_KEY is not set"
)

// Gateways builds the verifiers of the configured gateways, for the
// worker; the others are nil, and Missing names the variables that would
// configure them. A configured gateway's bad key is an error, named by its
// variables, both gateways' at once.
func (p Payments) Gateways() (paynotify.Gateways, error) {
	g := paynotify.Gateways{Missing: map[string]string{}}
	var errs []error
	if p.AlipayConfigured() {
		v, err := paynotify.NewAlipayVerifier(paynotify.AlipayConfig{PublicKey: p.AlipayPublicKey, AppID: p.AlipayAppID, SellerID: p.AlipaySellerID})
		if err != nil {
			errs = append(errs, fmt.Errorf("PAYMENT_ALIPAY_*: %w", err))
		}
		g.Alipay = v
	} else {
		g.Missing[paynotify.ChannelAlipay] = missingAlipay
	}
	if p.WechatConfigured() {
		v, err := paynotify.NewWechatVerifier(paynotify.WechatConfig{APIv3Key: p.WechatAPIv3Key, PlatformCerts: p.WechatPlatformCerts,
			PublicKey: p.WechatPublicKey, PublicKeyID: p.WechatPublicKeyID, MchID: p.WechatMchID, AppID: p.WechatAppID})
		if err != nil {
			errs = append(errs, fmt.Errorf("PAYMENT_WECHAT_*: %w", err))
		}
		g.Wechat = v
	} else {
		g.Missing[paynotify.ChannelWechat] = missingWechat
	}
	return g, errors.Join(errs...)
}
