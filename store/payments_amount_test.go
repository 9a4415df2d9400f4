package store_test

import (
	"testing"

	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/topology"
	"github.com/shopspring/decimal"
	"github.com/stretchr/testify/require"
)

// A SUCCESS grants only the amount the order asks, in its currency, as the
// API verified the callback said: whoever can publish to the payment
// exchange cannot pay an order with a message of another amount, or one
// that names none. Before, PaymentNotifyMessage carried no amount and any
// message that said SUCCESS and verifyOk paid the order.
func TestNotifyConsumerDoesNotTrustTheBroker(t *testing.T) {
	t.Parallel()
	f := newPayFixture(t)
	ctx := t.Context()
	_, err := store.NewAccounts(f.db).Create(ctx, "ora", "", decimal.Zero)
	require.NoError(t, err)
	o := f.order(t, "ora", order.ProductAgentRecharge, 5000, "")
	msg := func(tail string) topology.PaymentNotify {
		t.Helper()
		m, err := topology.Decode[topology.PaymentNotify]([]byte(`{"notifyId":"n-1","channel":"WECHAT","outTradeNo":"` + o.OutTradeNo +
			`","transactionId":"wx-1","tradeState":"SUCCESS","successTime":"2026-12-01T10:00:00+08:00","verifyOk":true` + tail + `}`))
		require.NoError(t, err)
		return m
	}

	for name, m := range map[string]topology.PaymentNotify{
		"one fen":           msg(`,"amountFen":1,"currency":"CNY"`),
		"more than ordered": msg(`,"amountFen":5001,"currency":"CNY"`),
		"another currency":  msg(`,"amountFen":5000,"currency":"USD"`),
		"no currency":       msg(`,"amountFen":5000`),
		"no amount":         msg(`,"currency":"CNY"`),
		"neither (Spring)":  msg(``),
	} {
		_, err := f.orders.ApplyNotify(ctx, m, f.receipts, "")
		require.ErrorIs(t, err, order.ErrMismatch, name)
		require.Equal(t, order.Pending, f.status(t, o), name)
	}
	require.EqualValues(t, 0, f.count(t, &store.PaymentNotifyRecord{}, "out_trade_no = ?", o.OutTradeNo), "refused, not recorded")
	require.EqualValues(t, 0, f.count(t, &store.LedgerEntry{}, "username = ? AND kind = ?", "ora", store.LedgerRecharge))

	res, err := f.orders.ApplyNotify(ctx, msg(`,"amountFen":5000,"currency":"CNY"`), f.receipts, "")
	require.NoError(t, err)
	require.Equal(t, order.NotifyPaid, res.Outcome)
	require.Equal(t, "5000", res.Recharge.AmountFen.String())

	// States that grant nothing need no amount: a Spring producer's CLOSED
	// closes its order.
	closing := f.order(t, "ora", order.ProductAgentRecharge, 700, "")
	res, err = f.orders.ApplyNotify(ctx, notice(closing, order.TradeClosed, ""), f.receipts, "")
	require.NoError(t, err)
	require.Equal(t, order.NotifyClosed, res.Outcome)
}
