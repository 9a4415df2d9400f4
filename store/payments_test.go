package store_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// payFixture is the payment store with a receipt domain and helpers.
type payFixture struct {
	orders   *store.Orders
	db       *gorm.DB
	r        *store.Redis
	receipts topology.Domain
}

func newPayFixture(t *testing.T) payFixture {
	t.Helper()
	orders, db, r := newOrders(t)
	tp, err := topology.New(topology.Config{})
	require.NoError(t, err)
	d, ok := tp.Domain(topology.DomainPaymentReceipt)
	require.True(t, ok)
	return payFixture{orders: orders, db: db, r: r, receipts: d}
}

func (f payFixture) order(t *testing.T, user, product string, fen int64, email string) store.PaymentOrder {
	t.Helper()
	o, err := f.orders.Create(t.Context(), order.New{Username: user, Product: product, AmountFen: fen,
		Channel: order.ChannelWechat, ReceiptEmail: email})
	require.NoError(t, err)
	return o
}

func (f payFixture) apply(t *testing.T, o store.PaymentOrder, state, txID string) store.NotifyResult {
	t.Helper()
	res, err := f.orders.ApplyNotify(t.Context(), notice(o, state, txID), f.receipts, "trace-1")
	require.NoError(t, err)
	return res
}

// notice is a verified notification of o in state; a SUCCESS carries the
// order's amount and currency, as the API publishes it.
func notice(o store.PaymentOrder, state, txID string) topology.PaymentNotify {
	n := topology.PaymentNotify{NotifyID: "n-" + txID + "-" + state, Channel: o.Channel, OutTradeNo: o.OutTradeNo,
		TransactionID: txID, TradeState: state, VerifyOK: true, RawBody: `{"id":"x"}`,
		SuccessTime: topology.OffsetDateTime{Time: time.Now().Add(-time.Second)}}
	if state == order.TradeSuccess {
		fen := o.AmountFen
		n.AmountFen, n.Currency = &fen, o.Currency
	}
	return n
}

func (f payFixture) count(t *testing.T, model any, where string, args ...any) int64 {
	t.Helper()
	var n int64
	require.NoError(t, f.db.Model(model).Where(where, args...).Count(&n).Error)
	return n
}

func (f payFixture) status(t *testing.T, o store.PaymentOrder) string {
	t.Helper()
	got, err := f.orders.Get(t.Context(), o.OutTradeNo)
	require.NoError(t, err)
	return got.Status
}

func TestPaidProMonthExtendsProTimeOnceAndQueuesOneReceipt(t *testing.T) {
	t.Parallel()
	f := newPayFixture(t)
	_, err := store.NewAccounts(f.db).Create(t.Context(), "pia", "pia@example.com", decimal.Zero)
	require.NoError(t, err)
	later := time.Now().Add(10 * 24 * time.Hour).UTC().Truncate(time.Microsecond)
	require.NoError(t, f.db.Model(&store.UserAccount{}).Where("username = ?", "pia").Update("pro_expire_at", later).Error)

	o := f.order(t, "pia", order.ProductProMonth, order.ProMonthPriceDefaultFen, "")
	res := f.apply(t, o, order.TradeSuccess, "wx-1")
	require.Equal(t, order.NotifyPaid, res.Outcome)
	require.Equal(t, order.Paid, res.Order.Status)
	require.Equal(t, "wx-1", *res.Order.TransactionID)
	require.NotNil(t, res.Order.PaidAt)
	require.NotNil(t, res.Receipt, "the account's email gets the receipt: %s", res.NoReceipt)
	require.True(t, res.Receipt.Added)

	acct, err := store.NewAccounts(f.db).Get(t.Context(), "pia")
	require.NoError(t, err)
	require.True(t, acct.ProExpireAt.Equal(later.Add(order.ProMonth)), "a month from the current end, not from now: %v", acct.ProExpireAt)

	again := f.apply(t, o, order.TradeSuccess, "wx-1")
	require.Equal(t, order.NotifyDuplicate, again.Outcome)
	acct2, err := store.NewAccounts(f.db).Get(t.Context(), "pia")
	require.NoError(t, err)
	require.True(t, acct.ProExpireAt.Equal(*acct2.ProExpireAt), "granted once")
	require.EqualValues(t, 1, f.count(t, &store.OutboxMessage{}, "domain = ?", topology.DomainPaymentReceipt))
	require.EqualValues(t, 1, f.count(t, &store.PaymentNotifyRecord{}, "out_trade_no = ?", o.OutTradeNo))

	// The Redis shortcut gone, MySQL alone still says duplicate.
	f.r.Client(keys.NotifyDone.DB).FlushDB(t.Context())
	require.Equal(t, order.NotifyDuplicate, f.apply(t, o, order.TradeSuccess, "wx-1").Outcome)
}

