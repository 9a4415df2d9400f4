package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eisland/isle/internal/kit/lease"
	"github.com/eisland/isle/internal/kit/sqltx"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
	"github.com/redis/go-redis/v9"
	"github.com/shopspring/decimal"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// NotifyResult says what ApplyNotify did.
type NotifyResult struct {
	Outcome string       // one of the Notify outcomes (order.Notify*)
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
// one transaction that locks the order row (SELECT ... FOR UPDATE), and
// records the notification in payment_notify_record, whose unique key
// (channel, order, transaction, state) makes a resent or redelivered one a
// order.NotifyDuplicate. What the notification does is order's rules: order.Admit
// (an unverified one is order.ErrUnverified; NOTPAY and other in-progress states
// change nothing and are not recorded) and Order.Apply (a notification of
// another channel, or a SUCCESS that did not pay the order's amount in its
// currency, is order.ErrMismatch: doc/payments.md, "What the worker
// trusts"; only a PENDING order is paid or closed, only a PAID one
// refunded). ApplyNotify persists the step: the order's new status, and
// for a payment its benefit in the same transaction (a pro month extends
// pro_expire_at; a recharge writes its RECHARGE ledger row and balance
// through the credit operation, the order number as its id) and the
// receipt message for receipts (its domain) in the outbox.
//
// After the commit a recharge is credited to the Redis balance, at most
// once (SettleCredit); an error there leaves the notification applied and
// the credit unsettled, and calling again (a redelivery) settles it. A paid
// SUCCESS also sets payment:notify:done (30 days), which answers later
// copies without a transaction.
func (o *Orders) ApplyNotify(ctx context.Context, n topology.PaymentNotify, receipts topology.Domain, traceID string) (NotifyResult, error) {
	if ok, err := order.Admit(n); err != nil {
		return NotifyResult{}, err
	} else if !ok {
		return NotifyResult{Outcome: order.NotifyIgnored}, nil
	}
	rc := o.r.Client(keys.NotifyDone.DB)
	done := ""
	if n.TradeState == order.TradeSuccess && n.TransactionID != "" {
		done = o.r.Keys().Key(keys.NotifyDone, n.Channel, n.OutTradeNo, n.TransactionID)
		if v, err := rc.Get(ctx, done).Result(); err == nil && v == "1" {
			return NotifyResult{Outcome: order.NotifyDuplicate}, nil
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
	if done != "" && res.Order.Status != order.Pending {
		_ = rc.Set(ctx, done, "1", keys.PaymentNotifyTTL).Err() // a shortcut only: MySQL has the record
	}
	return res, nil
}

// applyNotifyTx is ApplyNotify's transaction.
func applyNotifyTx(tx *gorm.DB, now time.Time, n topology.PaymentNotify, receipts topology.Domain, traceID string, res *NotifyResult) error {
	var row PaymentOrder
	err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Where("out_trade_no = ?", n.OutTradeNo).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return fmt.Errorf("order %s: %w", n.OutTradeNo, ErrNotFound)
	}
	if err != nil {
		return err
	}
	step, err := row.rules().Apply(n, now)
	if err != nil {
		return err
	}
	res.Order = row

	rec := PaymentNotifyRecord{Channel: n.Channel, OutTradeNo: n.OutTradeNo, TransactionID: n.TransactionID,
		TradeState: n.TradeState, NotifyID: n.NotifyID, VerifyOK: true, Outcome: step.Outcome, CreatedAt: now}
	if n.RawBody != "" {
		rec.RawBody = &n.RawBody
	}
	ins := tx.Omit("id").Clauses(clause.OnConflict{DoNothing: true}).Create(&rec)
	if ins.Error != nil {
		return ins.Error
	}
	if ins.RowsAffected == 0 {
		res.Outcome = order.NotifyDuplicate
		return rechargeOf(tx, row, res)
	}
	res.Outcome = step.Outcome
	if !step.Moves() {
		return rechargeOf(tx, row, res)
	}

	row.Status = step.Status
	if step.Outcome == order.NotifyPaid {
		row.PaidAt, row.TransactionID = &step.PaidAt, &step.TransactionID
	}
	row.UpdatedAt = now
	if err := tx.Model(&row).Select("status", "paid_at", "transaction_id", "updated_at").Updates(&row).Error; err != nil {
		return err
	}
	res.Order = row
	if step.Outcome != order.NotifyPaid {
		return nil
	}
	if err := grant(tx, now, row, step.Grant, res); err != nil {
		return err
	}
	return queueReceipt(tx, row, receipts, traceID, res)
}

// grant gives the user of a paid order what it bought (order.Grant).
func grant(tx *gorm.DB, now time.Time, row PaymentOrder, g order.Grant, res *NotifyResult) error {
	if err := openAccount(tx, row.Username); err != nil {
		return err
	}
	switch {
	case g.ProMonth:
		var u UserAccount
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Select("id", "pro_expire_at").
			Where("username = ?", row.Username).Take(&u).Error; err != nil {
			return err
		}
		until := order.ExtendPro(now, u.ProExpireAt)
		res.ProExpireAt = &until
		return tx.Model(&UserAccount{}).Where("id = ?", u.ID).Update("pro_expire_at", until).Error
	case g.RechargeFen > 0:
		entry, _, err := creditTx(tx, Credit{Username: row.Username, ID: row.OutTradeNo, Amount: decimal.NewFromInt(g.RechargeFen),
			Reason: "recharge order " + row.OutTradeNo + " paid through " + row.Channel, Source: "payment"})
		if err != nil {
			return err
		}
		res.Recharge = &entry
		return nil
	}
	return fmt.Errorf("order %s grants nothing", row.OutTradeNo)
}

// openAccount makes the user_account row of a user who paid before having
// one: the payment is theirs either way.
func openAccount(tx *gorm.DB, username string) error {
	return tx.Omit("created_at", "updated_at", "pro_expire_at", "email").
		Clauses(clause.OnConflict{DoNothing: true}).Create(&UserAccount{Username: username}).Error
}

// rechargeOf reads the ledger row of a paid recharge that an earlier
// delivery wrote, so ApplyNotify can finish its Redis side.
func rechargeOf(tx *gorm.DB, row PaymentOrder, res *NotifyResult) error {
	if !row.rules().Recharged() {
		return nil
	}
	var rows []LedgerEntry
	err := tx.Where("username = ? AND kind = ? AND entry_id = ?", row.Username, LedgerRecharge, row.OutTradeNo).Limit(1).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return err
	}
	res.Recharge = &rows[0]
	return nil
}

// queueReceipt writes the receipt message of a paid order to the outbox,
// to the order's receipt address or else the account's email; an order
// with neither gets no receipt.
func queueReceipt(tx *gorm.DB, row PaymentOrder, receipts topology.Domain, traceID string, res *NotifyResult) error {
	email := deref(row.ReceiptEmail)
	if email == "" {
		var u UserAccount
		if err := tx.Select("email").Where("username = ?", row.Username).Take(&u).Error; err != nil {
			return err
		}
		email = deref(u.Email)
	}
	if email == "" {
		res.NoReceipt = "neither the order nor the account has an email address"
		return nil
	}
	amount := int32(row.AmountFen) // order.RechargeMaxFen and prices fit
	m := topology.PaymentReceiptDispatch{TraceID: traceID, Email: email, OutTradeNo: row.OutTradeNo, Channel: row.Channel,
		TransactionID: deref(row.TransactionID), AmountFen: &amount, Currency: row.Currency, ProductCode: row.ProductCode,
		PaidAt: topology.LocalDateTime{Time: *row.PaidAt}, ExpireAt: topology.LocalDateTime{Time: row.ExpireAt}}
	if err := m.Validate(); err != nil {
		res.NoReceipt = "the receipt cannot be sent: " + err.Error() // an account email from before validation
		return nil
	}
	e, err := EnqueueMessage(tx, receipts, m, "payment-receipt:"+row.OutTradeNo, traceID, 0)
	if err != nil {
		return err
	}
	res.Receipt = &e
	return nil
}

// SendReceiptOnce calls send with the order numbered outTradeNo unless its
// receipt went out already (or the order was never paid: order.ErrNotPaid), and
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
	row, err := o.Get(ctx, outTradeNo)
	if err != nil {
		return false, err
	}
	if row.ReceiptSentAt != nil {
		return false, nil
	}
	if row.PaidAt == nil { // the receipt is written with the payment: a message that came otherwise
		return false, fmt.Errorf("%w: order %s is %s", order.ErrNotPaid, outTradeNo, row.Status)
	}
	sctx, cancel := context.WithTimeout(ctx, keys.PaymentLockTTL-time.Second)
	defer cancel()
	if err := send(sctx, row); err != nil {
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
