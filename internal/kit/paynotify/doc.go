// Package paynotify verifies payment-gateway callbacks with the standard
// library only (doc/payments.md): Alipay's RSA2 form notifications and
// WeChat Pay API v3 notifications (SHA256withRSA over the raw body, then an
// AEAD_AES_256_GCM resource). It owns the cryptography, the order of the
// checks and the typed errors; it does no I/O. The HTTP handlers read the
// request (WeChat: the raw body once, at most MaxBodyBytes, before any
// decoding), call VerifyAlipay or VerifyWechat, map the error to the
// gateway's answer and publish Notice.Message(); whether the amount matches
// the order (AmountMatches) and whether the order exists are theirs to ask.
//
// GenerateTestKeys, SignAlipay, SignWechat and EncryptWechatResource are the
// exact inverse of the verifiers, for tests and `islectl pay simulate`;
// TestKeys.Text and ParseTestKeys turn test keys into text and back, for
// the files `islectl pay keys` writes.
package paynotify