func TestPaidRechargeCreditsLedgerAndRedisOnce(t *testing.T) {
	t.Parallel()
	f := newPayFixture(t)
	ctx := t.Context()
	_, err := store.NewAccounts(f.db).Create(ctx, "rita", "", decimal.NewFromInt(100))
	require.NoError(t, err)
	balances := store.NewBalances(f.db, f.r)
	_, err = balances.Ensure(ctx, "rita")
	require.NoError(t, err)

	o := f.order(t, "rita", order.ProductAgentRecharge, 5000, "rita@example.com")
	res := f.apply(t, o, order.TradeSuccess, "wx-2")
	require.Equal(t, order.NotifyPaid, res.Outcome)
	require.NotNil(t, res.Recharge)
	require.Equal(t, store.SettleApplied, res.Settle)

	bal, err := balances.Balance(ctx, "rita")
	require.NoError(t, err)
	require.Equal(t, "5100", bal.String())
	acct, err := store.NewAccounts(f.db).Get(ctx, "rita")
	require.NoError(t, err)
	require.Equal(t, "5100", acct.BalanceFen.String())
	require.EqualValues(t, 1, f.count(t, &store.LedgerEntry{}, "username = ? AND kind = ? AND entry_id = ? AND settled_at IS NOT NULL",
		"rita", store.LedgerRecharge, o.OutTradeNo))

	// A delivery after the Redis side failed (here: made to look unsettled)
	// finishes it without crediting twice.
	require.NoError(t, f.db.Model(&store.LedgerEntry{}).Where("entry_id = ?", o.OutTradeNo).Update("settled_at", nil).Error)
	f.r.Client(keys.NotifyDone.DB).Del(ctx, f.r.Keys().Key(keys.NotifyDone, o.Channel, o.OutTradeNo, "wx-2"))
	again := f.apply(t, o, order.TradeSuccess, "wx-2")
	require.Equal(t, order.NotifyDuplicate, again.Outcome)
	require.Equal(t, store.SettleSettled, again.Settle)
	bal, err = balances.Balance(ctx, "rita")
	require.NoError(t, err)
	require.Equal(t, "5100", bal.String())
	require.EqualValues(t, 1, f.count(t, &store.LedgerEntry{}, "entry_id = ? AND settled_at IS NOT NULL", o.OutTradeNo))
}

func TestConcurrentIdenticalNotificationsTransitionOnce(t *testing.T) {
	t.Parallel()
	f := newPayFixture(t)
	_, err := store.NewAccounts(f.db).Create(t.Context(), "cody", "", decimal.Zero)
	require.NoError(t, err)
	o := f.order(t, "cody", order.ProductAgentRecharge, 700, "cody@example.com")
	var paid, dup atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			res, err := f.orders.ApplyNotify(context.Background(), notice(o, order.TradeSuccess, "wx-3"), f.receipts, "")
			if err != nil {
				t.Error(err)
				return
			}
			switch res.Outcome {
			case order.NotifyPaid:
				paid.Add(1)
			case order.NotifyDuplicate:
				dup.Add(1)
			default:
				t.Errorf("outcome %s", res.Outcome)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, paid.Load())
	require.EqualValues(t, 15, dup.Load())
	require.EqualValues(t, 1, f.count(t, &store.LedgerEntry{}, "username = ? AND kind = ?", "cody", store.LedgerRecharge))
	require.EqualValues(t, 1, f.count(t, &store.OutboxMessage{}, "domain = ?", topology.DomainPaymentReceipt))
	acct, err := store.NewAccounts(f.db).Get(t.Context(), "cody")
	require.NoError(t, err)
	require.Equal(t, "700", acct.BalanceFen.String())
}

func TestNotificationsThatGrantNothing(t *testing.T) {
	t.Parallel()
	f := newPayFixture(t)
	ctx := t.Context()
	_, err := store.NewAccounts(f.db).Create(ctx, "nell", "", decimal.Zero)
	require.NoError(t, err)
	o := f.order(t, "nell", order.ProductAgentRecharge, 300, "")

	res := f.apply(t, o, "NOTPAY", "")
	require.Equal(t, order.NotifyIgnored, res.Outcome)
	require.EqualValues(t, 0, f.count(t, &store.PaymentNotifyRecord{}, "out_trade_no = ?", o.OutTradeNo), "NOTPAY is not recorded")

	forged := notice(o, order.TradeSuccess, "wx-4")
	forged.VerifyOK = false
	_, err = f.orders.ApplyNotify(ctx, forged, f.receipts, "")
	require.ErrorIs(t, err, order.ErrUnverified)

	other := notice(o, order.TradeSuccess, "wx-4")
	other.Channel = order.ChannelAlipay
	_, err = f.orders.ApplyNotify(ctx, other, f.receipts, "")
	require.ErrorIs(t, err, order.ErrMismatch)

	unknown := notice(o, order.TradeSuccess, "wx-4")
	unknown.OutTradeNo = "nope"
	_, err = f.orders.ApplyNotify(ctx, unknown, f.receipts, "")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.Equal(t, order.Pending, f.status(t, o))

	res = f.apply(t, o, order.TradeClosed, "")
	require.Equal(t, order.NotifyClosed, res.Outcome)
	require.Equal(t, order.Closed, f.status(t, o))
	res = f.apply(t, o, order.TradeSuccess, "wx-4")
	require.Equal(t, order.NotifyNotPending, res.Outcome, "paid after it closed: recorded, refunded by hand")
	require.Equal(t, order.Closed, f.status(t, o))
	require.EqualValues(t, 0, f.count(t, &store.LedgerEntry{}, "username = ? AND kind = ?", "nell", store.LedgerRecharge))
	require.EqualValues(t, 0, f.count(t, &store.OutboxMessage{}, "domain = ?", topology.DomainPaymentReceipt))
	require.EqualValues(t, 2, f.count(t, &store.PaymentNotifyRecord{}, "out_trade_no = ?", o.OutTradeNo))
}

