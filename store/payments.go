package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eisland/isle/internal/lease"
	"github.com/eisland/isle/internal/sqltx"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The statuses an order moves to from PENDING (doc/payments.md). PENDING → PAID
// and PENDING → CLOSED happen once; PAID → REFUNDED records a refund.
const (
	OrderPaid     = "PAID"
	OrderClosed   = "CLOSED"
	OrderRefunded = "REFUNDED"
)

// ProMonth is what a paid pro-month order adds to the user's pro time,
// from the later of now and its current end.
const ProMonth = 30 * 24 * time.Hour

// The gateways' trade states a notification can carry (WeChat's as sent;
// the API maps Alipay's to these, doc/payments.md).
const (
	TradeSuccess = "SUCCESS"
	TradeClosed  = "CLOSED"
	TradeRevoked = "REVOKED"
	TradeRefund  = "REFUND"
)

// Notify outcomes: what ApplyNotify did, as payment_notify_record.outcome
// holds them (the last two are never stored).
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

// Notifications ApplyNotify refuses for good; a consumer sends them to the
// dead-letter queue.
var (
	// ErrUnverified is a notification whose signature the API did not
	// verify: it never grants anything.
	ErrUnverified = errors.New("store: payment notification not verified")
	// ErrNotifyMismatch is a notification for another channel than the
	// order's, or a SUCCESS whose amount or currency is not the order's,
	// or that carries none.
	ErrNotifyMismatch = errors.New("store: payment notification does not match its order")
	// ErrNotPaid is a receipt asked for an order that was never paid
	// (pending or closed): there is nothing to receipt.
	ErrNotPaid = errors.New("store: the order was never paid")
)

// NotifyResult says what ApplyNotify did.
type NotifyResult struct {
	Outcome string       // one of the Notify outcomes
	Order   PaymentOrder // the order as the notification left it
	// Receipt is the receipt message written to the outbox when the
	// order was paid now and has an address to send it to.
	Receipt *Enqueued
	// NoReceipt says why an order paid now got no receipt message.
	NoReceipt string
	// ProExpireAt is, for a pro month paid now, the new end of the
	// user's pro time.
	ProExpireAt *time.Time
	// Recharge is, for a paid agent recharge, its ledger row (written now
	// or by an earlier delivery), and Settle what settle.lua did with it
	// after the commit ("" when it was settled before).
	Recharge *LedgerEntry
	Settle   string
}

// ApplyNotify applies a verified gateway notification to its order, in
// one transaction that locks the order row (SELECT ... FOR UPDATE), checks
// that a SUCCESS paid the order's amount in its currency (one of another
// amount, or without one, is ErrNotifyMismatch: doc/payments.md, "What the
// worker trusts") and records the notification in payment_notify_record,
// whose unique key
// (channel, order, transaction, state) makes a resent or redelivered one a
// NotifyDuplicate. Only a PENDING order changes: SUCCESS pays it and grants
// its benefit in the same transaction (a pro month extends pro_expire_at;
// a recharge writes its RECHARGE ledger row and balance through the credit
// operation, the order number as its id) and writes the receipt message
// for receipts (its domain) to the outbox; CLOSED (or REVOKED) closes it;
// REFUND of a PAID order marks it REFUNDED. NOTPAY and other in-progress
// states change nothing and are not recorded.
//
// After the commit a recharge is credited to the Redis balance, at most
// once (SettleCredit); an error there leaves the notification applied and
// the credit unsettled, and calling again (a redelivery) settles it. A paid
// SUCCESS also sets payment:notify:done (30 days), which answers later
// copies without a transaction.
func (o *Orders) ApplyNotify(ctx context.Context, n topology.PaymentNotify, receipts topology.Domain, traceID string) (NotifyResult, error) {
	if !n.VerifyOK {
		return NotifyResult{}, fmt.Errorf("%w: %s order %s, %s", ErrUnverified, n.Channel, n.OutTradeNo, n.TradeState)
	}
	if err := n.Validate(); err != nil {
		return NotifyResult{}, err
	}
	switch n.TradeState {
	case TradeSuccess, TradeClosed, TradeRevoked, TradeRefund:
	default:
		return NotifyResult{Outcome: NotifyIgnored}, nil
	}
	rc := o.r.Client(keys.NotifyDone.DB)
	done := ""
	if n.TradeState == TradeSuccess && n.TransactionID != "" {
		done = o.r.Keys().Key(keys.NotifyDone, n.Channel, n.OutTradeNo, n.TransactionID)
		if v, err := rc.Get(ctx, done).Result(); err == nil && v == "1" {
			return NotifyResult{Outcome: NotifyDuplicate}, nil
		} else if err != nil && !errors.Is(err, redis.Nil) {
			done = "" // Redis is down: MySQL answers alone
		}
	}

	var res NotifyResult
	err := sqltx.Transact(ctx, o.db, func(tx *gorm.DB) error {
		res = NotifyResult{}
		return applyNotifyTx(tx, o.now().UTC(), n, receipts, traceID, &res)
	})
	if err != nil {
		return NotifyResult{}, fmt.Errorf("store: apply %s notification of order %s (%s): %w", n.Channel, n.OutTradeNo, n.TradeState, err)
	}
	if r := res.Recharge; r != nil && r.SettledAt == nil {
		res.Settle, err = NewBalances(o.db, o.r).SettleCredit(ctx, *r)
		if err != nil {
			return res, err
		}
	}
	if done != "" && res.Order.Status != OrderPending {
		_ = rc.Set(ctx, done, "1", keys.PaymentNotifyTTL).Err() // a shortcut only: MySQL has the record
	}
	return res, nil
}

