package order_test

import (
	"errors"
	"testing"
	"time"

	"github.com/eisland/isle/order"
	"github.com/stretchr/testify/require"
)

func fixedPrice(fen int64) func() (int64, error) {
	return func() (int64, error) { return fen, nil }
}

// A new order names a user and a channel, a receipt address on one line
// that fits its column, and a product at its price; the pro-month price is
// asked for only for a pro month, and its error is the order's.
func TestNewOrderCheck(t *testing.T) {
	t.Parallel()
	price := fixedPrice(order.ProMonthPriceDefaultFen)
	for name, n := range map[string]order.New{
		"pro month":     {Product: order.ProductProMonth, AmountFen: order.ProMonthPriceDefaultFen, Channel: order.ChannelWechat},
		"one fen":       {Product: order.ProductAgentRecharge, AmountFen: 1, Channel: order.ChannelAlipay},
		"the most":      {Product: order.ProductAgentRecharge, AmountFen: order.RechargeMaxFen, Channel: order.ChannelAlipay},
		"with an email": {Product: order.ProductAgentRecharge, AmountFen: 100, Channel: order.ChannelAlipay, ReceiptEmail: "a@b.cn"},
	} {
		n.Username = "hal"
		require.NoError(t, n.Check(price), name)
	}
	long := make([]byte, order.ReceiptEmailMax+1)
	for i := range long {
		long[i] = 'a'
	}
	for name, n := range map[string]order.New{
		"product":         {Product: "gold", AmountFen: 100, Channel: order.ChannelAlipay},
		"channel":         {Product: order.ProductAgentRecharge, AmountFen: 100, Channel: "alipay"},
		"zero":            {Product: order.ProductAgentRecharge, AmountFen: 0, Channel: order.ChannelAlipay},
		"negative":        {Product: order.ProductAgentRecharge, AmountFen: -5, Channel: order.ChannelAlipay},
		"too much":        {Product: order.ProductAgentRecharge, AmountFen: order.RechargeMaxFen + 1, Channel: order.ChannelAlipay},
		"pro price":       {Product: order.ProductProMonth, AmountFen: order.ProMonthPriceDefaultFen - 1, Channel: order.ChannelAlipay},
		"email with CRLF": {Product: order.ProductAgentRecharge, AmountFen: 100, Channel: order.ChannelAlipay, ReceiptEmail: "a@b.cn\r\nBcc: x@y.cn"},
		"email too long":  {Product: order.ProductAgentRecharge, AmountFen: 100, Channel: order.ChannelAlipay, ReceiptEmail: string(long)},
	} {
		n.Username = "hal"
		require.ErrorIs(t, n.Check(price), order.ErrInvalid, name)
	}
	require.ErrorIs(t, order.New{Product: order.ProductAgentRecharge, AmountFen: 100, Channel: order.ChannelAlipay}.Check(price),
		order.ErrInvalid, "no user")

	// The price is the one asked for, and asked for a pro month only.
	pro := order.New{Username: "hal", Product: order.ProductProMonth, AmountFen: 2500, Channel: order.ChannelAlipay}
	require.NoError(t, pro.Check(fixedPrice(2500)))
	require.ErrorIs(t, pro.Check(price), order.ErrInvalid)
	down := errors.New("redis down")
	require.ErrorIs(t, pro.Check(func() (int64, error) { return 0, down }), down)
	recharge := order.New{Username: "hal", Product: order.ProductAgentRecharge, AmountFen: 100, Channel: order.ChannelAlipay}
	require.NoError(t, recharge.Check(func() (int64, error) { t.Fatal("a recharge asked for the pro-month price"); return 0, nil }))
}

// An order number is the UTC+8 time to the second and 20 hex digits.
func TestNewOutTradeNo(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 17, 4, 5, 0, time.UTC)
	no, err := order.NewOutTradeNo(at)
	require.NoError(t, err)
	require.Regexp(t, `^20260302010405[0-9a-f]{20}$`, no)
	other, err := order.NewOutTradeNo(at)
	require.NoError(t, err)
	require.NotEqual(t, no, other)
}

// An order holds its user up while it is PENDING and unexpired.
func TestActiveOrder(t *testing.T) {
	t.Parallel()
	now := time.Now()
	o := order.Order{Status: order.Pending, ExpireAt: now.Add(order.TTL)}
	require.True(t, o.Active(now))
	require.False(t, o.Active(o.ExpireAt), "expired")
	o.Status = order.Closed
	require.False(t, o.Active(now), "closed")
}
