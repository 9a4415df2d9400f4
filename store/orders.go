package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/eisland/isle/internal/kit/lease"
	"github.com/eisland/isle/internal/kit/sqltx"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ErrOrderLocked is returned when another creation of the same product for
// the same user holds the creation lock.
var ErrOrderLocked = errors.New("store: an order is being created for this user and product")

// ErrActiveOrder is returned when the user already has an order waiting
// to be paid; it names that order.
type ErrActiveOrder struct {
	OutTradeNo string
	ExpireAt   time.Time
}

func (e *ErrActiveOrder) Error() string {
	return fmt.Sprintf("store: order %s is still pending until %s", e.OutTradeNo, e.ExpireAt.Format(time.RFC3339))
}

// Orders are the payment orders: their rows in MySQL (payment_order) and
// their keys in Redis DB 10 (the creation lock and the order-lifecycle keys
// of doc/keys.md).
type Orders struct {
	db  *gorm.DB
	r   *Redis
	now func() time.Time
}

// NewOrders returns the payment orders of db and r.
func NewOrders(db *gorm.DB, r *Redis) *Orders { return &Orders{db: db, r: r, now: time.Now} }

// ProMonthPrice is the price of a pro month in fen: Redis's
// payment:pricing:pro-month:amount-fen, or order.ProMonthPriceDefaultFen
// when it is not set. A value that is not a positive integer is an error,
// not a price.
func (o *Orders) ProMonthPrice(ctx context.Context) (int64, error) {
	v, err := o.r.Client(keys.ProMonthPrice.DB).Get(ctx, o.r.Keys().Key(keys.ProMonthPrice)).Result()
	if errors.Is(err, redis.Nil) {
		return order.ProMonthPriceDefaultFen, nil
	}
	if err != nil {
		return 0, fmt.Errorf("store: pro-month price: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("store: pro-month price %q in Redis is not a positive number of fen", v)
	}
	return n, nil
}

// Create creates a PENDING order payable for order.TTL, or refuses:
// order.ErrInvalid (order.New.Check, with the pro-month price from
// ProMonthPrice), ErrOrderLocked while another creation for the same user
// and product runs, *ErrActiveOrder while the user has an unexpired
// PENDING order. The creation lock is taken with SET NX PX and a UUID and
// released only if it still holds that UUID (internal/kit/lease). One active
// order per user holds even without the lock (another product, a lock that
// expired): the check and the insert run in one transaction that locks the
// user's PENDING rows, so two concurrent creations serialise on MySQL.
//
// After the commit it sets the order-lifecycle keys: the user's active
// order (until expiry + 5 min), the channel (30 days) and the receipt
// email (until expiry + 60 min). When that fails the order exists and is
// returned along with the error.
func (o *Orders) Create(ctx context.Context, n order.New) (PaymentOrder, error) {
	if err := n.Check(func() (int64, error) { return o.ProMonthPrice(ctx) }); err != nil {
		return PaymentOrder{}, err
	}
	k := o.r.Keys()
	c := o.r.Client(keys.OrderCreateLock.DB)
	lock, err := lease.Acquire(ctx, c, k.OrderCreateLock(n.Product, n.Username), keys.PaymentLockTTL)
	switch {
	case errors.Is(err, lease.ErrHeld):
		return PaymentOrder{}, ErrOrderLocked
	case err != nil:
		return PaymentOrder{}, fmt.Errorf("store: order lock: %w", err)
	}
	defer lock.ReleaseDetached(ctx) // else it expires in PaymentLockTTL

	now := o.now().UTC().Truncate(time.Microsecond)
	// The active-order key first: one GET usually answers.
	if no, err := c.Get(ctx, k.Key(keys.ActiveOrder, n.Username)).Result(); err == nil && no != "" {
		prev, err := o.Get(ctx, no)
		switch {
		case err == nil && prev.rules().Active(now):
			return PaymentOrder{}, &ErrActiveOrder{OutTradeNo: prev.OutTradeNo, ExpireAt: prev.ExpireAt}
		case err != nil && !errors.Is(err, ErrNotFound):
			return PaymentOrder{}, err
		}
	} else if err != nil && !errors.Is(err, redis.Nil) {
		return PaymentOrder{}, fmt.Errorf("store: active order of %s: %w", n.Username, err)
	}

	no, err := order.NewOutTradeNo(now)
	if err != nil {
		return PaymentOrder{}, err
	}
	row := PaymentOrder{OutTradeNo: no, Username: n.Username, ProductCode: n.Product, AmountFen: n.AmountFen, Currency: order.Currency,
		Channel: n.Channel, Status: order.Pending, ExpireAt: now.Add(order.TTL), CreatedAt: now, UpdatedAt: now}
	if n.ReceiptEmail != "" {
		row.ReceiptEmail = &n.ReceiptEmail
	}
	err = sqltx.Transact(ctx, o.db, func(tx *gorm.DB) error {
		var pending []PaymentOrder
		if err := tx.Clauses(clause.Locking{Strength: "UPDATE"}).Select("out_trade_no", "status", "expire_at").
			Where("username = ? AND status = ?", n.Username, order.Pending).Order("expire_at DESC").Find(&pending).Error; err != nil {
			return err
		}
		if len(pending) > 0 && pending[0].rules().Active(now) {
			return &ErrActiveOrder{OutTradeNo: pending[0].OutTradeNo, ExpireAt: pending[0].ExpireAt}
		}
		return tx.Omit("id").Create(&row).Error
	})
	var active *ErrActiveOrder
	if errors.As(err, &active) {
		return PaymentOrder{}, active
	}
	if err != nil {
		return PaymentOrder{}, fmt.Errorf("store: create order for %s: %w", n.Username, err)
	}

	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, k.Key(keys.ActiveOrder, n.Username), no, row.ExpireAt.Add(order.ActiveOrderGrace).Sub(now))
		p.Set(ctx, k.Key(keys.OrderChannel, no), n.Channel, keys.PaymentChannelTTL)
		if n.ReceiptEmail != "" {
			p.Set(ctx, k.Key(keys.OrderReceiptEmail, no), n.ReceiptEmail, row.ExpireAt.Add(order.ReceiptEmailGrace).Sub(now))
		}
		return nil
	})
	if err != nil {
		return row, fmt.Errorf("store: order %s created; its Redis keys were not set: %w", no, err)
	}
	return row, nil
}

// Get returns the order numbered outTradeNo, or ErrNotFound.
func (o *Orders) Get(ctx context.Context, outTradeNo string) (PaymentOrder, error) {
	var row PaymentOrder
	err := o.db.WithContext(ctx).Where("out_trade_no = ?", outTradeNo).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return row, fmt.Errorf("store: order %s: %w", outTradeNo, ErrNotFound)
	}
	if err != nil {
		return row, fmt.Errorf("store: order %s: %w", outTradeNo, err)
	}
	return row, nil
}

// rules is row as package order's rules read it.
func (row PaymentOrder) rules() order.Order {
	return order.Order{OutTradeNo: row.OutTradeNo, Product: row.ProductCode, AmountFen: row.AmountFen, Currency: row.Currency,
		Channel: row.Channel, Status: row.Status, TransactionID: deref(row.TransactionID), ExpireAt: row.ExpireAt}
}

// List returns the orders numbered outTradeNos that exist, in no order.
func (o *Orders) List(ctx context.Context, outTradeNos []string) ([]PaymentOrder, error) {
	var rows []PaymentOrder
	if err := o.db.WithContext(ctx).Where("out_trade_no IN ?", outTradeNos).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("store: %d orders: %w", len(outTradeNos), err)
	}
	return rows, nil
}
