package store_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/store/storetest"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

func newOrders(t *testing.T) (*store.Orders, *gorm.DB, *store.Redis) {
	t.Helper()
	db, r := storetest.MySQL(t), storetest.Redis(t)
	return store.NewOrders(db, r), db, r
}

func activeOrder(t *testing.T, err error) *store.ErrActiveOrder {
	t.Helper()
	var a *store.ErrActiveOrder
	require.ErrorAs(t, err, &a, "want an active order, got %v", err)
	return a
}

func TestOrderCreateWritesPendingRowAndLifecycleKeys(t *testing.T) {
	t.Parallel()
	orders, db, r := newOrders(t)
	before := time.Now()
	o, err := orders.Create(t.Context(), order.New{Username: "ann", Product: order.ProductProMonth,
		AmountFen: order.ProMonthPriceDefaultFen, Channel: order.ChannelAlipay, ReceiptEmail: "ann@example.com"})
	require.NoError(t, err)
	require.Regexp(t, `^[0-9]{14}[0-9a-f]{20}$`, o.OutTradeNo)
	require.Equal(t, order.Pending, o.Status)
	require.WithinDuration(t, before.Add(order.TTL), o.ExpireAt, 5*time.Second)

	got, err := orders.Get(t.Context(), o.OutTradeNo)
	require.NoError(t, err)
	require.Equal(t, "ann", got.Username)
	require.Equal(t, order.ProductProMonth, got.ProductCode)
	require.EqualValues(t, order.ProMonthPriceDefaultFen, got.AmountFen)
	require.Equal(t, order.ChannelAlipay, got.Channel)
	require.Equal(t, "CNY", got.Currency)
	require.Equal(t, "ann@example.com", *got.ReceiptEmail)
	require.True(t, o.ExpireAt.Equal(got.ExpireAt), "%v != %v", o.ExpireAt, got.ExpireAt)

	c, k := r.Client(keys.ActiveOrder.DB), r.Keys()
	ttl := func(key, want string, d time.Duration) {
		t.Helper()
		v, err := c.Get(t.Context(), key).Result()
		require.NoError(t, err, key)
		require.Equal(t, want, v)
		left, err := c.PTTL(t.Context(), key).Result()
		require.NoError(t, err)
		require.InDelta(t, d.Seconds(), left.Seconds(), 5, key)
	}
	ttl(k.Key(keys.ActiveOrder, "ann"), o.OutTradeNo, order.TTL+order.ActiveOrderGrace)
	ttl(k.Key(keys.OrderChannel, o.OutTradeNo), order.ChannelAlipay, keys.PaymentChannelTTL)
	ttl(k.Key(keys.OrderReceiptEmail, o.OutTradeNo), "ann@example.com", order.TTL+order.ReceiptEmailGrace)
	// The creation lock is gone with the creation.
	n, err := c.Exists(t.Context(), k.OrderCreateLock(order.ProductProMonth, "ann")).Result()
	require.NoError(t, err)
	require.Zero(t, n)

	_, err = orders.Get(t.Context(), "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
	var rows int64
	require.NoError(t, db.Model(&store.PaymentOrder{}).Count(&rows).Error)
	require.EqualValues(t, 1, rows)
}

func TestOrderProMonthPriceComesFromRedis(t *testing.T) {
	t.Parallel()
	orders, _, r := newOrders(t)
	price, err := orders.ProMonthPrice(t.Context())
	require.NoError(t, err)
	require.EqualValues(t, order.ProMonthPriceDefaultFen, price)

	c := r.Client(keys.ProMonthPrice.DB)
	require.NoError(t, c.Set(t.Context(), r.Keys().Key(keys.ProMonthPrice), "2500", 0).Err())
	_, err = orders.Create(t.Context(), order.New{Username: "bob", Product: order.ProductProMonth, AmountFen: order.ProMonthPriceDefaultFen,
		Channel: order.ChannelWechat})
	require.ErrorIs(t, err, order.ErrInvalid)
	o, err := orders.Create(t.Context(), order.New{Username: "bob", Product: order.ProductProMonth, AmountFen: 2500, Channel: order.ChannelWechat})
	require.NoError(t, err)
	require.Nil(t, o.ReceiptEmail)
	n, err := c.Exists(t.Context(), r.Keys().Key(keys.OrderReceiptEmail, o.OutTradeNo)).Result()
	require.NoError(t, err)
	require.Zero(t, n, "no receipt address, no key")

	require.NoError(t, c.Set(t.Context(), r.Keys().Key(keys.ProMonthPrice), "free", 0).Err())
	_, err = orders.ProMonthPrice(t.Context())
	require.Error(t, err)
}

func TestOrderSecondCreateWhilePendingNamesTheFirst(t *testing.T) {
	t.Parallel()
	orders, db, r := newOrders(t)
	first, err := orders.Create(t.Context(), order.New{Username: "cat", Product: order.ProductAgentRecharge, AmountFen: 990,
		Channel: order.ChannelAlipay})
	require.NoError(t, err)
	for _, product := range []string{order.ProductAgentRecharge, order.ProductProMonth} {
		_, err = orders.Create(t.Context(), order.New{Username: "cat", Product: product, AmountFen: order.ProMonthPriceDefaultFen,
			Channel: order.ChannelWechat})
		require.Equal(t, first.OutTradeNo, activeOrder(t, err).OutTradeNo, product)
	}
	// MySQL decides without the key too.
	c := r.Client(keys.ActiveOrder.DB)
	require.NoError(t, c.Del(t.Context(), r.Keys().Key(keys.ActiveOrder, "cat")).Err())
	_, err = orders.Create(t.Context(), order.New{Username: "cat", Product: order.ProductAgentRecharge, AmountFen: 1, Channel: order.ChannelAlipay})
	require.Equal(t, first.OutTradeNo, activeOrder(t, err).OutTradeNo)
	// Another user is not held up.
	_, err = orders.Create(t.Context(), order.New{Username: "dan", Product: order.ProductAgentRecharge, AmountFen: 1, Channel: order.ChannelAlipay})
	require.NoError(t, err)

	// Once the first expired, a stale key pointing at it holds nothing up.
	require.NoError(t, db.Model(&store.PaymentOrder{}).Where("out_trade_no = ?", first.OutTradeNo).
		Update("expire_at", time.Now().Add(-time.Minute)).Error)
	require.NoError(t, c.Set(t.Context(), r.Keys().Key(keys.ActiveOrder, "cat"), first.OutTradeNo, time.Minute).Err())
	second, err := orders.Create(t.Context(), order.New{Username: "cat", Product: order.ProductAgentRecharge, AmountFen: 5, Channel: order.ChannelAlipay})
	require.NoError(t, err)
	require.NotEqual(t, first.OutTradeNo, second.OutTradeNo)
	v, err := c.Get(t.Context(), r.Keys().Key(keys.ActiveOrder, "cat")).Result()
	require.NoError(t, err)
	require.Equal(t, second.OutTradeNo, v)
}

func TestOrderConcurrentCreatesMakeOneOrder(t *testing.T) {
	t.Parallel()
	orders, db, _ := newOrders(t)
	for _, mixed := range []bool{false, true} {
		user := map[bool]string{false: "eve", true: "fay"}[mixed]
		var wg sync.WaitGroup
		errs := make([]error, 10)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n := order.New{Username: user, Product: order.ProductAgentRecharge, AmountFen: 100, Channel: order.ChannelAlipay}
				if mixed && i%2 == 1 { // another product: another creation lock, so MySQL must serialise
					n.Product, n.AmountFen = order.ProductProMonth, order.ProMonthPriceDefaultFen
				}
				_, errs[i] = orders.Create(t.Context(), n)
			}()
		}
		wg.Wait()
		created := 0
		for _, err := range errs {
			var a *store.ErrActiveOrder
			switch {
			case err == nil:
				created++
			case errors.Is(err, store.ErrOrderLocked), errors.As(err, &a):
			default:
				t.Fatalf("unexpected error: %v", err)
			}
		}
		require.Equal(t, 1, created, "mixed products: %v", mixed)
		var rows int64
		require.NoError(t, db.Model(&store.PaymentOrder{}).Where("username = ?", user).Count(&rows).Error)
		require.EqualValues(t, 1, rows)
	}
}

