package httpapi

import (
	"cmp"
	"errors"
	"net/http"

	"github.com/eisland/isle/internal/kit/correlation"
	"github.com/eisland/isle/internal/kit/messaging"
	"github.com/eisland/isle/internal/service/billing"
)

// UsageBatchMaxDefault is how many usages POST /v1/agent/usage/batch takes
// at most unless Config.UsageBatchMax says otherwise; UsageBatchMaxLimit is
// the most it may say.
const (
	UsageBatchMaxDefault = 100
	UsageBatchMaxLimit   = 1000
)

// usageItemMaxBody bounds one item of a batch in the body's limit: a usage
// record is well under it (128 + 64 + 128 bytes of text and four numbers).
const usageItemMaxBody = 1 << 10

// usageBatchMaxBody is the body limit of a batch of up to n items.
func usageBatchMaxBody(n int) int64 { return int64(n+1) * usageItemMaxBody }

type usageBatch struct {
	Items []usageRequest `json:"items"`
}

// batchResult is one item's answer in a batch: the status the single
// endpoint would have answered, and its body (the charge, or the error).
type batchResult struct {
	Status int            `json:"status"`
	Charge *chargeAnswer  `json:"charge,omitempty"`
	Error  map[string]any `json:"error,omitempty"`
}

type batchAnswer struct {
	Results []batchResult `json:"results"`
}

// agentUsageBatch charges a batch of model calls (doc/money.md, "Batches"):
// each item as POST /v1/agent/usage would, answered in the request's
// order with the status and body that endpoint would have given it, with
// one round trip to Redis for all the deductions (billing.ChargeAll) and
// every message published before any confirm is awaited
// (messaging.PublishAll). Only a malformed envelope fails the batch (400),
// or one of more items than the limit (413).
func (s *Server) agentUsageBatch(w http.ResponseWriter, r *http.Request) error {
	var batch usageBatch
	if err := DecodeJSON(r, &batch); err != nil {
		return err
	}
	limit := s.usageBatchMax()
	switch n := len(batch.Items); {
	case batch.Items == nil:
		return BadRequest("items: want an array of usage records")
	case n > limit:
		return Errorf(http.StatusRequestEntityTooLarge, CodeTooLarge, "%d items: a batch takes at most %d", n, limit)
	}
	results := make([]batchResult, len(batch.Items))
	var reqs []billing.Request
	var at []int
	for i, item := range batch.Items {
		if err := item.validate(); err != nil {
			results[i] = failedItem(err)
			continue
		}
		reqs = append(reqs, item.charge())
		at = append(at, i)
	}
	charges := s.backends.Billing.ChargeAll(r.Context(), reqs)
	var pubs []messaging.Publication
	type sent struct { // a charged item, in order, and how many of pubs are its messages
		at, pubs int
		ch       billing.Charge
	}
	var items []sent
	for k, res := range charges {
		i, req := at[k], batch.Items[at[k]]
		if res.Err != nil {
			results[i] = failedItem(chargeRefusal(req, res.Charge, res.Err))
			continue
		}
		usage := usageMessage(req, res.Charge)
		pubs = append(pubs, messaging.Publication{Msg: usage, Options: messaging.Options{MessageID: req.usageMessageID()}})
		n := 1
		if res.Charge.Deducted.IsPositive() {
			pubs = append(pubs, messaging.Publication{Msg: deductMessage(req, res.Charge), Options: messaging.Options{MessageID: req.deductMessageID()}})
			n = 2
		}
		items = append(items, sent{at: i, pubs: n, ch: res.Charge})
		answer := answerCharge(req, res.Charge, LedgerQueued)
		results[i] = batchResult{Status: http.StatusOK, Charge: &answer}
	}
	errs := s.publishAll(r, pubs)
	var deferrals []deferred
	var firstErr error
	p := 0
	for _, it := range items {
		err := errors.Join(errs[p : p+it.pubs]...)
		p += it.pubs
		if err == nil {
			continue
		}
		req, ch := batch.Items[it.at], it.ch
		if !ch.Deducted.IsPositive() {
			// Nothing was charged: a failure is the client's to retry.
			results[it.at] = failedItem(Unavailable("publish", err))
			continue
		}
		// The charge stands; its messages go to the outbox (agentUsage).
		results[it.at].Charge.Ledger = LedgerDeferred
		deferrals = append(deferrals, deferred{req, ch, usageMessage(req, ch)})
		firstErr = cmp.Or(firstErr, err)
	}
	if len(deferrals) > 0 {
		s.deferCharges(r, deferrals, firstErr)
	}
	return JSON(w, http.StatusOK, batchAnswer{Results: results})
}

// usageBatchMax is the most items a batch takes.
func (s *Server) usageBatchMax() int { return cmp.Or(s.cfg.UsageBatchMax, UsageBatchMaxDefault) }

// publishAll publishes the records of a request, all before any confirm is
// awaited; without a publisher each fails.
func (s *Server) publishAll(r *http.Request, pubs []messaging.Publication) []error {
	errs := make([]error, len(pubs))
	if s.backends.Publisher == nil {
		for i := range errs {
			errs[i] = errors.New("no publisher")
		}
		return errs
	}
	trace := correlation.RequestID(r.Context())
	for i := range pubs {
		pubs[i].TraceID = cmp.Or(pubs[i].TraceID, trace)
	}
	return s.backends.Publisher.PublishAll(r.Context(), pubs)
}

// failedItem is the result of an item the single endpoint would have
// answered err.
func failedItem(err error) batchResult {
	e := asError(err)
	return batchResult{Status: e.Status, Error: e.object()}
}