func TestRefundOfAPaidOrderIsRecordedNotRevoked(t *testing.T) {
	t.Parallel()
	f := newPayFixture(t)
	o := f.order(t, "rae", order.ProductAgentRecharge, 900, "")
	res := f.apply(t, o, order.TradeSuccess, "wx-5")
	require.Equal(t, order.NotifyPaid, res.Outcome)
	require.Equal(t, "neither the order nor the account has an email address", res.NoReceipt)
	acct, err := store.NewAccounts(f.db).Get(t.Context(), "rae")
	require.NoError(t, err, "a payer without an account gets one")
	require.Equal(t, "900", acct.BalanceFen.String())

	res = f.apply(t, o, order.TradeRefund, "wx-5")
	require.Equal(t, order.NotifyRefunded, res.Outcome)
	require.Equal(t, order.Refunded, f.status(t, o))
	require.Equal(t, order.NotifyDuplicate, f.apply(t, o, order.TradeRefund, "wx-5").Outcome)
	acct, err = store.NewAccounts(f.db).Get(t.Context(), "rae")
	require.NoError(t, err)
	require.Equal(t, "900", acct.BalanceFen.String())
}

func TestSecondPaymentOfAPaidOrderGrantsNothing(t *testing.T) {
	t.Parallel()
	f := newPayFixture(t)
	o := f.order(t, "sam", order.ProductAgentRecharge, 400, "")
	require.Equal(t, order.NotifyPaid, f.apply(t, o, order.TradeSuccess, "wx-6").Outcome)
	require.Equal(t, order.NotifyNotPending, f.apply(t, o, order.TradeSuccess, "wx-7").Outcome)
	acct, err := store.NewAccounts(f.db).Get(t.Context(), "sam")
	require.NoError(t, err)
	require.Equal(t, "400", acct.BalanceFen.String())
}

func TestSendReceiptOnce(t *testing.T) {
	t.Parallel()
	f := newPayFixture(t)
	ctx := t.Context()
	o := f.order(t, "rex", order.ProductAgentRecharge, 100, "rex@example.com")
	called := false
	_, err := f.orders.SendReceiptOnce(ctx, o.OutTradeNo, func(context.Context, store.PaymentOrder) error { called = true; return nil })
	require.ErrorIs(t, err, order.ErrNotPaid, "an order not paid yet has no receipt")
	require.False(t, called)
	f.apply(t, o, order.TradeSuccess, "4200000042")

	fail := errors.New("smtp down")
	sent, err := f.orders.SendReceiptOnce(ctx, o.OutTradeNo, func(context.Context, store.PaymentOrder) error { return fail })
	require.ErrorIs(t, err, fail)
	require.False(t, sent)

	var sends atomic.Int32
	var wg sync.WaitGroup
	var locked atomic.Int32
	for range 8 {
		wg.Go(func() {
			_, err := f.orders.SendReceiptOnce(context.Background(), o.OutTradeNo, func(_ context.Context, got store.PaymentOrder) error {
				sends.Add(1)
				time.Sleep(50 * time.Millisecond) // the others arrive while it sends
				return nil
			})
			if errors.Is(err, store.ErrOrderLocked) {
				locked.Add(1)
			} else if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	sent, err = f.orders.SendReceiptOnce(ctx, o.OutTradeNo, func(context.Context, store.PaymentOrder) error {
		sends.Add(1)
		return nil
	})
	require.NoError(t, err)
	require.False(t, sent)
	require.EqualValues(t, 1, sends.Load(), "one receipt whatever the deliveries; %d found the lock held", locked.Load())
	got, err := f.orders.Get(ctx, o.OutTradeNo)
	require.NoError(t, err)
	require.NotNil(t, got.ReceiptSentAt)

	_, err = f.orders.SendReceiptOnce(ctx, "nope", func(context.Context, store.PaymentOrder) error { return nil })
	require.ErrorIs(t, err, store.ErrNotFound)
}
