package billing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eisland/isle/store"
)

// Result is one request's outcome in ChargeAll: what Charge would have
// returned for it.
type Result struct {
	Charge Charge
	Err    error
}

// resolveFor bounds how long a charge whose answer was lost is asked again,
// within the request's own deadline.
const resolveFor = 5 * time.Second

// notRunRetries is how many times a charge none of whose tries can have
// run (a refused dial, a READONLY reply, a pool timeout) is tried again:
// the retries go-redis would make, which the deduct client leaves to us.
const notRunRetries = 3

// ChargeAll charges each request as Charge would, with one round trip to
// Redis for all of them (store.Balances.DeductAll: a pipeline of
// deduct.lua calls, in order, so a user's requests apply in the order
// given), and more only for those that need it: the users whose balance
// is missing are initialised from MySQL and their requests run again; the
// users whose balance is empty have their recharges settled and their
// requests run once more; a request whose try did not answer is tried
// again with the others that did not. Each request gets its own Result.
//
// A try that did not answer is retried, the same request (the same id, ref
// and body, so the script answers it once), backing off from 50 ms to
// 500 ms: up to notRunRetries times more while none of its tries can have
// run, and for up to resolveFor once one may have (store.ErrMaybeRan: a
// connection reset or a timeout after the script was sent), whatever the
// later tries meet. Only the script's answer settles such a request; when
// none comes in time its error is ErrOutcomeUnknown, never "not charged".
func (s *Service) ChargeAll(ctx context.Context, rs []Request) []Result {
	out := make([]Result, len(rs))
	items := s.price(ctx, rs, out)
	s.deductAll(ctx, items)
	for _, it := range items {
		out[it.at] = it.result(rs[it.at])
	}
	return out
}

// charge is one request of ChargeAll on its way through the rounds.
type charge struct {
	at        int // its index in the requests
	req       store.DeductRequest
	c         Charge
	taken     store.Taken
	err       error
	uncertain bool // some try may have run the script (store.ErrMaybeRan)
	tries     int  // tries that did not answer
	ensured   bool // its user's balance was initialised after a "missing"
	settled   bool // its user's recharges were settled after an "empty"
}

// price prices each request (a model's price read once for the batch) and
// makes its deduction request; a request that cannot be priced gets its
// Result now.
func (s *Service) price(ctx context.Context, rs []Request, out []Result) []*charge {
	type price struct {
		p   store.Pricing
		err error
	}
	prices := map[string]price{}
	now := s.now()
	items := make([]*charge, 0, len(rs))
	for i, r := range rs {
		pr, ok := prices[r.Model]
		if !ok {
			pr.p, pr.err = s.prices.Get(ctx, r.Model)
			prices[r.Model] = pr
		}
		if pr.err != nil {
			out[i].Err = pr.err
			continue
		}
		it := &charge{at: i}
		var err error
		if it.c.Cost, it.c.CostMicroFen, err = Cost(pr.p, r.Tokens); err != nil {
			out[i].Err = err
			continue
		}
		it.c.RequestHash = r.Hash()
		it.req = store.DeductRequest{Username: r.Username, ID: r.ID, Amount: it.c.Cost, Now: now, Ref: store.NewRef(), RequestHash: it.c.RequestHash,
			Usage: &store.UsageData{Model: r.Model, Input: r.Tokens.Input, Cached: r.Tokens.Cached, Output: r.Tokens.Output,
				Reasoning: r.Tokens.Reasoning, CostMF: it.c.CostMicroFen}}
		items = append(items, it)
	}
	return items
}

