package reconcile

import (
	"context"
	"errors"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/eisland/isle/topology"
)

// applyPending applies the pending deductions older than PendingAge.
func (j *BalanceSync) applyPending(ctx context.Context, res *BalanceResult) error {
	cutoff := j.now().Add(-j.cfg.PendingAge)
	return j.rdb.ScanUsers(ctx, keys.AgentPending, j.cfg.Batch, func(users []string) error {
		pending, bad, err := j.balances.PendingOf(ctx, users)
		if err != nil {
			return err
		}
		for user, err := range bad {
			j.unreadable(res, user, err)
		}
		var debits []store.Debit
		var usage []store.Usage
		for user, entries := range pending {
			for _, e := range entries {
				if e.At.Before(cutoff) {
					debits = append(debits, pendingDebit(user, e))
					if u := e.Usage; u != nil {
						usage = append(usage, pendingUsage(user, e))
					}
				}
			}
		}
		// The usage first, as the API publishes it: once a deduction is
		// applied, its record and the copy of the usage in it are gone.
		if err := j.countUsage(ctx, usage, res); err != nil {
			return err
		}
		for start := 0; start < len(debits); start += debitChunk {
			if err := j.applyDebits(ctx, debits[start:min(start+debitChunk, len(debits))], res); err != nil {
				return err
			}
		}
		return nil
	})
}

// pendingUsage is the usage a pending record carries, counted under the key
// the usage consumer gives the API's usage message, on the day of the
// request.
func pendingUsage(user string, e store.PendingDeduction) store.Usage {
	u := e.Usage
	return store.Usage{RequestID: store.RequestKey(store.UsageRequestID(user, e.ID), store.UsageKeyMax), Model: u.Model, Day: e.At.In(topology.UTC8), InputTokens: u.Input,
		CachedTokens: u.Cached, OutputTokens: u.Output, ReasoningTokens: u.Reasoning, CostMicroFen: u.CostMF}
}

// countUsage counts the usage of pending deductions whose message may never
// have been sent (the API could not publish it); one the usage consumer
// counted already is not counted again.
func (j *BalanceSync) countUsage(ctx context.Context, usage []store.Usage, res *BalanceResult) error {
	if len(usage) == 0 {
		return nil
	}
	counted, err := j.usage.ApplyUsage(ctx, usage)
	if err != nil {
		return err
	}
	var now []store.Usage
	for i, c := range counted {
		if c {
			now = append(now, usage[i])
		}
	}
	if len(now) == 0 {
		return nil
	}
	res.UsageCounted += len(now)
	return j.usage.IncrUsage(ctx, now)
}

// pendingDebit is the ledger debit of a pending record.
func pendingDebit(user string, e store.PendingDeduction) store.Debit {
	d := store.Debit{Username: user, ID: e.ID, Amount: e.Deducted, OccurredAt: e.At, Source: "reconciler", Ref: e.Ref, RequestHash: e.RequestHash}
	if u := e.Usage; u != nil {
		d.ModelName, d.InputTokens, d.OutputTokens = u.Model, u.Input, u.Output
	}
	return d
}

func (j *BalanceSync) applyDebits(ctx context.Context, debits []store.Debit, res *BalanceResult) error {
	results, err := j.ledger.ApplyDebits(ctx, debits)
	if err != nil {
		return err
	}
	var settle []store.SettleEntry
	for i, r := range results {
		d := debits[i]
		switch {
		case r.Err != nil:
			res.Errors++
			j.log.Error("pending deduction cannot be applied", "user", d.Username, "deduction", d.ID, "err", r.Err)
			continue
		case r.Applied:
			res.PendingApplied++
			j.log.Warn("applied a deduction whose message never arrived", "user", d.Username, "deduction", d.ID, "amount", r.Amount)
		case r.Settled:
			if err := j.resettle(ctx, d, r, res); err != nil {
				return err
			}
			continue
		default:
			res.PendingCleared++ // applied by someone who died before the Redis side
		}
		settle = append(settle, store.SettleEntry{Username: d.Username, Kind: store.SettleDeduction, EntryID: d.ID,
			Amount: r.Amount, Seq: r.Seq, Deducted: r.Amount.Add(r.Shortfall), Ref: r.Ref, RequestHash: r.RequestHash})
	}
	if len(settle) == 0 {
		return nil
	}
	_, err = j.settle(ctx, settle, res)
	return err
}