// applyNotifyTx is ApplyNotify's transaction.
func applyNotifyTx(tx *gorm.DB, now time.Time, n topology.PaymentNotify, receipts topology.Domain, traceID string, res *NotifyResult) error {
	var order PaymentOrder
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("out_trade_no = ?", n.OutTradeNo).Take(&order).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fmt.Errorf("order %s: %w", n.OutTradeNo, ErrNotFound)
	}
	if err != nil {
		return err
	}
	if order.Channel != n.Channel {
		return fmt.Errorf("%w: the order is paid through %s", ErrNotifyMismatch, order.Channel)
	}
	if n.TradeState == TradeSuccess {
		if err := paidAsOrdered(n, order); err != nil {
			return err
		}
	}
	res.Order = order

	outcome := NotifyRecorded
	switch {
	case n.TradeState == TradeSuccess && order.Status == OrderPending:
		outcome = NotifyPaid
	case n.TradeState == TradeSuccess && (order.Status != OrderPaid || deref(order.TransactionID) != n.TransactionID):
		outcome = NotifyNotPending
	case (n.TradeState == TradeClosed || n.TradeState == TradeRevoked) && order.Status == OrderPending:
		outcome = NotifyClosed
	case n.TradeState == TradeRefund && order.Status == OrderPaid:
		outcome = NotifyRefunded
	}
	rec := PaymentNotifyRecord{Channel: n.Channel, OutTradeNo: n.OutTradeNo, TransactionID: n.TransactionID,
		TradeState: n.TradeState, NotifyID: n.NotifyID, VerifyOK: true, Outcome: outcome, CreatedAt: now}
	if n.RawBody != "" {
		rec.RawBody = &n.RawBody
	}
	ins := tx.Omit("id").Clauses(clause.OnConflict{DoNothing: true}).Create(&rec)
	if ins.Error != nil {
		return ins.Error
	}
	if ins.RowsAffected == 0 {
		res.Outcome = NotifyDuplicate
		return rechargeOf(tx, order, res)
	}
	res.Outcome = outcome

	switch outcome {
	case NotifyPaid:
		paidAt := now
		if t := n.SuccessTime.Time; !t.IsZero() {
			paidAt = t.UTC()
		}
		order.Status, order.PaidAt, order.TransactionID = OrderPaid, &paidAt, &n.TransactionID
	case NotifyClosed:
		order.Status = OrderClosed
	case NotifyRefunded:
		order.Status = OrderRefunded
	default:
		return rechargeOf(tx, order, res)
	}
	order.UpdatedAt = now
	if err := tx.Model(&order).Select("status", "paid_at", "transaction_id", "updated_at").Updates(&order).Error; err != nil {
		return err
	}
	res.Order = order
	if outcome != NotifyPaid {
		return nil
	}
	if err := grant(tx, now, order, res); err != nil {
		return err
	}
	return queueReceipt(tx, order, receipts, traceID, res)
}

// paidAsOrdered checks a SUCCESS against its order: the amount and the
// currency the verified callback carried are the order's. A SUCCESS
// without them (the Spring producer sends neither) is refused: the
// message is then only its publisher's word that the order was paid
// (doc/payments.md).
func paidAsOrdered(n topology.PaymentNotify, order PaymentOrder) error {
	switch {
	case n.AmountFen == nil || n.Currency == "":
		return fmt.Errorf("%w: a SUCCESS without amountFen and currency: what was paid is unknown, so nothing is granted", ErrNotifyMismatch)
	case *n.AmountFen != order.AmountFen || n.Currency != order.Currency:
		return fmt.Errorf("%w: %d %s paid, the order is %d %s", ErrNotifyMismatch, *n.AmountFen, n.Currency, order.AmountFen, order.Currency)
	}
	return nil
}

// grant gives the user of a paid order what it bought.
func grant(tx *gorm.DB, now time.Time, order PaymentOrder, res *NotifyResult) error {
	if err := openAccount(tx, order.Username); err != nil {
		return err
	}
	switch order.ProductCode {
	case ProductProMonth:
		var u UserAccount
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Select("id", "pro_expire_at").
			Where("username = ?", order.Username).Take(&u).Error; err != nil {
			return err
		}
		from := now
		if u.ProExpireAt != nil && u.ProExpireAt.After(now) {
			from = u.ProExpireAt.UTC()
		}
		until := from.Add(ProMonth)
		res.ProExpireAt = &until
		return tx.Model(&UserAccount{}).Where("id = ?", u.ID).Update("pro_expire_at", until).Error
	case ProductAgentRecharge:
		row, _, err := creditTx(tx, Credit{Username: order.Username, ID: order.OutTradeNo, Amount: decimal.NewFromInt(order.AmountFen),
			Reason: "recharge order " + order.OutTradeNo + " paid through " + order.Channel, Source: "payment"})
		if err != nil {
			return err
		}
		res.Recharge = &row
		return nil
	}
	return fmt.Errorf("order %s: unknown product %q", order.OutTradeNo, order.ProductCode)
}

