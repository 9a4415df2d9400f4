package paynotify

import (
	"crypto"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ResourceAlgorithm is the only resource encryption WeChat Pay v3 uses.
const ResourceAlgorithm = "AEAD_AES_256_GCM"

// WechatTradeSuccess is the trade_state of a paid transaction.
const WechatTradeSuccess = "SUCCESS"

// WechatNotice is a verified WeChat Pay transaction notification: the
// envelope's fields and the decrypted transaction.
type WechatNotice struct {
	ID           string // the notification id: the callback identity
	CreateTime   string
	EventType    string // TRANSACTION.SUCCESS, ...
	ResourceType string
	Summary      string
	Transaction  WechatTransaction
	RawBody      []byte // the verified bytes
}

// WechatTransaction is the decrypted resource of a transaction notification.
type WechatTransaction struct {
	AppID          string       `json:"appid"`
	MchID          string       `json:"mchid"`
	OutTradeNo     string       `json:"out_trade_no"`
	TransactionID  string       `json:"transaction_id"`
	TradeType      string       `json:"trade_type"`
	TradeState     string       `json:"trade_state"`
	TradeStateDesc string       `json:"trade_state_desc"`
	BankType       string       `json:"bank_type"`
	Attach         string       `json:"attach"`
	SuccessTime    string       `json:"success_time"` // RFC 3339 as sent
	Payer          WechatPayer  `json:"payer"`
	Amount         WechatAmount `json:"amount"`
	PaidAt         time.Time    `json:"-"` // SuccessTime parsed; zero when absent
}

// WechatPayer is the transaction's payer.
type WechatPayer struct {
	OpenID string `json:"openid"`
}

// WechatAmount is the transaction's amount, in fen.
type WechatAmount struct {
	Total         int64  `json:"total"`
	PayerTotal    int64  `json:"payer_total"`
	Currency      string `json:"currency"`
	PayerCurrency string `json:"payer_currency"`
}

// Notice is n in the form common to both gateways.
func (n WechatNotice) Notice() Notice {
	t := n.Transaction
	return Notice{
		Channel:       ChannelWechat,
		NotifyID:      n.ID,
		OutTradeNo:    t.OutTradeNo,
		TransactionID: t.TransactionID,
		TradeState:    t.TradeState,
		ProviderState: t.TradeState,
		AmountFen:     t.Amount.Total,
		Currency:      t.Amount.Currency,
		PaidAt:        t.PaidAt,
		Raw:           string(n.RawBody),
	}
}

// wechatEnvelope is the notification body.
type wechatEnvelope struct {
	ID           string `json:"id"`
	CreateTime   string `json:"create_time"`
	EventType    string `json:"event_type"`
	ResourceType string `json:"resource_type"`
	Summary      string `json:"summary"`
	Resource     struct {
		Algorithm      string `json:"algorithm"`
		OriginalType   string `json:"original_type"`
		Ciphertext     string `json:"ciphertext"`
		AssociatedData string `json:"associated_data"`
		Nonce          string `json:"nonce"`
	} `json:"resource"`
}

// WechatSignedMessage is what WeChat Pay signs: the timestamp and nonce
// headers as received and the raw body, each followed by a newline.
func WechatSignedMessage(timestamp, nonce string, body []byte) []byte {
	msg := make([]byte, 0, len(timestamp)+len(nonce)+len(body)+3)
	msg = append(append(msg, timestamp...), '\n')
	msg = append(append(msg, nonce...), '\n')
	return append(append(msg, body...), '\n')
}

// VerifyWechat checks a notification, in this order: the body's size
// (ErrTooLarge); the four headers (ErrMalformed); the timestamp within
// MaxClockSkew of now (ErrStale); a probe signature (ErrProbe); the key for
// Wechatpay-Serial in the configured mode (ErrSerialMode, ErrUnknownSerial);
// SHA256withRSA over WechatSignedMessage with rawBody exactly as received
// (ErrBadSignature); only then the JSON (ErrMalformed); the resource
// decrypted (ErrDecrypt); mchid and appid when configured
// (ErrWrongMerchant, ErrWrongApp); trade_state. A transaction that is not
// SUCCESS returns the notice with ErrNotPaid. On other errors the notice is
// the zero value.
func (v *WechatVerifier) VerifyWechat(header http.Header, rawBody []byte, now time.Time) (WechatNotice, error) {
	if len(rawBody) > MaxBodyBytes {
		return WechatNotice{}, fmt.Errorf("%w: %d bytes", ErrTooLarge, len(rawBody))
	}
	h, err := readWechatHeader(header)
	if err != nil {
		return WechatNotice{}, err
	}
	if err := checkTimestamp(h.timestamp, now); err != nil {
		return WechatNotice{}, err
	}
	if strings.HasPrefix(h.signature, ProbePrefix) {
		return WechatNotice{}, ErrProbe
	}
	key, err := v.key(h.serial, now)
	if err != nil {
		return WechatNotice{}, err
	}
	sig, err := base64.StdEncoding.DecodeString(h.signature)
	if err != nil {
		return WechatNotice{}, fmt.Errorf("%w: %s is not base64", ErrBadSignature, HeaderSignature)
	}
	digest := sha256.Sum256(WechatSignedMessage(h.timestamp, h.nonce, rawBody))
	if err := rsa.VerifyPKCS1v15(key, crypto.SHA256, digest[:], sig); err != nil {
		return WechatNotice{}, fmt.Errorf("%w: wechat SHA256withRSA", ErrBadSignature)
	}
	return v.open(rawBody)
}

// open reads a notification body whose authenticity is established (by
// its signature, or by the GCM tag alone: OpenWechat): the JSON and its id
// (ErrMalformed), the resource decrypted (ErrDecrypt), the transaction
// (ErrMalformed), mchid and appid when configured (ErrWrongMerchant,
// ErrWrongApp), trade_state (ErrNotPaid, with the notice).
func (v *WechatVerifier) open(rawBody []byte) (WechatNotice, error) {
	var env wechatEnvelope
	if err := json.Unmarshal(rawBody, &env); err != nil {
		return WechatNotice{}, fmt.Errorf("%w: wechat body: %w", ErrMalformed, err)
	}
	if env.ID == "" {
		return WechatNotice{}, fmt.Errorf("%w: wechat notification has no id", ErrMalformed)
	}
	plain, err := v.decrypt(env)
	if err != nil {
		return WechatNotice{}, err
	}
	t, err := parseTransaction(plain)
	if err != nil {
		return WechatNotice{}, err
	}
	if v.mchID != "" && t.MchID != v.mchID {
		return WechatNotice{}, fmt.Errorf("%w: mchid %q", ErrWrongMerchant, t.MchID)
	}
	if v.appID != "" && t.AppID != v.appID {
		return WechatNotice{}, fmt.Errorf("%w: appid %q", ErrWrongApp, t.AppID)
	}
	n := WechatNotice{
		ID:           env.ID,
		CreateTime:   env.CreateTime,
		EventType:    env.EventType,
		ResourceType: env.ResourceType,
		Summary:      env.Summary,
		Transaction:  t,
		RawBody:      rawBody,
	}
	if t.TradeState != WechatTradeSuccess {
		return n, fmt.Errorf("%w: wechat trade_state %s", ErrNotPaid, t.TradeState)
	}
	return n, nil
}

// checkTimestamp refuses a timestamp (decimal Unix seconds) more than
// MaxClockSkew from now.
func checkTimestamp(ts string, now time.Time) error {
	if len(ts) > 12 || strings.Trim(ts, "0123456789") != "" {
		return fmt.Errorf("%w: %s %q is not Unix seconds", ErrMalformed, HeaderTimestamp, ts)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q: %w", ErrMalformed, HeaderTimestamp, ts, err)
	}
	if skew := now.Sub(time.Unix(sec, 0)).Abs(); skew > MaxClockSkew {
		return fmt.Errorf("%w: %s is %s off", ErrStale, HeaderTimestamp, skew.Truncate(time.Second))
	}
	return nil
}

// decrypt opens the resource with the API v3 key.
func (v *WechatVerifier) decrypt(env wechatEnvelope) ([]byte, error) {
	r := env.Resource
	if r.Algorithm != ResourceAlgorithm {
		return nil, fmt.Errorf("%w: algorithm %q", ErrDecrypt, r.Algorithm)
	}
	ct, err := base64.StdEncoding.DecodeString(r.Ciphertext)
	if err != nil {
		return nil, fmt.Errorf("%w: ciphertext is not base64", ErrDecrypt)
	}
	gcm, err := newGCM(v.apiV3Key)
	if err != nil {
		return nil, err
	}
	if len(r.Nonce) != gcm.NonceSize() {
		return nil, fmt.Errorf("%w: nonce of %d bytes, want %d", ErrDecrypt, len(r.Nonce), gcm.NonceSize())
	}
	plain, err := gcm.Open(nil, []byte(r.Nonce), ct, []byte(r.AssociatedData))
	if err != nil {
		return nil, fmt.Errorf("%w: GCM authentication failed", ErrDecrypt)
	}
	return plain, nil
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDecrypt, err)
	}
	return cipher.NewGCM(block)
}

