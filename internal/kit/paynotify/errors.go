package paynotify

import (
	"errors"
	"fmt"
)

// The errors VerifyAlipay and VerifyWechat wrap; callers branch with
// errors.Is. doc/payments.md says what a handler answers for each.
var (
	// ErrBadSignature: the signature is missing, not base64, or does not
	// verify over the received bytes. Nothing in the callback may be
	// trusted; publish nothing.
	ErrBadSignature = errors.New("paynotify: bad signature")
	// ErrSignType: Alipay's sign_type is not RSA2 (sign_type is not itself
	// signed, so a changed one is refused outright). It is an
	// ErrBadSignature.
	ErrSignType = fmt.Errorf("%w: sign_type is not RSA2", ErrBadSignature)
	// ErrProbe: a WeChat Pay probe, a signature starting
	// "WECHATPAY/SIGNTEST/" sent on purpose to see whether the merchant
	// verifies. It is an ErrBadSignature and must be answered as one.
	ErrProbe = fmt.Errorf("%w: WeChat Pay probe signature", ErrBadSignature)
	// ErrUnknownSerial: Wechatpay-Serial names no configured certificate or
	// public key (or a certificate outside its validity).
	ErrUnknownSerial = errors.New("paynotify: unknown Wechatpay-Serial")
	// ErrSerialMode: Wechatpay-Serial is of the other key mode (a
	// certificate serial while a platform public key is configured, or a
	// PUB_KEY_ID_ while certificates are). It is an ErrUnknownSerial.
	ErrSerialMode = fmt.Errorf("%w: serial of the other key mode", ErrUnknownSerial)
	// ErrStale: Wechatpay-Timestamp is more than MaxClockSkew away from now,
	// either way.
	ErrStale = errors.New("paynotify: timestamp outside the 5-minute window")
	// ErrDecrypt: the WeChat resource cannot be opened: another algorithm,
	// a bad nonce or ciphertext, or a GCM tag that does not match (wrong API
	// v3 key, or altered data).
	ErrDecrypt = errors.New("paynotify: cannot decrypt resource")
	// ErrMalformed: the callback verified (or could not get that far) but
	// is not a well-formed notification: a missing header or field, an
	// unreadable amount or time, a repeated form parameter, bad JSON.
	ErrMalformed = errors.New("paynotify: malformed notification")
	// ErrTooLarge: the body is longer than MaxBodyBytes.
	ErrTooLarge = errors.New("paynotify: body larger than MaxBodyBytes")
	// ErrWrongApp: validly signed, but for another app id (Alipay app_id,
	// WeChat appid when configured).
	ErrWrongApp = errors.New("paynotify: notification for another app id")
	// ErrWrongMerchant: validly signed, but for another seller or merchant
	// (Alipay seller_id, WeChat mchid), checked only when configured.
	ErrWrongMerchant = errors.New("paynotify: notification for another merchant")
	// ErrNotPaid: a valid notification whose trade is not paid (Alipay
	// WAIT_BUYER_PAY, TRADE_CLOSED; WeChat any trade_state but SUCCESS).
	// The notice is returned with the error, so the handler can record it
	// and answer the gateway without granting anything.
	ErrNotPaid = errors.New("paynotify: trade not paid")
	// ErrNoKeys: the gateway of a record's channel has no keys
	// configured (Gateways), so the callback in its rawBody cannot be
	// verified.
	ErrNoKeys = errors.New("paynotify: no keys configured for the gateway")
)
