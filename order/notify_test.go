package order_test

import (
	"testing"
	"time"

	"github.com/eisland/isle/order"
	"github.com/eisland/isle/topology"
	"github.com/stretchr/testify/require"
)

func recharge(status, txID string) order.Order {
	return order.Order{OutTradeNo: "EI1", Product: order.ProductAgentRecharge, AmountFen: 5000, Currency: order.Currency,
		Channel: order.ChannelWechat, Status: status, TransactionID: txID}
}

// notice is a verified notification of o's trade, paid in full when it is
// a SUCCESS.
func notice(o order.Order, state, txID string) topology.PaymentNotify {
	n := topology.PaymentNotify{NotifyID: "n-" + state + txID, Channel: o.Channel, OutTradeNo: o.OutTradeNo, TransactionID: txID,
		TradeState: state, VerifyOK: true}
	if state == order.TradeSuccess {
		n.AmountFen, n.Currency = &o.AmountFen, o.Currency
	}
	return n
}

// The state machine of doc/payments.md's table: which notification moves
// which status, and to what.
func TestApplyFollowsTheTable(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		status, state, txID string // the order's status, the notification's state and transaction
		outcome, after      string
	}{
		{order.Pending, order.TradeSuccess, "wx-1", order.NotifyPaid, order.Paid},
		{order.Paid, order.TradeSuccess, "wx-1", order.NotifyRecorded, order.Paid}, // its own payment again
		{order.Paid, order.TradeSuccess, "wx-2", order.NotifyNotPending, order.Paid},
		{order.Closed, order.TradeSuccess, "wx-1", order.NotifyNotPending, order.Closed},
		{order.Refunded, order.TradeSuccess, "wx-2", order.NotifyNotPending, order.Refunded},
		{order.Pending, order.TradeClosed, "", order.NotifyClosed, order.Closed},
		{order.Pending, order.TradeRevoked, "", order.NotifyClosed, order.Closed},
		{order.Paid, order.TradeClosed, "", order.NotifyRecorded, order.Paid},
		{order.Closed, order.TradeRevoked, "", order.NotifyRecorded, order.Closed},
		{order.Paid, order.TradeRefund, "wx-1", order.NotifyRefunded, order.Refunded},
		{order.Pending, order.TradeRefund, "wx-1", order.NotifyRecorded, order.Pending},
		{order.Refunded, order.TradeRefund, "wx-1", order.NotifyRecorded, order.Refunded},
	} {
		paidTx := ""
		if c.status != order.Pending && c.status != order.Closed {
			paidTx = "wx-1"
		}
		o := recharge(c.status, paidTx)
		step, err := o.Apply(notice(o, c.state, c.txID), now)
		require.NoError(t, err, "%s on %s", c.state, c.status)
		require.Equal(t, c.outcome, step.Outcome, "%s on %s", c.state, c.status)
		require.Equal(t, c.after, step.Status, "%s on %s", c.state, c.status)
		require.Equal(t, c.after != c.status, step.Moves(), "%s on %s", c.state, c.status)
		if c.outcome != order.NotifyPaid {
			require.Zero(t, step.Grant, "%s on %s grants nothing", c.state, c.status)
		}
	}
}

// A payment pays the order at the gateway's success time (now without
// one) under the notification's transaction, and grants what the order
// bought: a recharge of its amount, or a pro month.
func TestPaymentGrantsWhatTheOrderBought(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	o := recharge(order.Pending, "")
	n := notice(o, order.TradeSuccess, "wx-1")
	step, err := o.Apply(n, now)
	require.NoError(t, err)
	require.Equal(t, order.Step{Outcome: order.NotifyPaid, Status: order.Paid, PaidAt: now, TransactionID: "wx-1",
		Grant: order.Grant{RechargeFen: 5000}}, step)

	paid := time.Date(2026, 3, 1, 19, 59, 0, 0, topology.UTC8)
	n.SuccessTime = topology.OffsetDateTime{Time: paid}
	step, err = o.Apply(n, now)
	require.NoError(t, err)
	require.Equal(t, paid.UTC(), step.PaidAt)
	require.Equal(t, time.UTC, step.PaidAt.Location())

	pro := o
	pro.Product, pro.AmountFen = order.ProductProMonth, order.ProMonthPriceDefaultFen
	step, err = pro.Apply(notice(pro, order.TradeSuccess, "wx-1"), now)
	require.NoError(t, err)
	require.Equal(t, order.Grant{ProMonth: true}, step.Grant)

	odd := o
	odd.Product = "gold"
	_, err = odd.Apply(notice(odd, order.TradeSuccess, "wx-1"), now)
	require.Error(t, err, "a product the rules do not know grants nothing")
	require.NotErrorIs(t, err, order.ErrMismatch, "and is no fault of the notification's: retried")
}

