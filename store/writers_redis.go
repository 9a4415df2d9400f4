package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/eisland/isle/internal/kit/groupcommit"
	"github.com/eisland/isle/store/keys"
	"github.com/redis/go-redis/v9"
)

// SettleWriter settles committed ledger entries in the Redis balances
// (Balances.Settle) for concurrent consumers, group-committed like
// LedgerWriter: while one pipeline is out, the entries that arrive queue up
// and go together in the next, so N handlers settling a deduction each
// share one round trip instead of N. Each entry is answered on its own
// (settleEach). Resettle, which a handler needs only for a deduction met
// again, goes to Redis directly. Close it after the consumers stopped.
type SettleWriter struct {
	b      *Balances
	settle *groupcommit.Batcher[SettleEntry, settledEntry]
}

// settledEntry is what one entry of a shared pipeline came to: its result,
// or the error of the pipeline (Redis unreachable).
type settledEntry struct {
	res SettleResult
	err error
}

// NewSettleWriter returns a writer over r.
func NewSettleWriter(r *Redis, observe OnBatch) *SettleWriter {
	b := NewBalances(nil, r)
	w := &SettleWriter{b: b, settle: groupcommit.New("redis settle", WriterBatchMax, func(ctx context.Context, es []SettleEntry) ([]settledEntry, error) {
		return b.settleEach(ctx, es), nil // never the flush's error: see settleEach
	})}
	w.settle.Observe = observing(observe, "redis-settle")
	return w
}

// Settle settles entries as Balances.Settle does, in order, in as few
// pipelines shared with other callers as WriterBatchMax allows. An entry's
// own failure is its SettleResult.Err: the user's data is unreadable
// (ErrBalanceMalformed), or Redis answered its script with an error, which
// Balances.Settle would return for the whole call. The error returned is
// the call's: ctx ended before the entries were queued or answered, the
// writer is closed, or Redis could not be reached for a pipeline that
// carried one of them.
func (w *SettleWriter) Settle(ctx context.Context, entries ...SettleEntry) ([]SettleResult, error) {
	if len(entries) == 0 {
		return []SettleResult{}, nil
	}
	rs, errs := w.settle.DoAll(ctx, entries)
	out := make([]SettleResult, len(entries))
	for i, r := range rs {
		err := errs[i]
		if err == nil {
			err = r.err
		}
		if err != nil {
			return nil, err
		}
		out[i] = r.res
	}
	return out, nil
}

// Resettle is Balances.Resettle, run at once.
func (w *SettleWriter) Resettle(ctx context.Context, e SettleEntry) (ResettleResult, error) {
	return w.b.Resettle(ctx, e)
}

// Close settles the entries queued and stops taking calls.
func (w *SettleWriter) Close() { w.settle.Close() }

// settleEach runs settle.lua for each entry in one pipeline and answers
// each from its own reply: an error reply is that entry's SettleResult.Err,
// the others are settled. Only a pipeline that could not reach Redis fails
// every entry. It never fails as a whole otherwise, because the batcher
// runs a failed flush's items again one by one: the entries the pipeline
// did settle would come back SETTLED, and what they did (an uncovered part,
// a refund) would be lost. Entries the server answered NOSCRIPT (it lost
// its script cache) go again once, after the script is loaded.
func (b *Balances) settleEach(ctx context.Context, es []SettleEntry) []settledEntry {
	r := b.r
	c := r.Client(keys.DBAgentBilling)
	out := make([]settledEntry, len(es))
	todo := make([]int, len(es)) // indexes of the entries still to run
	for i := range todo {
		todo[i] = i
	}
	for pass := 0; len(todo) > 0; pass++ {
		batch := make([]SettleEntry, len(todo))
		for k, i := range todo {
			batch[k] = es[i]
		}
		cmds, _ := r.settlePipeline(ctx, c, batch) // each command holds its own answer
		if err := unreached(cmds); err != nil {
			for _, i := range todo {
				out[i].err = fmt.Errorf("store: settle: %w", err)
			}
			return out
		}
		var again []int
		for k, i := range todo {
			cmd := cmds[k]
			if err := cmd.Err(); redis.HasErrorPrefix(err, "NOSCRIPT") && pass == 0 {
				again = append(again, i)
				continue
			}
			res, err := settleResults(batch[k:k+1], cmds[k:k+1])
			if err != nil {
				out[i].res = SettleResult{Err: err}
				continue
			}
			out[i].res = res[0]
		}
		if len(again) > 0 {
			if err := settleScript.Load(ctx, c).Err(); err != nil {
				for _, i := range again {
					out[i].err = fmt.Errorf("store: settle: %w", err)
				}
				return out
			}
		}
		todo = again
	}
	return out
}

