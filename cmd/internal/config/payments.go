package config

import (
	"errors"

	"github.com/eisland/isle/internal/paynotify"
)

// Payments holds the gateways' keys the API verifies callbacks with
// (doc/payments.md). A gateway left unconfigured refuses its callbacks.
type Payments struct {
	// TestKeys says the keys are local test keys (islectl pay keys):
	// PAYMENT_TEST_KEYS, or a platform certificate whose subject marks it
	// as a test one. The API refuses them unless ISLE_DEV=1.
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
		AlipayPublicKey: l.String("PAYMENT_ALIPAY_PUBLIC_KEY", "", "Alipay's public key (PEM, or the bare base64 its console shows): callbacks are verified against it. Empty: Alipay callbacks are refused."),
		AlipayAppID:     l.String("PAYMENT_ALIPAY_APP_ID", "", "The app id Alipay callbacks must carry."),
		AlipaySellerID:  l.String("PAYMENT_ALIPAY_SELLER_ID", "", "The seller id Alipay callbacks must carry; empty: not checked."),
		WechatAPIv3Key:  l.Secret("PAYMENT_WECHAT_API_V3_KEY", "", "WeChat Pay API v3 key (32 bytes), which decrypts callbacks. Empty: WeChat Pay callbacks are refused."),
		WechatPlatformCerts: l.String("PAYMENT_WECHAT_PLATFORM_CERTS", "",
			"WeChat Pay platform certificates (PEM, one or more), chosen by Wechatpay-Serial; or set PAYMENT_WECHAT_PUBLIC_KEY instead, never both."),
		WechatPublicKey:   l.String("PAYMENT_WECHAT_PUBLIC_KEY", "", "WeChat Pay platform public key (PEM), for public-key mode."),
		WechatPublicKeyID: l.String("PAYMENT_WECHAT_PUBLIC_KEY_ID", "", "Its id (PUB_KEY_ID_...), which Wechatpay-Serial carries in public-key mode."),
		WechatMchID:       l.String("PAYMENT_WECHAT_MCH_ID", "", "The merchant id WeChat Pay callbacks must carry; empty: not checked."),
		WechatAppID:       l.String("PAYMENT_WECHAT_APP_ID", "", "The app id WeChat Pay callbacks must carry; empty: not checked."),
		TestKeys: l.Bool("PAYMENT_TEST_KEYS", false,
			"The PAYMENT_* keys are local test keys, whose private halves sign callbacks (islectl pay keys sets it in its payment.env): the API refuses to start with them unless ISLE_DEV=1, and warns while it runs with them. "+
				"A WeChat Pay platform certificate made by islectl pay keys counts as test keys whatever this says."),
	}
	p.TestKeys = p.TestKeys || paynotify.HasTestCertificate(p.WechatPlatformCerts)
	return p
}

// errTestKeys is why the API does not start with test gateway keys in
// production mode.
var errTestKeys = errors.New("PAYMENT_*: these are local test payment gateway keys (PAYMENT_TEST_KEYS, or a platform certificate of islectl pay keys): " +
	"whoever has their private halves can make the API take a payment. Configure the gateways' own keys, or set ISLE_DEV=1 for local experiments")

// refuseTestKeys reports test gateway keys as an error unless dev
// (ISLE_DEV=1).
func (p Payments) refuseTestKeys(l *loader, dev bool) {
	if p.TestKeys && !dev {
		l.errs = append(l.errs, errTestKeys)
	}
}
