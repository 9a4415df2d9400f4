package store

import "time"

// PaymentOrder is a row of payment_order. AmountFen is whole fen.
type PaymentOrder struct {
	ID            uint64     `gorm:"column:id;primaryKey"`
	OutTradeNo    string     `gorm:"column:out_trade_no"`
	Username      string     `gorm:"column:username"`
	ProductCode   string     `gorm:"column:product_code"`
	AmountFen     int64      `gorm:"column:amount_fen"`
	Currency      string     `gorm:"column:currency"`
	Channel       string     `gorm:"column:channel"`
	Status        string     `gorm:"column:status"`
	TransactionID *string    `gorm:"column:transaction_id"`
	ReceiptEmail  *string    `gorm:"column:receipt_email"`
	PaidAt        *time.Time `gorm:"column:paid_at"`
	ReceiptSentAt *time.Time `gorm:"column:receipt_sent_at"` // the receipt mail went out
	ExpireAt      time.Time  `gorm:"column:expire_at"`
	CreatedAt     time.Time  `gorm:"column:created_at"`
	UpdatedAt     time.Time  `gorm:"column:updated_at"`
}

// TableName is the table gorm maps PaymentOrder to.
func (PaymentOrder) TableName() string { return "payment_order" }

// PaymentNotifyRecord is a row of payment_notify_record: one distinct
// notification, unique by (channel, out trade no, transaction id, state).
type PaymentNotifyRecord struct {
	ID            uint64    `gorm:"column:id;primaryKey"`
	Channel       string    `gorm:"column:channel"`
	OutTradeNo    string    `gorm:"column:out_trade_no"`
	TransactionID string    `gorm:"column:transaction_id"`
	TradeState    string    `gorm:"column:trade_state"`
	NotifyID      string    `gorm:"column:notify_id"`
	VerifyOK      bool      `gorm:"column:verify_ok"`
	Outcome       string    `gorm:"column:outcome"`
	RawBody       *string   `gorm:"column:raw_body"`
	CreatedAt     time.Time `gorm:"column:created_at"`
}

// TableName is the table gorm maps PaymentNotifyRecord to.
func (PaymentNotifyRecord) TableName() string { return "payment_notify_record" }
