package order

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eisland/isle/topology"
)

// The products, channels and currency of an order (doc/payments.md).
const (
	ProductProMonth      = "pro-month"
	ProductAgentRecharge = "agent-recharge"

	ChannelAlipay = "ALIPAY"
	ChannelWechat = "WECHAT"

	// Currency is every order's currency.
	Currency = "CNY"
)

// The statuses of an order (doc/payments.md). An order is created PENDING;
// PENDING → PAID and PENDING → CLOSED happen once; PAID → REFUNDED records
// a refund.
const (
	Pending  = "PENDING"
	Paid     = "PAID"
	Closed   = "CLOSED"
	Refunded = "REFUNDED"
)

// Order limits and lifetimes.
const (
	// TTL is how long an order can be paid: its expiry is its creation
	// plus this.
	TTL = 30 * time.Minute
	// ActiveOrderGrace and ReceiptEmailGrace are how long past an order's
	// expiry its active-order and receipt-email keys live (doc/keys.md,
	// database 10: the order's expiry + 5 min and + 60 min).
	ActiveOrderGrace  = 5 * time.Minute
	ReceiptEmailGrace = 60 * time.Minute
	// ProMonthPriceDefaultFen is the pro-month price when none is set
	// (payment:pricing:pro-month:amount-fen; the Spring backend's example,
	// 15 yuan).
	ProMonthPriceDefaultFen = 1500
	// RechargeMaxFen bounds one agent recharge: 100,000 yuan.
	RechargeMaxFen = 10_000_000
	// ReceiptEmailMax is payment_order.receipt_email's width.
	ReceiptEmailMax = 254
)

// ErrInvalid is returned (wrapped, with the reason) for an order that
// cannot be created as asked: unknown product or channel, a wrong amount.
var ErrInvalid = errors.New("order: invalid order")

// New is what a user asks to pay for.
type New struct {
	Username     string
	Product      string // ProductProMonth or ProductAgentRecharge
	AmountFen    int64
	Channel      string // ChannelAlipay or ChannelWechat
	ReceiptEmail string // optional; the caller validates the address
}

// Check says whether n can be ordered: a user, a channel, a receipt
// address that fits its column on one line, and a product at its price: a
// pro month at proMonthPrice (asked only for a pro month: the price lives
// in Redis), a recharge of 1 to RechargeMaxFen fen. The error wraps
// ErrInvalid, or is proMonthPrice's.
func (n New) Check(proMonthPrice func() (int64, error)) error {
	switch {
	case n.Username == "":
		return fmt.Errorf("%w: no user", ErrInvalid)
	case n.Channel != ChannelAlipay && n.Channel != ChannelWechat:
		return fmt.Errorf("%w: channel %q, want %s or %s", ErrInvalid, n.Channel, ChannelAlipay, ChannelWechat)
	case len(n.ReceiptEmail) > ReceiptEmailMax || strings.ContainsAny(n.ReceiptEmail, "\r\n"):
		return fmt.Errorf("%w: receipt email", ErrInvalid)
	}
	switch n.Product {
	case ProductProMonth:
		price, err := proMonthPrice()
		if err != nil {
			return err
		}
		if n.AmountFen != price {
			return fmt.Errorf("%w: a pro month costs %d fen, not %d", ErrInvalid, price, n.AmountFen)
		}
	case ProductAgentRecharge:
		if n.AmountFen < 1 || n.AmountFen > RechargeMaxFen {
			return fmt.Errorf("%w: a recharge is 1 to %d fen, not %d", ErrInvalid, RechargeMaxFen, n.AmountFen)
		}
	default:
		return fmt.Errorf("%w: product %q, want %s or %s", ErrInvalid, n.Product, ProductProMonth, ProductAgentRecharge)
	}
	return nil
}

// NewOutTradeNo draws an order number: the UTC+8 time to the second, then
// 20 random hex digits (34 characters of [0-9a-f], sortable by creation).
func NewOutTradeNo(now time.Time) (string, error) {
	var b [10]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return now.In(topology.UTC8).Format("20060102150405") + hex.EncodeToString(b[:]), nil
}

// Order is an order as the rules read it: payment_order's columns that
// decide what a notification does to it.
type Order struct {
	OutTradeNo    string
	Product       string
	AmountFen     int64
	Currency      string
	Channel       string
	Status        string
	TransactionID string // "" until it is paid
	ExpireAt      time.Time
}

// Active says whether o holds its user up at now: one order at a time
// waits to be paid, and an expired one no longer counts, whatever its
// status says.
func (o Order) Active(now time.Time) bool { return o.Status == Pending && o.ExpireAt.After(now) }

// Recharged says whether o is a recharge that was paid (refunded or not):
// its RECHARGE ledger row exists.
func (o Order) Recharged() bool {
	return o.Product == ProductAgentRecharge && (o.Status == Paid || o.Status == Refunded)
}
