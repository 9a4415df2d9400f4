package main

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/eisland/isle/internal/kit/paynotify"
	"github.com/eisland/isle/order"
	"github.com/eisland/isle/store"
)

// demoOrder is a payment order the demo paid, or tried to.
type demoOrder struct {
	OutTradeNo string
	User       string
	Product    string
	AmountFen  int64
	Channel    string
	Paid       bool // the API accepted its SUCCESS callback
	Leftover   bool // an earlier run's order, still waiting to be paid
}

// orderPaidWait bounds how long a purchase waits for the user's previous
// order to be applied before it opens the next (one active order per user).
const orderPaidWait = 15 * time.Second

// buy opens an order of product for u and pays it with a callback signed
// with the local test keys, as the gateway would. The API keeps one active
// order per user: when the user's last order is still PENDING (its callback
// not applied yet, or an order an earlier run left unpaid) it waits for it,
// paying a leftover first, and tries again.
func (d *demo) buy(ctx context.Context, u demoUser, product string, amountFen int64) {
	// The products' names differ in length by an odd number: each user
	// pays one order through each gateway.
	channel := paynotify.ChannelAlipay
	if (u.ID+uint64(len(product)))%2 == 1 {
		channel = paynotify.ChannelWechat
	}
	for range 3 {
		a := d.api.postJSON(ctx, "payment orders", "/v1/payments/orders", u.Token,
			map[string]any{"product": product, "amountFen": amountFen, "channel": channel}, nil)
		var o struct {
			OutTradeNo string    `json:"outTradeNo"`
			Product    string    `json:"product"`
			AmountFen  int64     `json:"amountFen"`
			Channel    string    `json:"channel"`
			CreatedAt  time.Time `json:"createdAt"`
		}
		switch active := a.apiError().OutTradeNo; {
		case a.Status == http.StatusCreated && a.decode(&o) == nil:
			d.pay(ctx, demoOrder{OutTradeNo: o.OutTradeNo, User: u.Name, Product: o.Product, AmountFen: o.AmountFen, Channel: o.Channel}, o.CreatedAt)
			return
		case a.Status == http.StatusConflict && active != "":
			if !d.paidByThisRun(active) {
				prev, err := store.NewOrders(d.db, nil).Get(ctx, active)
				if err != nil {
					return
				}
				d.pay(ctx, demoOrder{OutTradeNo: prev.OutTradeNo, User: u.Name, Product: prev.ProductCode, AmountFen: prev.AmountFen,
					Channel: prev.Channel, Leftover: true}, prev.CreatedAt)
			}
			if !d.waitApplied(ctx, active) {
				return
			}
		case a.Status == http.StatusConflict: // another creation holds the lock
			if !sleepCtx(ctx, time.Second) {
				return
			}
		default:
			return
		}
	}
}

// pay posts o's SUCCESS callback and records o.
func (d *demo) pay(ctx context.Context, o demoOrder, orderedAt time.Time) {
	p := payment{OutTradeNo: o.OutTradeNo, Subject: o.Product, AmountFen: o.AmountFen, OrderedAt: orderedAt}
	build := alipayCallback
	if o.Channel == paynotify.ChannelWechat {
		build = wechatCallback
	}
	var err error
	if p.State, err = gatewayState(o.Channel, paynotify.StateSuccess); err != nil {
		return
	}
	cb, err := build(*d.keys, p, time.Now())
	if err != nil {
		return
	}
	a := d.api.do(ctx, apiCall{kind: "payment callbacks", method: http.MethodPost, path: cb.Path, body: cb.Body, header: cb.Header,
		accepted: cb.Accepted})
	o.Paid = a.OK(apiCall{accepted: cb.Accepted})
	d.mu.Lock()
	d.orders = append(d.orders, o)
	d.mu.Unlock()
}

func (d *demo) paidByThisRun(outTradeNo string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.ContainsFunc(d.orders, func(o demoOrder) bool { return o.OutTradeNo == outTradeNo && o.Paid })
}

// waitApplied waits until the order is no longer PENDING in MySQL, for
// orderPaidWait at most.
func (d *demo) waitApplied(ctx context.Context, outTradeNo string) bool {
	deadline := time.Now().Add(orderPaidWait)
	for time.Now().Before(deadline) {
		o, err := store.NewOrders(d.db, nil).Get(ctx, outTradeNo)
		if err == nil && o.Status != order.Pending {
			return true
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return false
		}
	}
	return false
}

// sleepCtx sleeps for d unless ctx ends first; it reports whether it slept.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
