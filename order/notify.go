package order

import (
	"errors"
	"fmt"
	"time"

	"github.com/eisland/isle/topology"
)

// ProMonth is what a paid pro-month order adds to the user's pro time,
// from the later of now and its current end (ExtendPro).
const ProMonth = 30 * 24 * time.Hour

// The gateways' trade states a notification can carry (WeChat's as sent;
// the API maps Alipay's to these, doc/payments.md). Others are a trade in
// progress (NOTPAY, USERPAYING, ...).
const (
	TradeSuccess = "SUCCESS"
	TradeClosed  = "CLOSED"
	TradeRevoked = "REVOKED"
	TradeRefund  = "REFUND"
)

// The outcomes of a notification, as payment_notify_record.outcome holds
// them (the last two are never stored).
const (
	NotifyPaid     = "PAID"     // PENDING → PAID, the benefit granted and the receipt queued
	NotifyClosed   = "CLOSED"   // PENDING → CLOSED
	NotifyRefunded = "REFUNDED" // PAID → REFUNDED; the benefit is not taken back (doc/payments.md)
	// NotifyNotPending is a SUCCESS for an order that is not PENDING: a
	// second payment, or one after the order closed. Nothing is granted;
	// the money is to be refunded by hand.
	NotifyNotPending = "NOT_PENDING"
	NotifyRecorded   = "RECORDED"  // recorded; no transition from the order's status
	NotifyDuplicate  = "DUPLICATE" // this notification was applied before: nothing done
	NotifyIgnored    = "IGNORED"   // NOTPAY and other states of a trade in progress
)

// Notifications the rules refuse for good; a consumer sends them to the
// dead-letter queue.
var (
	// ErrUnverified is a notification whose signature the API did not
	// verify: it never grants anything.
	ErrUnverified = errors.New("order: payment notification not verified")
	// ErrMismatch is a notification for another channel than the order's,
	// or a SUCCESS whose amount or currency is not the order's, or that
	// carries none.
	ErrMismatch = errors.New("order: payment notification does not match its order")
	// ErrNotPaid is a receipt asked for an order that was never paid
	// (pending or closed): there is nothing to receipt.
	ErrNotPaid = errors.New("order: the order was never paid")
)

// Admit says whether the rules act on n at all, before its order is read:
// a notification the API did not verify is ErrUnverified, one that breaks
// the contract its validation error, and a trade in progress (NOTPAY and
// the like) is neither acted on nor recorded (false).
func Admit(n topology.PaymentNotify) (bool, error) {
	if !n.VerifyOK {
		return false, fmt.Errorf("%w: %s order %s, %s", ErrUnverified, n.Channel, n.OutTradeNo, n.TradeState)
	}
	if err := n.Validate(); err != nil {
		return false, err
	}
	switch n.TradeState {
	case TradeSuccess, TradeClosed, TradeRevoked, TradeRefund:
		return true, nil
	}
	return false, nil
}

// A Step is what a notification does to its order.
type Step struct {
	// Outcome is NotifyPaid, NotifyClosed, NotifyRefunded (the order
	// moves), NotifyNotPending or NotifyRecorded (it does not).
	Outcome string
	// Status is the order's status after the step.
	Status string
	// PaidAt (the gateway's success time, or now without one) and
	// TransactionID are the order's once paid; set for NotifyPaid only.
	PaidAt        time.Time
	TransactionID string
	// Grant is what the user gets; set for NotifyPaid only.
	Grant Grant
}

// Moves says whether the step changes the order's status.
func (s Step) Moves() bool {
	return s.Outcome == NotifyPaid || s.Outcome == NotifyClosed || s.Outcome == NotifyRefunded
}

// Apply is what the admitted notification n does to o at now
// (doc/payments.md, "Applying a notification"): only a PENDING order
// moves, to PAID on a SUCCESS and to CLOSED on CLOSED or REVOKED; a REFUND
// of a PAID order marks it REFUNDED; a SUCCESS of an order that is not
// PENDING (another transaction than the one that paid it) grants nothing.
// A notification of another channel than o's, and a SUCCESS that did not
// pay o's amount in its currency, are ErrMismatch.
func (o Order) Apply(n topology.PaymentNotify, now time.Time) (Step, error) {
	if o.Channel != n.Channel {
		return Step{}, fmt.Errorf("%w: the order is paid through %s", ErrMismatch, o.Channel)
	}
	if n.TradeState == TradeSuccess {
		if err := o.paidAsOrdered(n); err != nil {
			return Step{}, err
		}
	}
	step := Step{Outcome: NotifyRecorded, Status: o.Status}
	switch {
	case n.TradeState == TradeSuccess && o.Status == Pending:
		grant, err := o.Grant()
		if err != nil {
			return Step{}, err
		}
		paidAt := now
		if t := n.SuccessTime.Time; !t.IsZero() {
			paidAt = t.UTC()
		}
		step = Step{Outcome: NotifyPaid, Status: Paid, PaidAt: paidAt, TransactionID: n.TransactionID, Grant: grant}
	case n.TradeState == TradeSuccess && (o.Status != Paid || o.TransactionID != n.TransactionID):
		step.Outcome = NotifyNotPending
	case (n.TradeState == TradeClosed || n.TradeState == TradeRevoked) && o.Status == Pending:
		step.Outcome, step.Status = NotifyClosed, Closed
	case n.TradeState == TradeRefund && o.Status == Paid:
		step.Outcome, step.Status = NotifyRefunded, Refunded
	}
	return step, nil
}

// paidAsOrdered checks a SUCCESS against its order: the amount and the
// currency the verified callback carried are the order's. A SUCCESS
// without them is refused: the message is then only its publisher's word
// that the order was paid (doc/payments.md, "What the worker trusts"). The
// Spring producer sends neither; its consumer gives such a message the
// amount its rawBody's verified callback says (Proven) before this check.
func (o Order) paidAsOrdered(n topology.PaymentNotify) error {
	switch {
	case n.AmountFen == nil || n.Currency == "":
		return fmt.Errorf("%w: a SUCCESS without amountFen and currency: what was paid is unknown, so nothing is granted", ErrMismatch)
	case *n.AmountFen != o.AmountFen || n.Currency != o.Currency:
		return fmt.Errorf("%w: %d %s paid, the order is %d %s", ErrMismatch, *n.AmountFen, n.Currency, o.AmountFen, o.Currency)
	}
	return nil
}

// A Grant is what a paid order gives its user: a pro month (ExtendPro),
// or a recharge of the order's amount to the agent balance.
type Grant struct {
	ProMonth    bool
	RechargeFen int64
}

// Grant is what o, once paid, gives its user.
func (o Order) Grant() (Grant, error) {
	switch o.Product {
	case ProductProMonth:
		return Grant{ProMonth: true}, nil
	case ProductAgentRecharge:
		return Grant{RechargeFen: o.AmountFen}, nil
	}
	return Grant{}, fmt.Errorf("order %s: unknown product %q", o.OutTradeNo, o.Product)
}

// ExtendPro is the end of a user's pro time after a pro month paid at now:
// ProMonth after the later of now and its current end (nil: none).
func ExtendPro(now time.Time, current *time.Time) time.Time {
	from := now
	if current != nil && current.After(now) {
		from = current.UTC()
	}
	return from.Add(ProMonth)
}
