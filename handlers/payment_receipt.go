package handlers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"gorm.io/gorm"
)

// ReceiptMailer mails the receipt of a paid order, once per order however
// often its message arrives (store.Orders.SendReceiptOnce). The amounts,
// product and times come from the order row, the address from the message.
// A message for an unknown order, one never paid, or an address the mailer
// refuses for good goes to the DLQ; anything else is retried (15 s × 5).
type ReceiptMailer struct {
	orders   *store.Orders
	accounts *store.Accounts
	mailer   mail.Mailer
	log      *slog.Logger
}

// NewReceiptMailer returns the receipt consumer.
func NewReceiptMailer(db *gorm.DB, orders *store.Orders, m mail.Mailer, log *slog.Logger) *ReceiptMailer {
	if db == nil || orders == nil || m == nil || log == nil {
		panic("handlers: NewReceiptMailer: nil dependency")
	}
	return &ReceiptMailer{orders: orders, accounts: store.NewAccounts(db), mailer: m, log: log}
}

func paymentReceiptConsumer(d Backends, log *slog.Logger) *ReceiptMailer {
	return NewReceiptMailer(d.DB, store.NewOrders(d.DB, d.Redis), d.Mailer, log)
}

// Handle mails m's receipt unless it went out before.
func (h *ReceiptMailer) Handle(ctx context.Context, m topology.PaymentReceiptDispatch) error {
	sent, err := h.orders.SendReceiptOnce(ctx, m.OutTradeNo, func(ctx context.Context, o store.PaymentOrder) error {
		return h.send(ctx, m.Email, o)
	})
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, order.ErrNotPaid):
		return messaging.Permanent(err)
	case errors.Is(err, mail.ErrPermanent):
		return messaging.Permanent(err)
	case errors.Is(err, store.ErrOrderLocked):
		return fmt.Errorf("receipt of order %s: another delivery is sending it: %w", m.OutTradeNo, err) // retried: it finds it sent
	case err != nil:
		return err
	}
	if sent {
		h.log.InfoContext(ctx, "receipt sent", "outTradeNo", m.OutTradeNo)
	} else {
		h.log.InfoContext(ctx, "receipt sent before: not again", "outTradeNo", m.OutTradeNo)
	}
	return nil
}

func (h *ReceiptMailer) send(ctx context.Context, to string, o store.PaymentOrder) error {
	r := mail.Receipt{Email: to, OutTradeNo: o.OutTradeNo, ProductCode: o.ProductCode, AmountFen: o.AmountFen,
		Currency: o.Currency, Channel: o.Channel}
	if o.TransactionID != nil {
		r.TransactionID = *o.TransactionID
	}
	if o.PaidAt != nil {
		r.PaidAt = *o.PaidAt
	}
	if o.ProductCode == order.ProductProMonth {
		// "Valid until": the end of the user's pro time as it is now.
		if u, err := h.accounts.Get(ctx, o.Username); err == nil && u.ProExpireAt != nil {
			r.ExpireAt = *u.ProExpireAt
		}
	}
	content, err := mail.RenderReceipt(r)
	if err != nil {
		return messaging.Permanent(err)
	}
	return inSpan(ctx, "mail send", func(ctx context.Context) error {
		return h.mailer.Send(ctx, content.Message(to, "receipt-"+o.OutTradeNo))
	})
}
