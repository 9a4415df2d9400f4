package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/eisland/isle/store"
	"github.com/shopspring/decimal"
)

// demoBatchEvery is how often the gateway sends a batch of usage
// (POST /v1/agent/usage/batch) beside the charges it sends one at a time.
const demoBatchEvery = 5 * time.Second

// usageBody is the body of one model call of user: a single charge's, or
// an item of a batch.
func usageBody(requestID, user string) map[string]any {
	return map[string]any{
		"requestId": requestID, "username": user, "modelName": demoModel,
		"inputTokens": 200 + rand.IntN(3800), "cachedTokens": rand.IntN(200), "outputTokens": 50 + rand.IntN(1500),
	}
}

// chargeBatch sends the k-th batch of usage, as an agent gateway that
// makes many calls sends them: one or two calls of each user, and one
// charge sent alone earlier sent again (a gateway that lost that answer),
// which the API answers as a replay.
func (d *demo) chargeBatch(ctx context.Context, k int) {
	var items []map[string]any
	for _, u := range d.users {
		for m := range 1 + rand.IntN(2) {
			items = append(items, usageBody(fmt.Sprintf("demo-%s-%s-b%02d-%d", d.run, u.Name, k, m), u.Name))
		}
	}
	d.mu.Lock()
	if n := len(d.alone); n > 0 {
		items = append(items, d.alone[rand.IntN(n)])
	}
	d.mu.Unlock()
	a := d.api.postJSON(ctx, "usage batches", "/v1/agent/usage/batch", d.service, map[string]any{"items": items}, nil)
	if a.Status == http.StatusOK {
		d.countBatch(items, a)
	}
}

// batchTally counts the items of the batches the API took, by what each
// item was answered.
type batchTally struct {
	Items, Charged, Replays int
	Refused                 map[string]int // items by status and code
	Unread                  int            // answers that were not one result an item
}

// refused is how many items were answered other than 200.
func (t batchTally) refused() int {
	n := 0
	for _, v := range t.Refused {
		n += v
	}
	return n
}

// countBatch counts the items of a batch by their answers; a charged item
// counts as a single charge does (d.charges, d.usageIDs).
func (d *demo) countBatch(items []map[string]any, a apiAnswer) {
	var ans struct {
		Results []struct {
			Status int `json:"status"`
			Charge *struct {
				DeductedFen string `json:"deductedFen"`
				Replayed    bool   `json:"replayed"`
			} `json:"charge"`
			Error apiError `json:"error"`
		} `json:"results"`
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	bt := &d.batches
	if bt.Refused == nil {
		bt.Refused = map[string]int{}
	}
	if err := a.decode(&ans); err != nil || len(ans.Results) != len(items) {
		bt.Unread++
		return
	}
	for i, res := range ans.Results {
		bt.Items++
		var deducted decimal.Decimal
		if res.Charge != nil {
			deducted, _ = decimal.NewFromString(res.Charge.DeductedFen)
		}
		switch {
		case res.Status != http.StatusOK || res.Charge == nil:
			bt.Refused[fmt.Sprintf("%d %s", res.Status, res.Error.Code)]++
		case res.Charge.Replayed:
			bt.Replays++
		default:
			if deducted.IsPositive() {
				d.charges++
				bt.Charged++
			}
			item := items[i]
			d.usageIDs = append(d.usageIDs, store.UsageRequestID(item["username"].(string), item["requestId"].(string)))
		}
	}
}
