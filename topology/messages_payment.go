package topology

// PaymentNotify is PaymentNotifyMessage (domain "payment-notify"): a gateway
// callback whose signature was checked. NotifyID deduplicates.
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
