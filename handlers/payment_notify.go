package handlers

import (
	"context"
	"errors"
	"log/slog"

	"github.com/eisland/isle/internal/messaging"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
)

// NoticeApplier applies verified gateway notifications to their orders
// (doc/payments.md, store.Orders.ApplyNotify): one transition per order, from
// PENDING only (order.Order.Apply decides it), the benefit granted and the
// receipt queued in the same transaction, a recharge credited to the Redis
// balance after the commit. A notification that was not verified, names an
// unknown order or another channel, or is a SUCCESS of another amount than
// the order's (or of none) goes to the DLQ; anything else that fails is
// retried (15 s × 5).
type NoticeApplier struct {
	orders   *store.Orders
	receipts topology.Domain
	log      *slog.Logger
}

// NewNoticeApplier returns the notify consumer; receipts is the domain its
// receipt messages go to.
func NewNoticeApplier(orders *store.Orders, receipts topology.Domain, log *slog.Logger) *NoticeApplier {
	if orders == nil || log == nil || receipts.Name == "" {
		panic("handlers: NewNoticeApplier: nil dependency")
	}
	return &NoticeApplier{orders: orders, receipts: receipts, log: log}
}

func paymentNotifyConsumer(d Deps, log *slog.Logger) messaging.HandlerFunc {
	h := NewNoticeApplier(store.NewOrders(d.DB, d.Redis), d.domain(topology.DomainPaymentReceipt), log)
	return messaging.Typed(h.Handle)
}

// Handle applies m.
func (h *NoticeApplier) Handle(ctx context.Context, m topology.PaymentNotify) error {
	d, _ := messaging.DeliveryFrom(ctx) // its trace id goes on to the receipt
	res, err := h.orders.ApplyNotify(ctx, m, h.receipts, d.TraceID)
	if errors.Is(err, order.ErrUnverified) || errors.Is(err, order.ErrMismatch) || errors.Is(err, store.ErrNotFound) {
		h.log.ErrorContext(ctx, "payment notification refused", "channel", m.Channel, "outTradeNo", m.OutTradeNo, "err", err)
		return messaging.Permanent(err)
	}
	if err != nil {
		return err
	}
	attrs := []any{"channel", m.Channel, "outTradeNo", m.OutTradeNo, "transactionId", m.TransactionID,
		"tradeState", m.TradeState, "outcome", res.Outcome, "status", res.Order.Status}
	switch res.Outcome {
	case order.NotifyPaid:
		if res.ProExpireAt != nil {
			attrs = append(attrs, "proExpireAt", res.ProExpireAt)
		}
		if res.Recharge != nil {
			attrs = append(attrs, "rechargeFen", res.Recharge.AmountFen.String(), "settle", res.Settle)
		}
		if res.NoReceipt != "" {
			attrs = append(attrs, "noReceipt", res.NoReceipt)
		}
		h.log.InfoContext(ctx, "order paid", attrs...)
	case order.NotifyNotPending:
		h.log.ErrorContext(ctx, "payment for an order that is not pending: nothing granted, refund it by hand", attrs...)
	case order.NotifyRefunded:
		h.log.WarnContext(ctx, "order refunded: its benefit is not taken back automatically", attrs...)
	default:
		h.log.InfoContext(ctx, "payment notification", attrs...)
	}
	return nil
}