// openAccount makes the user_account row of a user who paid before having
// one: the payment is theirs either way.
func openAccount(tx *gorm.DB, username string) error {
	return tx.Omit("created_at", "updated_at", "pro_expire_at", "email").
		Clauses(clause.OnConflict{DoNothing: true}).Create(&UserAccount{Username: username}).Error
}

// rechargeOf reads the ledger row of a paid recharge that an earlier
// delivery wrote, so ApplyNotify can finish its Redis side.
func rechargeOf(tx *gorm.DB, order PaymentOrder, res *NotifyResult) error {
	if order.ProductCode != ProductAgentRecharge || (order.Status != OrderPaid && order.Status != OrderRefunded) {
		return nil
	}
	var rows []LedgerEntry
	err := tx.Where("username = ? AND kind = ? AND entry_id = ?", order.Username, LedgerRecharge, order.OutTradeNo).Limit(1).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return err
	}
	res.Recharge = &rows[0]
	return nil
}

// queueReceipt writes the receipt message of a paid order to the outbox,
// to the order's receipt address or else the account's email; an order
// with neither gets no receipt.
func queueReceipt(tx *gorm.DB, order PaymentOrder, receipts topology.Domain, traceID string, res *NotifyResult) error {
	email := deref(order.ReceiptEmail)
	if email == "" {
		var u UserAccount
		if err := tx.Select("email").Where("username = ?", order.Username).Take(&u).Error; err != nil {
			return err
		}
		email = deref(u.Email)
	}
	if email == "" {
		res.NoReceipt = "neither the order nor the account has an email address"
		return nil
	}
	amount := int32(order.AmountFen) // RechargeMaxFen and prices fit
	m := topology.PaymentReceiptDispatch{TraceID: traceID, Email: email, OutTradeNo: order.OutTradeNo, Channel: order.Channel,
		TransactionID: deref(order.TransactionID), AmountFen: &amount, Currency: order.Currency, ProductCode: order.ProductCode,
		PaidAt: topology.LocalDateTime{Time: *order.PaidAt}, ExpireAt: topology.LocalDateTime{Time: order.ExpireAt}}
	if err := m.Validate(); err != nil {
		res.NoReceipt = "the receipt cannot be sent: " + err.Error() // an account email from before validation
		return nil
	}
	e, err := EnqueueMessage(tx, receipts, m, "payment-receipt:"+order.OutTradeNo, traceID, 0)
	if err != nil {
		return err
	}
	res.Receipt = &e
	return nil
}

// SendReceiptOnce calls send with the order numbered outTradeNo unless its
// receipt went out already (or the order was never paid: ErrNotPaid), and
// records the send when send returns nil:
// one receipt per order however often its message arrives. It holds the
// order's op-lock (payment:order:op-lock, SET NX with a UUID, released by
// compare-and-delete) meanwhile, so two deliveries at once send once; the
// second gets ErrOrderLocked, and finds the receipt sent when it retries.
// send must return within keys.PaymentLockTTL. A crash between the send
// and the record sends it again: the mailer's idempotency key, where the
// provider has one, catches that.
func (o *Orders) SendReceiptOnce(ctx context.Context, outTradeNo string, send func(context.Context, PaymentOrder) error) (sent bool, err error) {
	c := o.r.Client(keys.OrderOpLock.DB)
	lock, err := lease.Acquire(ctx, c, o.r.Keys().Key(keys.OrderOpLock, outTradeNo), keys.PaymentLockTTL)
	switch {
	case errors.Is(err, lease.ErrHeld):
		return false, ErrOrderLocked
	case err != nil:
		return false, fmt.Errorf("store: order %s op-lock: %w", outTradeNo, err)
	}
	defer lock.ReleaseDetached(ctx)
	order, err := o.Get(ctx, outTradeNo)
	if err != nil {
		return false, err
	}
	if order.ReceiptSentAt != nil {
		return false, nil
	}
	if order.PaidAt == nil { // the receipt is written with the payment: a message that came otherwise
		return false, fmt.Errorf("%w: order %s is %s", ErrNotPaid, outTradeNo, order.Status)
	}
	sctx, cancel := context.WithTimeout(ctx, keys.PaymentLockTTL-time.Second)
	defer cancel()
	if err := send(sctx, order); err != nil {
		return false, err
	}
	now := o.now().UTC()
	err = o.db.WithContext(context.WithoutCancel(ctx)).Model(&PaymentOrder{}).
		Where("out_trade_no = ? AND receipt_sent_at IS NULL", outTradeNo).Update("receipt_sent_at", now).Error
	if err != nil {
		return true, fmt.Errorf("store: receipt of order %s sent; recording it failed: %w", outTradeNo, err)
	}
	return true, nil
}
