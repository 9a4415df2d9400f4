package paynotify

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/eisland/isle/topology"
)

// Gateways verifies the gateway callback a PaymentNotifyMessage carries in
// rawBody (VerifyRecord), with the keys the API verifies callbacks with: a
// message whose publisher left out the amount is granted only what its
// callback proves (doc/payments.md, "What the worker trusts").
type Gateways struct {
	Alipay *AlipayVerifier // nil: no Alipay keys
	Wechat *WechatVerifier // nil: no WeChat Pay keys
	// Missing says, by channel (ChannelAlipay, ChannelWechat), what to
	// configure for a gateway without a verifier; ErrNoKeys carries it.
	Missing map[string]string
}

// VerifyRecord checks rawBody, the callback of channel's gateway as the
// message's producer received it, and returns the message that callback
// proves (Notice.Message): its order, transaction, state, success time,
// amount and currency.
//
// Alipay's rawBody is the form as posted (VerifyAlipayBody): its RSA2
// signature is the proof. WeChat Pay's is the notification's JSON body
// (OpenWechat): its signature travels in headers, which rawBody lacks, so
// the resource's GCM tag, which only the API v3 key makes, is the proof.
//
// A gateway without a verifier is ErrNoKeys (with what Missing says), an
// unknown channel ErrMalformed; otherwise the verifiers' errors. A callback
// of a trade not paid returns its message with ErrNotPaid.
func (g Gateways) VerifyRecord(channel, rawBody string) (topology.PaymentNotify, error) {
	var (
		n   Notice
		err error
	)
	switch channel {
	case ChannelAlipay:
		if g.Alipay == nil {
			return topology.PaymentNotify{}, g.noKeys(channel)
		}
		var a AlipayNotice
		a, err = g.Alipay.VerifyAlipayBody(rawBody)
		n = a.Notice()
	case ChannelWechat:
		if g.Wechat == nil {
			return topology.PaymentNotify{}, g.noKeys(channel)
		}
		var w WechatNotice
		w, err = g.Wechat.OpenWechat([]byte(rawBody))
		n = w.Notice()
	default:
		return topology.PaymentNotify{}, fmt.Errorf("%w: channel %q", ErrMalformed, channel)
	}
	if n.OutTradeNo == "" { // the zero notice of a refusal
		return topology.PaymentNotify{}, err
	}
	return n.Message(), err
}

func (g Gateways) noKeys(channel string) error {
	if why := g.Missing[channel]; why != "" {
		return fmt.Errorf("%w: %s (%s)", ErrNoKeys, channel, why)
	}
	return fmt.Errorf("%w: %s", ErrNoKeys, channel)
}

// VerifyAlipayBody checks an Alipay notification given as its raw body,
// the form as posted (application/x-www-form-urlencoded, blanks around it
// ignored): decoded as the API's handler decodes a request's form
// (url.ParseQuery; ErrTooLarge past MaxBodyBytes, ErrMalformed when it
// does not decode), then checked by VerifyAlipay.
func (v *AlipayVerifier) VerifyAlipayBody(body string) (AlipayNotice, error) {
	if len(body) > MaxBodyBytes {
		return AlipayNotice{}, fmt.Errorf("%w: %d bytes", ErrTooLarge, len(body))
	}
	form, err := url.ParseQuery(strings.TrimSpace(body))
	if err != nil {
		return AlipayNotice{}, fmt.Errorf("%w: alipay form: %w", ErrMalformed, err)
	}
	return v.VerifyAlipay(form)
}

// OpenWechat checks a WeChat Pay notification given as its body alone,
// without the Wechatpay-* headers that carry its signature: the resource
// is opened with the API v3 key, and AES-256-GCM's tag authenticates the
// sealed transaction and its associated data, which only a holder of the
// key (WeChat Pay, the merchant) can have sealed. The envelope around the
// resource (its id, event type, summary) is not authenticated; the
// transaction is. Then as VerifyWechat after the signature: ErrTooLarge,
// ErrMalformed, ErrDecrypt, ErrWrongMerchant, ErrWrongApp, and ErrNotPaid
// with the notice. Without the headers there is no timestamp: a body may
// be old, as a callback resent or replayed is.
func (v *WechatVerifier) OpenWechat(rawBody []byte) (WechatNotice, error) {
	if len(rawBody) > MaxBodyBytes {
		return WechatNotice{}, fmt.Errorf("%w: %d bytes", ErrTooLarge, len(rawBody))
	}
	return v.open(rawBody)
}