// A SUCCESS grants only when it paid the order's amount in its currency;
// one without them (the Spring producer's) is refused, and so is any
// notification of another channel. States that grant nothing need no
// amount.
func TestApplyDoesNotTrustTheBroker(t *testing.T) {
	t.Parallel()
	now := time.Now()
	o := recharge(order.Pending, "")
	amount := func(fen int64) *int64 { return &fen }
	for name, edit := range map[string]func(n *topology.PaymentNotify){
		"one fen":           func(n *topology.PaymentNotify) { n.AmountFen = amount(1) },
		"more than ordered": func(n *topology.PaymentNotify) { n.AmountFen = amount(5001) },
		"another currency":  func(n *topology.PaymentNotify) { n.Currency = "USD" },
		"no currency":       func(n *topology.PaymentNotify) { n.Currency = "" },
		"no amount":         func(n *topology.PaymentNotify) { n.AmountFen = nil },
		"neither (Spring)":  func(n *topology.PaymentNotify) { n.AmountFen, n.Currency = nil, "" },
		"another channel":   func(n *topology.PaymentNotify) { n.Channel = order.ChannelAlipay },
	} {
		n := notice(o, order.TradeSuccess, "wx-1")
		edit(&n)
		_, err := o.Apply(n, now)
		require.ErrorIs(t, err, order.ErrMismatch, name)
	}
	closing := notice(o, order.TradeClosed, "")
	step, err := o.Apply(closing, now)
	require.NoError(t, err)
	require.Equal(t, order.NotifyClosed, step.Outcome)
	closing.Channel = order.ChannelAlipay
	_, err = o.Apply(closing, now)
	require.ErrorIs(t, err, order.ErrMismatch)
}

// Only a verified notification is acted on, and only one of a finished
// trade: NOTPAY and the other states of a trade in progress are not.
func TestAdmit(t *testing.T) {
	t.Parallel()
	o := recharge(order.Pending, "")
	for _, state := range []string{order.TradeSuccess, order.TradeClosed, order.TradeRevoked, order.TradeRefund} {
		ok, err := order.Admit(notice(o, state, "wx-1"))
		require.NoError(t, err, state)
		require.True(t, ok, state)
	}
	for _, state := range []string{"NOTPAY", "USERPAYING", "PAYERROR"} {
		ok, err := order.Admit(notice(o, state, ""))
		require.NoError(t, err, state)
		require.False(t, ok, state)
	}
	forged := notice(o, order.TradeSuccess, "wx-1")
	forged.VerifyOK = false
	_, err := order.Admit(forged)
	require.ErrorIs(t, err, order.ErrUnverified)
	broken := notice(o, order.TradeSuccess, "wx-1")
	broken.OutTradeNo = ""
	_, err = order.Admit(broken)
	require.Error(t, err, "a notification that breaks the contract")
}

// A recharge that was paid, refunded or not, has its ledger row.
func TestRecharged(t *testing.T) {
	t.Parallel()
	for status, want := range map[string]bool{order.Pending: false, order.Paid: true, order.Refunded: true, order.Closed: false} {
		require.Equal(t, want, recharge(status, "").Recharged(), status)
	}
	pro := recharge(order.Paid, "wx-1")
	pro.Product = order.ProductProMonth
	require.False(t, pro.Recharged())
}

// A pro month runs from the later of now and the current end of the
// user's pro time.
func TestExtendPro(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	require.Equal(t, now.Add(30*24*time.Hour), order.ExtendPro(now, nil))
	past := now.Add(-time.Hour)
	require.Equal(t, now.Add(order.ProMonth), order.ExtendPro(now, &past))
	later := now.Add(10 * 24 * time.Hour).In(topology.UTC8)
	got := order.ExtendPro(now, &later)
	require.Equal(t, later.UTC().Add(order.ProMonth), got, "a month from the current end, not from now")
	require.Equal(t, time.UTC, got.Location())
}
