package handlers_test

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eisland/isle/handlers"
	"github.com/eisland/isle/internal/kit/mail"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/storetest"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

// countingMailer counts the sends that reach the real mailer it wraps.
type countingMailer struct {
	mail.Mailer
	sends atomic.Int32
}

func (c *countingMailer) Send(ctx context.Context, m mail.Message) error {
	c.sends.Add(1)
	return c.Mailer.Send(ctx, m)
}

func TestPaidOrderGetsOneReceiptWhateverTheDeliveries(t *testing.T) {
	db, rdb := storetest.MySQL(t), storetest.Redis(t)
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	receipts, _ := tp.Domain(topology.DomainPaymentReceipt)
	orders := store.NewOrders(db, rdb)
	o, err := orders.Create(t.Context(), order.New{Username: "pat", Product: order.ProductAgentRecharge, AmountFen: 2500,
		Channel: order.ChannelAlipay, ReceiptEmail: "pat@example.com"})
	require.NoError(t, err)

	notify := handlers.NewNoticeApplier(orders, nil, receipts, quiet)
	paid := o.AmountFen
	n := topology.PaymentNotify{NotifyID: "nid-1", Channel: order.ChannelAlipay, OutTradeNo: o.OutTradeNo, TransactionID: "2026120122001",
		TradeState: order.TradeSuccess, VerifyOK: true, SuccessTime: topology.OffsetDateTime{Time: time.Now()}, AmountFen: &paid, Currency: "CNY"}
	var wg sync.WaitGroup
	for range 2 { // the gateway's callback twice at once
		wg.Go(func() { require.NoError(t, notify.Handle(context.Background(), n)) })
	}
	wg.Wait()
	got, err := orders.Get(t.Context(), o.OutTradeNo)
	require.NoError(t, err)
	require.Equal(t, order.Paid, got.Status)

	var rows []store.OutboxMessage
	require.NoError(t, db.Where("domain = ?", topology.DomainPaymentReceipt).Find(&rows).Error)
	require.Len(t, rows, 1, "one transition, one receipt message")
	m, err := topology.Decode[topology.PaymentReceiptDispatch](rows[0].Payload)
	require.NoError(t, err)
	require.Equal(t, "pat@example.com", m.Email)
	require.EqualValues(t, 2500, *m.AmountFen)
	require.Equal(t, "2026120122001", m.TransactionID)

	dir := t.TempDir()
	fm, err := mail.Open("file://"+dir+"?from=no-reply%40isle.test", mail.Options{})
	require.NoError(t, err)
	mailer := &countingMailer{Mailer: fm}
	receipt := handlers.NewReceiptMailer(db, orders, mailer, quiet)
	var failed atomic.Int32
	for range 3 { // the relay published it more than once
		wg.Go(func() {
			if err := receipt.Handle(context.Background(), m); err != nil {
				require.False(t, messaging.IsPermanent(err), "another delivery holding the order is retried: %v", err)
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	require.NoError(t, receipt.Handle(t.Context(), m), "a retry finds the receipt sent")
	require.EqualValues(t, 1, mailer.sends.Load(), "one receipt mail; %d deliveries found the order locked", failed.Load())
	files, err := filepath.Glob(filepath.Join(dir, "*.eml"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	raw, err := os.ReadFile(files[0])
	require.NoError(t, err)
	require.Contains(t, string(raw), "To: <pat@example.com>")
	require.Contains(t, string(raw), o.OutTradeNo)
	require.Contains(t, string(raw), "2026120122001")
}

func TestPaymentMessagesRefusedForGood(t *testing.T) {
	db, rdb := storetest.MySQL(t), storetest.Redis(t)
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	receipts, _ := tp.Domain(topology.DomainPaymentReceipt)
	orders := store.NewOrders(db, rdb)
	o, err := orders.Create(t.Context(), order.New{Username: "una", Product: order.ProductAgentRecharge, AmountFen: 100,
		Channel: order.ChannelWechat})
	require.NoError(t, err)
	notify := handlers.NewNoticeApplier(orders, nil, receipts, quiet)

	paid := o.AmountFen
	n := topology.PaymentNotify{Channel: order.ChannelWechat, OutTradeNo: o.OutTradeNo, TransactionID: "42", TradeState: order.TradeSuccess,
		AmountFen: &paid, Currency: "CNY"}
	err = notify.Handle(t.Context(), n)
	require.True(t, messaging.IsPermanent(err), "verifyOk=false never grants, and retrying cannot change that: %v", err)
	n.VerifyOK, n.OutTradeNo = true, "no-such-order"
	require.True(t, messaging.IsPermanent(notify.Handle(t.Context(), n)))
	n.OutTradeNo, n.Channel = o.OutTradeNo, order.ChannelAlipay
	require.True(t, messaging.IsPermanent(notify.Handle(t.Context(), n)))
	// Not what the order costs, or no amount at all (a Spring producer's
	// message): refused for good, the order left as it was.
	n.Channel = order.ChannelWechat
	other := paid + 1
	n.AmountFen = &other
	require.True(t, messaging.IsPermanent(notify.Handle(t.Context(), n)))
	n.AmountFen, n.Currency = nil, ""
	err = notify.Handle(t.Context(), n)
	require.True(t, messaging.IsPermanent(err), "%v", err)
	require.ErrorIs(t, err, order.ErrUnproven, "no callback in rawBody, and no keys to verify one")
	got, err := orders.Get(t.Context(), o.OutTradeNo)
	require.NoError(t, err)
	require.Equal(t, order.Pending, got.Status)

	dir := t.TempDir()
	fm, err := mail.Open("file://"+dir+"?from=no-reply%40isle.test", mail.Options{})
	require.NoError(t, err)
	receipt := handlers.NewReceiptMailer(db, orders, fm, quiet)
	err = receipt.Handle(t.Context(), topology.PaymentReceiptDispatch{Email: "una@example.com", OutTradeNo: "no-such-order"})
	require.True(t, messaging.IsPermanent(err), "%v", err)

	// A receipt of an order never paid is refused for good, and not mailed.
	err = receipt.Handle(t.Context(), topology.PaymentReceiptDispatch{Email: "una@example.com", OutTradeNo: o.OutTradeNo})
	require.True(t, messaging.IsPermanent(err), "%v", err)
	require.ErrorIs(t, err, order.ErrNotPaid)
	files, err := filepath.Glob(filepath.Join(dir, "*.eml"))
	require.NoError(t, err)
	require.Empty(t, files)
	got, err = orders.Get(t.Context(), o.OutTradeNo)
	require.NoError(t, err)
	require.Nil(t, got.ReceiptSentAt)
}
