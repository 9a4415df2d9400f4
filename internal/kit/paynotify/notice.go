package paynotify

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eisland/isle/topology"
)

// Channels, as PaymentNotifyMessage spells them.
const (
	ChannelAlipay = "ALIPAY"
	ChannelWechat = "WECHAT"
)

// Trade states of PaymentNotifyMessage. WeChat's trade_state is passed
// through as sent (also REVOKED, USERPAYING, PAYERROR); Alipay's is mapped:
// TRADE_SUCCESS and TRADE_FINISHED are SUCCESS, WAIT_BUYER_PAY is NOTPAY,
// TRADE_CLOSED is CLOSED.
const (
	StateSuccess = "SUCCESS"
	StateNotPay  = "NOTPAY"
	StateClosed  = "CLOSED"
	StateRevoked = "REVOKED" // WeChat: the payer cancelled the payment; the order closes as for CLOSED
	StateRefund  = "REFUND"
)

// CurrencyCNY is the only currency Isle's orders are in.
const CurrencyCNY = "CNY"

// Notice is a verified notification of either gateway, what the handler
// needs to check it against the order and publish it.
type Notice struct {
	Channel       string    // ChannelAlipay or ChannelWechat
	NotifyID      string    // callback identity: Alipay notify_id, WeChat notification id
	OutTradeNo    string    // Isle's order number
	TransactionID string    // gateway trade id: Alipay trade_no, WeChat transaction_id
	TradeState    string    // StateSuccess, StateNotPay, StateClosed, ... (see the constants)
	ProviderState string    // the state as the gateway sent it (TRADE_SUCCESS, SUCCESS, ...)
	AmountFen     int64     // Alipay total_amount or WeChat amount.total, in fen
	Currency      string    // CurrencyCNY for Alipay; WeChat amount.currency
	PaidAt        time.Time // Alipay gmt_payment, WeChat success_time; zero when not paid
	Raw           string    // the callback for audit: WeChat's raw body, Alipay's form encoded
}

// Paid reports whether the notice says the trade is paid.
func (n Notice) Paid() bool { return n.TradeState == StateSuccess }

// Message is the PaymentNotifyMessage to publish for n: VerifyOK is true, as
// only verified notices exist, and a paid one carries the amount and
// currency paid, which the consumer checks against the order.
func (n Notice) Message() topology.PaymentNotify {
	m := topology.PaymentNotify{
		NotifyID:      n.NotifyID,
		Channel:       n.Channel,
		OutTradeNo:    n.OutTradeNo,
		TransactionID: n.TransactionID,
		TradeState:    n.TradeState,
		SuccessTime:   topology.OffsetDateTime{Time: n.PaidAt},
		VerifyOK:      true,
		RawBody:       n.Raw,
	}
	if n.Paid() {
		amount := n.AmountFen
		m.AmountFen, m.Currency = &amount, n.Currency
	}
	return m
}

// AmountMatches reports whether n paid exactly orderFen fen in CNY. Both
// are integers: no float is ever involved. A non-positive order amount
// matches nothing.
func AmountMatches(n Notice, orderFen int64) bool {
	return orderFen > 0 && n.Currency == CurrencyCNY && n.AmountFen == orderFen
}

// maxYuanDigits bounds the integer part of an amount so fen fit an int64
// with room to spare.
const maxYuanDigits = 15

var errAmount = errors.New("want yuan with at most 2 decimal places, like 88.88")

// ParseYuan reads a decimal amount in yuan ("88.88", "100", "0.5") as fen,
// exactly: digits, optionally a point and one or two digits; no sign,
// exponent, spaces or more decimals.
func ParseYuan(s string) (int64, error) {
	whole, frac, hasPoint := strings.Cut(s, ".")
	if whole == "" || len(whole) > maxYuanDigits || (hasPoint && (frac == "" || len(frac) > 2)) {
		return 0, fmt.Errorf("amount %q: %w", s, errAmount)
	}
	frac += "00"[len(frac):]
	var fen int64
	for _, c := range whole + frac {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("amount %q: %w", s, errAmount)
		}
		fen = fen*10 + int64(c-'0')
	}
	return fen, nil
}

// FormatYuan writes fen as Alipay's total_amount: yuan with two decimals.
// Negative amounts are written with a sign, which ParseYuan refuses.
func FormatYuan(fen int64) string {
	sign := ""
	u := uint64(fen)
	if fen < 0 {
		sign, u = "-", uint64(-fen)
	}
	return fmt.Sprintf("%s%d.%02d", sign, u/100, u%100)
}