// resettle deals with the pending record of a deduction the ledger settled
// before: the row's own record, back with an older Redis, is cleared; a
// second charge of the id is refunded.
func (j *BalanceSync) resettle(ctx context.Context, d store.Debit, r store.DebitResult, res *BalanceResult) error {
	out, err := j.balances.Resettle(ctx, store.SettleEntry{Username: d.Username, Kind: store.SettleDeduction, EntryID: d.ID,
		Amount: r.Amount, Seq: r.Seq, Deducted: r.Amount.Add(r.Shortfall), Ref: r.Ref, RequestHash: r.RequestHash})
	switch {
	case errors.Is(err, store.ErrBalanceMalformed):
		j.unreadable(res, d.Username, err)
	case err != nil:
		return err
	case out.Outcome == store.ResettleRefunded:
		res.Refunded++
		j.log.Warn("request id charged again after Redis forgot it; the second charge is refunded",
			"user", d.Username, "deduction", d.ID, "refunded", out.Refunded)
	default:
		res.PendingCleared++
	}
	return nil
}

// settle reflects entries in the Redis balances and records in MySQL those
// it settled, which it returns. It says which deductions the balance could
// not take in full (SettleResult.Uncovered); an entry of a user whose Redis
// data is unreadable is reported and left unsettled.
func (j *BalanceSync) settle(ctx context.Context, entries []store.SettleEntry, res *BalanceResult) (int, error) {
	out, err := j.balances.Settle(ctx, entries...)
	if err != nil {
		return 0, err
	}
	var marks []store.EntryKey
	for i, r := range out {
		e := entries[i]
		if r.Err != nil {
			j.unreadable(res, e.Username, r.Err)
			continue
		}
		if r.Uncovered.IsPositive() {
			j.log.Warn("deduction settled after a Redis loss on a balance already spent; the part it could not take is forgiven",
				"user", e.Username, "deduction", e.EntryID, "uncovered", r.Uncovered)
		}
		if r.Outcome == store.SettleRefunded {
			res.Refunded++
			j.log.Warn("request id charged again after Redis forgot it; the second charge is refunded",
				"user", e.Username, "deduction", e.EntryID, "refunded", r.Refunded)
		}
		marks = append(marks, e.Key())
	}
	return len(marks), j.ledger.MarkSettled(ctx, marks...)
}

// settleLeftovers finishes the Redis side of ledger entries a crash or a
// Redis error left unsettled for longer than PendingAge. It pages past the
// entries it cannot settle (their users' Redis data is unreadable), so they
// cannot hold back the ones after them.
func (j *BalanceSync) settleLeftovers(ctx context.Context, res *BalanceResult) error {
	cutoff := j.now().Add(-j.cfg.PendingAge)
	var after uint64
	for {
		rows, err := j.ledger.Unsettled(ctx, cutoff, after, j.cfg.Batch)
		if err != nil || len(rows) == 0 {
			return err
		}
		after = rows[len(rows)-1].ID
		var settle []store.SettleEntry
		var marks []store.EntryKey // entries with no Redis side (adjustments)
		for _, row := range rows {
			if e, ok := store.SettleEntryOf(row); ok {
				settle = append(settle, e)
			} else {
				marks = append(marks, row.Key())
			}
		}
		if err := j.ledger.MarkSettled(ctx, marks...); err != nil {
			return err
		}
		if len(settle) > 0 {
			n, err := j.settle(ctx, settle, res)
			if err != nil {
				return err
			}
			res.Settled += n
			j.log.Warn("settled ledger entries left unsettled", "entries", n)
		}
		if len(rows) < j.cfg.Batch {
			return nil
		}
	}
}