// parseTransaction reads the decrypted transaction. A paid one must carry
// its transaction id, a positive amount and its success time.
func parseTransaction(plain []byte) (WechatTransaction, error) {
	var t WechatTransaction
	if err := json.Unmarshal(plain, &t); err != nil {
		return WechatTransaction{}, fmt.Errorf("%w: wechat transaction: %w", ErrMalformed, err)
	}
	var errs []error
	if t.OutTradeNo == "" {
		errs = append(errs, errors.New("out_trade_no is missing"))
	}
	if t.TradeState == "" {
		errs = append(errs, errors.New("trade_state is missing"))
	}
	if t.SuccessTime != "" {
		var err error
		if t.PaidAt, err = time.Parse(time.RFC3339, t.SuccessTime); err != nil {
			errs = append(errs, fmt.Errorf("success_time: %w", err))
		}
	}
	if t.TradeState == WechatTradeSuccess {
		if t.TransactionID == "" {
			errs = append(errs, errors.New("transaction_id is missing"))
		}
		if t.Amount.Total <= 0 {
			errs = append(errs, fmt.Errorf("amount.total %d is not positive", t.Amount.Total))
		}
		if t.SuccessTime == "" {
			errs = append(errs, errors.New("success_time is missing"))
		}
	}
	if len(errs) > 0 {
		return WechatTransaction{}, fmt.Errorf("%w: wechat transaction: %w", ErrMalformed, errors.Join(errs...))
	}
	return t, nil
}