func TestOrderCreationLockHeldRefuses(t *testing.T) {
	t.Parallel()
	orders, db, r := newOrders(t)
	c, lock := r.Client(keys.OrderCreateLock.DB), r.Keys().OrderCreateLock(order.ProductProMonth, "gus")
	require.NoError(t, c.Set(t.Context(), lock, "someone-else", keys.PaymentLockTTL).Err())
	_, err := orders.Create(t.Context(), order.New{Username: "gus", Product: order.ProductProMonth, AmountFen: order.ProMonthPriceDefaultFen,
		Channel: order.ChannelAlipay})
	require.ErrorIs(t, err, store.ErrOrderLocked)
	v, err := c.Get(t.Context(), lock).Result()
	require.NoError(t, err)
	require.Equal(t, "someone-else", v, "a refused creation leaves the holder's lock alone")
	var rows int64
	require.NoError(t, db.Model(&store.PaymentOrder{}).Count(&rows).Error)
	require.Zero(t, rows)
}

func TestOrderInvalidCreatesNothing(t *testing.T) {
	t.Parallel()
	orders, db, _ := newOrders(t)
	for name, n := range map[string]order.New{
		"product":         {Product: "gold", AmountFen: 100, Channel: order.ChannelAlipay},
		"channel":         {Product: order.ProductAgentRecharge, AmountFen: 100, Channel: "alipay"},
		"zero":            {Product: order.ProductAgentRecharge, AmountFen: 0, Channel: order.ChannelAlipay},
		"negative":        {Product: order.ProductAgentRecharge, AmountFen: -5, Channel: order.ChannelAlipay},
		"too much":        {Product: order.ProductAgentRecharge, AmountFen: order.RechargeMaxFen + 1, Channel: order.ChannelAlipay},
		"pro price":       {Product: order.ProductProMonth, AmountFen: order.ProMonthPriceDefaultFen - 1, Channel: order.ChannelAlipay},
		"email with CRLF": {Product: order.ProductAgentRecharge, AmountFen: 100, Channel: order.ChannelAlipay, ReceiptEmail: "a@b.cn\r\nBcc: x@y.cn"},
	} {
		n.Username = "hal"
		_, err := orders.Create(t.Context(), n)
		require.ErrorIs(t, err, order.ErrInvalid, name)
	}
	var rows int64
	require.NoError(t, db.Model(&store.PaymentOrder{}).Count(&rows).Error)
	require.Zero(t, rows)
}