// UsageHashWriter adds usages to the per-model Redis hashes
// (UsageStats.IncrUsage) for concurrent consumers, group-committed like
// SettleWriter: the usages of concurrent calls share one pipeline. Close it
// after the consumers stopped.
type UsageHashWriter struct {
	incr *groupcommit.Batcher[Usage, error]
}

// NewUsageHashWriter returns a writer over r.
func NewUsageHashWriter(r *Redis, observe OnBatch) *UsageHashWriter {
	st := NewUsageStats(nil, r)
	w := &UsageHashWriter{incr: groupcommit.New("redis usage counters", WriterBatchMax, func(ctx context.Context, us []Usage) ([]error, error) {
		return st.incrEach(ctx, us), nil // never the flush's error: see incrEach
	})}
	w.incr.Observe = observing(observe, "redis-usage")
	return w
}

// IncrUsage adds usages to their models' hashes as UsageStats.IncrUsage
// does, in as few pipelines shared with other callers as WriterBatchMax
// allows. It returns the first usage's error: Redis refused one of its
// commands (a key of another type, a count past int64), could not be
// reached for its pipeline, or ctx ended before it was queued or answered.
// The other usages of a pipeline are counted once whatever one of them met.
func (w *UsageHashWriter) IncrUsage(ctx context.Context, us []Usage) error {
	if len(us) == 0 {
		return nil
	}
	rs, errs := w.incr.DoAll(ctx, us)
	for i, err := range errs {
		if err == nil {
			err = rs[i]
		}
		if err != nil {
			return fmt.Errorf("store: usage counters: %w", err)
		}
	}
	return nil
}

// Close counts the usages queued and stops taking calls.
func (w *UsageHashWriter) Close() { w.incr.Close() }

// incrEach adds the usages to their models' hashes in one pipeline: the
// usages of one model summed, so a pipeline carries one model's commands
// once (a batch of many usages of few models is a few commands), and each
// usage answered from its model's replies — a usage's commands could only
// fail for its model's key (a key of another type, a count past int64),
// which fails every usage of the model alike. Only a pipeline that could
// not reach Redis fails every usage. It never fails as a whole otherwise:
// the batcher would run the usages again one by one, and HINCRBY would
// count twice the ones the pipeline counted.
func (st *UsageStats) incrEach(ctx context.Context, us []Usage) []error {
	r := st.r
	type model struct {
		sum      Usage
		requests int64
		cmds     []redis.Cmder
	}
	var models []model
	at := make([]int, len(us)) // each usage's model, by index in models
	for i, u := range us {
		k := slices.IndexFunc(models, func(m model) bool { return m.sum.Model == u.Model })
		if k < 0 {
			k = len(models)
			models = append(models, model{sum: Usage{Model: u.Model}})
		}
		m := &models[k]
		m.sum.InputTokens += u.InputTokens
		m.sum.CachedTokens += u.CachedTokens
		m.sum.OutputTokens += u.OutputTokens
		m.sum.ReasoningTokens += u.ReasoningTokens
		m.sum.CostMicroFen += u.CostMicroFen
		m.requests++
		at[i] = k
	}
	cmds, _ := r.Client(keys.DBAgentPricing).Pipelined(ctx, func(p redis.Pipeliner) error {
		for k := range models {
			models[k].cmds = queueUsage(ctx, p, r.Keys(), models[k].sum, models[k].requests)
		}
		return nil
	})
	errs := make([]error, len(us))
	if err := unreached(cmds); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for i, k := range at {
		for _, cmd := range models[k].cmds {
			if err := cmd.Err(); err != nil {
				errs[i] = fmt.Errorf("usage %s of %s: %w", us[i].RequestID, us[i].Model, err)
				break
			}
		}
	}
	return errs
}

// unreached returns the first error of cmds that is not Redis's answer to
// its command: the command did not reach Redis, or its answer did not come
// back (a broken connection, a timeout).
func unreached[C redis.Cmder](cmds []C) error {
	for _, cmd := range cmds {
		var reply redis.Error
		if err := cmd.Err(); err != nil && !errors.As(err, &reply) {
			return err
		}
	}
	return nil
}
