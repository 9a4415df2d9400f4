package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
)

// PaymentProofs verifies the gateway callback a PaymentNotifyMessage
// carries in rawBody and returns the message the callback proves
// (paynotify.Gateways, which the worker builds from the gateways' keys).
type PaymentProofs interface {
	VerifyRecord(channel, rawBody string) (topology.PaymentNotify, error)
}

// NoticeApplier applies verified gateway notifications to their orders
// (doc/payments.md, store.Orders.ApplyNotify): one transition per order, from
// PENDING only (order.Order.Apply decides it), the benefit granted and the
// receipt queued in the same transaction, a recharge credited to the Redis
// balance after the commit. A SUCCESS without its amount (the Spring
// producer's) is granted only what the callback in its rawBody proves,
// verified with the gateways' keys (order.NeedsProof, order.Proven). A
// notification that was not verified, names an unknown order or another
// channel, is a SUCCESS of another amount than the order's, or lacks the
// amount and has no callback that verifies goes to the DLQ; anything else
// that fails is retried (15 s × 5).
type NoticeApplier struct {
	orders   *store.Orders
	proofs   PaymentProofs
	receipts topology.Domain
	log      *slog.Logger
}

// NewNoticeApplier returns the notify consumer; receipts is the domain its
// receipt messages go to, proofs what verifies the callback of a SUCCESS
// without its amount (nil: nothing does, and such a SUCCESS is refused).
func NewNoticeApplier(orders *store.Orders, proofs PaymentProofs, receipts topology.Domain, log *slog.Logger) *NoticeApplier {
	if orders == nil || log == nil || receipts.Name == "" {
		panic("handlers: NewNoticeApplier: nil dependency")
	}
	return &NoticeApplier{orders: orders, proofs: proofs, receipts: receipts, log: log}
}

func paymentNotifyConsumer(d Backends, log *slog.Logger) *NoticeApplier {
	return NewNoticeApplier(store.NewOrders(d.DB, d.Redis), d.Payments, d.domain(topology.DomainPaymentReceipt), log)
}

// Handle applies m.
func (h *NoticeApplier) Handle(ctx context.Context, m topology.PaymentNotify) error {
	if order.NeedsProof(m) {
		proven, err := h.prove(m)
		if err != nil {
			h.log.ErrorContext(ctx, "payment notification refused", "channel", m.Channel, "outTradeNo", m.OutTradeNo, "err", err)
			return messaging.Permanent(err)
		}
		m = proven
	}
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

// prove is the notification a SUCCESS without its amount stands for: the
// one its rawBody's callback proves, or an error that refuses it for good
// (order.ErrUnproven, order.ErrMismatch), naming the order.
func (h *NoticeApplier) prove(m topology.PaymentNotify) (topology.PaymentNotify, error) {
	if h.proofs == nil {
		return m, fmt.Errorf("%w: %s order %s: this worker has no gateway keys to verify rawBody with", order.ErrUnproven, m.Channel, m.OutTradeNo)
	}
	if m.RawBody == "" {
		return m, fmt.Errorf("%w: %s order %s: rawBody is empty", order.ErrUnproven, m.Channel, m.OutTradeNo)
	}
	proof, err := h.proofs.VerifyRecord(m.Channel, m.RawBody)
	if err != nil {
		return m, fmt.Errorf("%w: %s order %s: rawBody: %w", order.ErrUnproven, m.Channel, m.OutTradeNo, err)
	}
	proven, err := order.Proven(m, proof)
	if err != nil {
		return m, fmt.Errorf("%s order %s: %w", m.Channel, m.OutTradeNo, err)
	}
	return proven, nil
}