// deductAll runs the rounds of ChargeAll until every charge has its answer
// or gives up.
func (s *Service) deductAll(ctx context.Context, items []*charge) {
	wait := 50 * time.Millisecond
	deadline := time.Now().Add(resolveFor)
	for todo := items; len(todo) > 0; {
		reqs := make([]store.DeductRequest, len(todo))
		for k, it := range todo {
			reqs[k] = it.req
		}
		taken, errs := s.balances.DeductAll(ctx, reqs)
		var again []*charge
		missing, empty := map[string]bool{}, map[string]bool{}
		retry := false // a try that did not answer goes again: back off first
		for k, it := range todo {
			it.taken, it.err = taken[k], errs[k]
			it.uncertain = it.uncertain || errors.Is(it.err, store.ErrMaybeRan)
			switch {
			case errors.Is(it.err, store.ErrBalanceMissing) && !it.ensured:
				it.ensured, missing[it.req.Username] = true, true
				again = append(again, it)
			case errors.Is(it.err, store.ErrBalanceEmpty) && !it.settled:
				it.settled, empty[it.req.Username] = true, true
				again = append(again, it)
			case store.Answered(it.err):
			case it.uncertain && time.Now().Add(wait).Before(deadline), !it.uncertain && it.tries < notRunRetries:
				it.tries++
				retry = true
				again = append(again, it)
			}
		}
		again = s.prepare(ctx, again, missing, empty)
		if retry && len(again) > 0 && !pause(ctx, wait) {
			return // each keeps its last try's error
		}
		wait = min(2*wait, 500*time.Millisecond)
		todo = again
	}
}

// prepare readies the users of the charges going again: a missing balance
// is initialised from MySQL (once: a balance that keeps vanishing is an
// error rather than a loop), an empty one has the user's recharges
// settled, as a paid order is spendable as soon as it says PAID (once more
// even when this settle found nothing: the payment consumer's own may have
// landed since). A charge whose user could not be readied keeps its error:
// the initialisation's, or the "empty" it had.
func (s *Service) prepare(ctx context.Context, again []*charge, missing, empty map[string]bool) []*charge {
	if len(missing) == 0 && len(empty) == 0 {
		return again
	}
	unready := map[string]error{} // user: why their balance could not be initialised
	for user := range missing {
		if _, err := s.balances.Ensure(ctx, user); err != nil {
			unready[user] = err
		}
	}
	if len(empty) > 0 && s.settling != nil {
		s.settling()
	}
	unsettled := map[string]bool{}
	for user := range empty {
		if _, err := s.balances.SettleCredits(ctx, user); err != nil {
			unsettled[user] = true
		}
	}
	kept := again[:0]
	for _, it := range again {
		switch u := it.req.Username; {
		case errors.Is(it.err, store.ErrBalanceMissing) && unready[u] != nil:
			it.err = unready[u]
		case errors.Is(it.err, store.ErrBalanceEmpty) && unsettled[u]:
			// stays empty: no balance
		default:
			kept = append(kept, it)
		}
	}
	return kept
}

// result is what Charge answers for the charge of r.
func (it *charge) result(r Request) Result {
	c, taken, err := it.c, it.taken, it.err
	switch {
	case errors.Is(err, store.ErrBalanceEmpty):
		return Result{c, ErrNoBalance}
	case errors.Is(err, store.ErrRequestConflict):
		c.Deducted, c.Replayed = taken.Deducted, true
		return Result{c, ErrConflict}
	case err != nil && it.uncertain && !store.Answered(err):
		// Once a try may have run, only a script's answer settles the
		// outcome: a later refused dial, READONLY or pool timeout (a
		// Redis failover) says nothing about the first try.
		return Result{c, fmt.Errorf("billing: charge %s: %w: %w", r.ID, ErrOutcomeUnknown, err)}
	case err != nil:
		return Result{c, fmt.Errorf("billing: charge %s: %w", r.ID, err)}
	}
	if taken.Replayed && taken.Ref == it.req.Ref {
		// A replay of this call's own charge: an earlier try of the script
		// took it and its answer was lost.
		taken.Replayed = false
	}
	c.Deducted, c.Balance, c.Replayed, c.Ref = taken.Deducted, taken.Balance, taken.Replayed, taken.Ref
	if c.Replayed {
		c.Cost, c.CostMicroFen = taken.Cost, microFen(taken.Cost)
	}
	return Result{c, nil}
}

// pause waits d; false when ctx ends first.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
