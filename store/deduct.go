package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
)

// Deduct runs deduct.lua: it takes min(balance, amount) from the
// user's balance and records the deduction as pending, atomically. Running it
// again with the same id, also after a client-side retry whose first reply was
// lost, changes nothing and returns the first result with Replayed set; with
// another request hash it returns ErrRequestConflict and the first charge.
// A zero amount is a charge that takes nothing (also from an empty balance).
//
// Deduct sends the script once: an error that is not the script's answer
// (ErrBalanceMissing, ErrBalanceMalformed, ErrBalanceEmpty,
// ErrRequestConflict) is ErrMaybeRan when the script may have run, and
// otherwise says it did not run this time (a refused dial, a READONLY
// reply, a pool timeout). Retrying is the caller's: Answered tells which
// errors end it.
func (b *Balances) Deduct(ctx context.Context, req DeductRequest) (Taken, error) {
	ts, errs := b.DeductAll(ctx, []DeductRequest{req})
	return ts[0], errs[0]
}

// DeductAll runs Deduct for each request in one round trip to Redis: one
// pipeline of deduct.lua calls, in order, so that the deductions of one
// user apply in the order given. Each request gets its own Taken or error,
// as Deduct answers it; a broken connection gives every request not yet
// answered ErrMaybeRan.
func (b *Balances) DeductAll(ctx context.Context, reqs []DeductRequest) ([]Taken, []error) {
	taken, errs := make([]Taken, len(reqs)), make([]error, len(reqs))
	send := make([]int, 0, len(reqs)) // the requests that go to Redis
	for i, req := range reqs {
		if errs[i] = checkDeduct(req); errs[i] == nil {
			send = append(send, i)
		}
	}
	for try := 0; len(send) > 0; try++ {
		cmds := b.deductPipeline(ctx, reqs, send)
		var noScript []int
		for k, i := range send {
			res, err := cmds[k].Text()
			if redis.HasErrorPrefix(err, "NOSCRIPT") && try == 0 {
				noScript = append(noScript, i) // the script did not run: load it and go again, once
				continue
			}
			taken[i], errs[i] = deductAnswer(reqs[i], res, err)
		}
		if len(noScript) == 0 {
			break
		}
		if err := deductScript.Load(ctx, b.r.deductOnce).Err(); err != nil {
			for _, i := range noScript {
				errs[i] = fmt.Errorf("store: deduct %s: load the script: %w", reqs[i].ID, err)
			}
			break
		}
		send = noScript
	}
	return taken, errs
}

// checkDeduct refuses a request deduct.lua could not keep.
func checkDeduct(req DeductRequest) error {
	switch {
	case req.Amount.Round(MoneyScale).IsNegative():
		return fmt.Errorf("store: deduct %s: amount %s: %w", req.ID, req.Amount, ErrBalanceMalformed)
	case req.Username == "" || req.ID == "":
		return fmt.Errorf("store: deduct: username and deduction id are required")
	case strings.Contains(req.Ref+req.RequestHash, "|") || req.Usage != nil && strings.Contains(req.Usage.Model, "|"):
		return fmt.Errorf("store: deduct %s: ref, hash and usage may not hold \"|\"", req.ID)
	}
	return nil
}

// deductPipeline sends one EVALSHA of deduct.lua per request of send, in
// one pipeline, through the client that tries each command once (each try
// seen by the caller, who retries: ErrMaybeRan).
func (b *Balances) deductPipeline(ctx context.Context, reqs []DeductRequest, send []int) []*redis.Cmd {
	r := b.r
	cmds := make([]*redis.Cmd, len(send))
	ttl := int64(keys.DeductionMarkerTTL / time.Second)
	_, _ = r.deductOnce.Pipelined(ctx, func(p redis.Pipeliner) error {
		for k, i := range send {
			req := reqs[i]
			ks := []string{r.keys.AgentBalance(req.Username), r.keys.AgentPending(req.Username), r.keys.AgentDeduction(req.Username, req.ID)}
			cmds[k] = deductScript.EvalSha(ctx, p, ks, req.Amount.Round(MoneyScale).StringFixed(MoneyScale), req.ID, req.Now.UnixMilli(),
				ttl, req.Ref, req.RequestHash, req.Usage.String())
		}
		return nil
	}) // each command carries its own error
	return cmds
}

// deductAnswer reads deduct.lua's answer res (or the command's error) to
// req.
func deductAnswer(req DeductRequest, res string, err error) (Taken, error) {
	if err != nil {
		return Taken{}, fmt.Errorf("store: deduct %s: %w", req.ID, maybeRan(err))
	}
	switch res {
	case "-1":
		return Taken{}, ErrBalanceMissing
	case "-2":
		return Taken{}, fmt.Errorf("store: deduct %s: %w", req.ID, ErrBalanceMalformed)
	case "-3":
		return Taken{}, ErrBalanceEmpty
	}
	t, err := parseDeduction(res)
	if err != nil {
		return t, err // ErrRequestConflict comes with the first charge
	}
	if !t.Replayed {
		t.Ref, t.Cost = req.Ref, req.Amount.Round(MoneyScale)
	}
	return t, nil
}

// Answered reports whether err, from Deduct, is deduct.lua's own answer
// (nil included): the script ran and said what it did. Any other error
// leaves the try's outcome to ErrMaybeRan.
func Answered(err error) bool {
	return err == nil || errors.Is(err, ErrBalanceMissing) || errors.Is(err, ErrBalanceMalformed) ||
		errors.Is(err, ErrBalanceEmpty) || errors.Is(err, ErrRequestConflict)
}
