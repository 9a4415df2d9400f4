package topology

// PaymentNotify is PaymentNotifyMessage (domain "payment-notify"): a gateway
// callback whose signature was checked. NotifyID deduplicates.
//
// AmountFen and Currency are Isle's: what the verified callback says was
// paid, set on a SUCCESS, which the consumer checks against the order
// before it grants anything. The Spring producer sets neither (its
// consumers ignore them); a SUCCESS without them is granted what the
// callback in RawBody proves once verified with the gateways' keys, or
// nothing (doc/payments.md).
type PaymentNotify struct {
	NotifyID      string         `json:"notifyId"`
	Channel       string         `json:"channel"` // ALIPAY, WECHAT
	OutTradeNo    string         `json:"outTradeNo"`
	TransactionID string         `json:"transactionId"`
	TradeState    string         `json:"tradeState"` // SUCCESS, REFUND, NOTPAY, CLOSED, ...
	SuccessTime   OffsetDateTime `json:"successTime"`
	VerifyOK      bool           `json:"verifyOk"`
	RawBody       string         `json:"rawBody"`
	LastError     string         `json:"lastError"`
	AmountFen     *int64         `json:"amountFen"` // Java Long: null when not sent
	Currency      string         `json:"currency"`  // CNY
}

// PaymentReceiptDispatch is PaymentReceiptDispatchMessage (domain
// "payment-receipt"): the receipt mail of a paid order.
type PaymentReceiptDispatch struct {
	TraceID       string        `json:"traceId"`
	Email         string        `json:"email"`
	OutTradeNo    string        `json:"outTradeNo"`
	Channel       string        `json:"channel"`
	TransactionID string        `json:"transactionId"`
	AmountFen     *int32        `json:"amountFen"` // Java Integer: may be null
	Currency      string        `json:"currency"`  // CNY
	ProductCode   string        `json:"productCode"`
	PaidAt        LocalDateTime `json:"paidAt"`
	ExpireAt      LocalDateTime `json:"expireAt"`
	LastError     string        `json:"lastError"`
}

// Record is the Java record name.
func (PaymentNotify) Record() string { return "PaymentNotifyMessage" }

// Domain is the domain PaymentNotify travels on.
func (PaymentNotify) Domain() string { return DomainPaymentNotify }

// Validate requires a known channel, the order number and the trade state,
// and the ids to fit payment_notify_record's columns. NotifyID and
// TransactionID may be empty: the consumer derives a key. AmountFen may be
// null but not <= 0; whether a SUCCESS has it is the consumer's to judge.
func (m PaymentNotify) Validate() error {
	var amount error
	if m.AmountFen != nil {
		amount = positive("amountFen", *m.AmountFen)
	}
	return firstError(
		maxChars("notifyId", m.NotifyID, 128),
		oneOf("channel", m.Channel, "ALIPAY", "WECHAT"),
		required("outTradeNo", m.OutTradeNo),
		maxChars("outTradeNo", m.OutTradeNo, 64),
		maxChars("transactionId", m.TransactionID, 64),
		required("tradeState", m.TradeState),
		amount,
		maxChars("currency", m.Currency, 8),
	)
}

// Record is the Java record name.
func (PaymentReceiptDispatch) Record() string { return "PaymentReceiptDispatchMessage" }

// Domain is the domain PaymentReceiptDispatch travels on.
func (PaymentReceiptDispatch) Domain() string { return DomainPaymentReceipt }

// Validate requires a mailable email and the order number; AmountFen may be
// null but not <= 0.
func (m PaymentReceiptDispatch) Validate() error {
	var amount error
	if m.AmountFen != nil {
		amount = positive("amountFen", int64(*m.AmountFen))
	}
	return firstError(
		email("email", m.Email),
		required("outTradeNo", m.OutTradeNo),
		amount,
	)
}
