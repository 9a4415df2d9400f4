package reconcile

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/shopspring/decimal"
)

// compare checks each quiet user's Redis side against MySQL, the record
// (doc/money.md, "balance-sync"). Quiet: no pending deduction, no unsettled ledger
// entry, no ledger entry newer than Quiet. Then:
//   - Redis behind: its count of reflected ledger entries is below MySQL's
//     hot_entries. It came back from an older snapshot and its balance is
//     wrong: it is rebuilt from MySQL at once.
//   - Redis that cannot say how many entries it reflects (set by someone
//     else, such as a Spring producer initialising a missing balance):
//     rebuilt from MySQL.
//   - every entry reflected, Redis above MySQL: Redis forgot a deduction
//     MySQL has (a producer's own, lost with Redis), or took less for a
//     retry after a loss: rebuilt. MySQL is never corrected up to Redis.
//   - every entry reflected, Redis below MySQL: Redis took deductions MySQL
//     never got (a producer's message lost). MySQL is brought down to it
//     with an ADJUST ledger row naming both values.
//   - Redis reflecting more entries than MySQL holds: MySQL went back (a
//     restored backup?); reported, nothing changed.
//
// All but the first wait for the end of the scan, and for no deduction
// message that may still move the user's money (see correctAll).
func (j *BalanceSync) compare(ctx context.Context, res *BalanceResult) error {
	lastProgress := time.Now()
	var drifts []drift
	err := j.rdb.ScanUsers(ctx, keys.AgentBalance, j.cfg.Batch, func(users []string) error {
		t0 := j.now()
		hot, rows, err := j.read(ctx, users)
		if err != nil {
			return err
		}
		for _, row := range rows {
			res.UsersScanned++
			d, err := j.compareOne(ctx, row, hot[row.Username], t0, res)
			if err != nil {
				return err
			}
			if d != nil {
				drifts = append(drifts, *d)
			}
		}
		if time.Since(lastProgress) > progressEvery {
			lastProgress = time.Now()
			j.log.Info("balance-sync progress", "users_scanned", res.UsersScanned, "drift_found", res.DriftFound)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return j.correctAll(ctx, drifts, res)
}

// read reads users' Redis side, then their accounts: what a comparison
// compares.
func (j *BalanceSync) read(ctx context.Context, users []string) (map[string]store.HotBalance, []store.Activity, error) {
	hot, err := j.balances.Hot(ctx, users)
	if err != nil {
		return nil, nil, err
	}
	rows, err := j.ledger.Activity(ctx, users)
	if err != nil {
		return nil, nil, fmt.Errorf("reconcile: %w", err)
	}
	return hot, rows, nil
}

// drift is a quiet user to correct once no deduction message can still
// move its money: its Redis side as read, and what to do.
type drift struct {
	row    store.Activity
	hot    store.HotBalance
	adjust bool   // bring MySQL down to Redis; else rebuild Redis from MySQL
	why    string // for a rebuild, the log's reason
}

// quiet reports whether a user can be compared: no pending deduction, no
// unsettled entry, no ledger entry newer than Quiet.
func (j *BalanceSync) quiet(row store.Activity, h store.HotBalance, now time.Time) bool {
	return h.Pending == 0 && !row.Unsettled && (row.Last == nil || !row.Last.After(now.Add(-j.cfg.Quiet)))
}

// compareOne compares one user. A Redis behind MySQL is rebuilt now; a
// user to correct otherwise is returned.
func (j *BalanceSync) compareOne(ctx context.Context, row store.Activity, h store.HotBalance, t0 time.Time, res *BalanceResult) (*drift, error) {
	switch {
	case h.Malformed != "":
		j.unreadable(res, row.Username, fmt.Errorf("balance %.40q: %w", h.Malformed, store.ErrBalanceMalformed))
		return nil, nil
	case !h.Present:
		return nil, nil
	case !j.quiet(row, h, t0):
		res.Busy++
		return nil, nil
	}
	hotBal := hotBalance(h)
	differ := !hotBal.Equal(row.BalanceFen)
	if differ {
		res.DriftFound++
	}
	switch {
	case h.EntriesKnown && h.Entries < row.HotEntries:
		why := fmt.Sprintf("Redis is behind MySQL: its balance reflects %d of %d ledger entries", h.Entries, row.HotEntries)
		return nil, j.rebuild(ctx, row, h, why, res)
	case !h.EntriesKnown:
		return &drift{row: row, hot: h, why: "Redis does not say which ledger entries its balance reflects"}, nil
	case h.Entries > row.HotEntries:
		res.Errors++
		j.log.Error("Redis reflects more ledger entries than MySQL holds (was MySQL restored from an older backup?); nothing changed",
			"user", row.Username, "redis_entries", h.Entries, "mysql_entries", row.HotEntries, "redis", hotBal, "mysql", row.BalanceFen)
		return nil, nil
	case !differ:
		return nil, nil
	case hotBal.GreaterThan(row.BalanceFen):
		return &drift{row: row, hot: h, why: "Redis is above MySQL: it forgot a deduction MySQL has"}, nil
	}
	return &drift{row: row, hot: h, adjust: true}, nil
}

// hotBalance is a hot balance as MySQL would hold it: 8 places (more would
// be a drift no ADJUST can write).
func hotBalance(h store.HotBalance) decimal.Decimal { return h.Balance.Round(store.MoneyScale) }

// correctAll corrects the drifts no deduction message can still move
// (doc/money.md, "Deductions other producers take"). A Spring producer
// takes a deduction in Redis with its own script and leaves no pending
// record: until its message lands, Redis is below MySQL by it, exactly as
// when the message was lost, and a rebuild from MySQL would hand the money
// back. So the gate (InFlight) is asked what may still arrive: a stored
// dead message that a replay may still apply holds back its own user's
// drift; messages in the queues, whose users cannot be read, or a gate
// that cannot answer, hold back every drift. After ConfirmDelay (longer
// than a producer takes to publish, and than the broker's statistics
// lag), the gate is asked again and each user read again: a user that
// moved, or whose Redis side changed, is left for the next run.
func (j *BalanceSync) correctAll(ctx context.Context, drifts []drift, res *BalanceResult) error {
	if drifts = j.unheld(ctx, drifts, res); len(drifts) == 0 {
		return nil
	}
	if j.cfg.ConfirmDelay > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(j.cfg.ConfirmDelay):
		}
		if drifts = j.unheld(ctx, drifts, res); len(drifts) == 0 {
			return nil
		}
	}
	users := make([]string, len(drifts))
	for i, d := range drifts {
		users[i] = d.row.Username
	}
	t0 := j.now()
	hot, rows, err := j.read(ctx, users)
	if err != nil {
		return err
	}
	now := make(map[string]store.Activity, len(rows))
	for _, r := range rows {
		now[r.Username] = r
	}
	for _, d := range drifts {
		row, h := now[d.row.Username], hot[d.row.Username]
		same := h.Present && h.EntriesKnown == d.hot.EntriesKnown && h.Entries == d.hot.Entries && hotBalance(h).Equal(hotBalance(d.hot)) &&
			row.LedgerSeq == d.row.LedgerSeq && row.BalanceFen.Equal(d.row.BalanceFen)
		switch {
		case !same || !j.quiet(row, h, t0):
			res.Busy++
		case d.adjust:
			j.adjust(ctx, row, hotBalance(h), t0, res)
		default:
			if err := j.rebuild(ctx, row, h, d.why, res); err != nil {
				return err
			}
		}
	}
	return nil
}

// unheld asks the gate what may still arrive and returns the drifts none
// of it can move; the others are deferred, each with what held it back.
func (j *BalanceSync) unheld(ctx context.Context, drifts []drift, res *BalanceResult) []drift {
	if len(drifts) == 0 {
		return nil
	}
	h, err := j.inflight.DeductionsInFlight(ctx)
	all, count := h.All, &res.DeferredInFlight
	if err != nil {
		all, count = "cannot tell whether a deduction message may still arrive: "+err.Error(), &res.DeferredUnknown
	}
	if all != "" {
		for _, d := range drifts {
			res.Deferred++
			*count++
			res.Deferrals = append(res.Deferrals, Deferral{User: d.row.Username, Why: all})
		}
		j.log.Warn("balance drifts left for a later run: a deduction message may still arrive for any user", "users", len(drifts), "why", all)
		return nil
	}
	held := h.Held()
	var free []drift
	for _, d := range drifts {
		refs := held[d.row.Username]
		if len(refs) == 0 {
			free = append(free, d)
			continue
		}
		res.Deferred++
		res.DeferredDead++
		res.Deferrals = append(res.Deferrals, Deferral{User: d.row.Username, Messages: refs})
		j.log.Warn("balance drift left for a later run: a stored dead message may still move it (replay it, and the drift is settled)",
			"user", d.row.Username, "messages", strings.Join(refs, " "))
	}
	var inert []string
	for _, d := range h.Dead {
		if !d.Holds {
			inert = append(inert, d.Ref.String()+": "+d.Why)
		}
	}
	if len(inert) > 0 {
		j.log.Info("stored dead billing messages that can never apply hold no drift back", "count", len(inert), "first", inert[:min(len(inert), 10)])
	}
	return free
}

// rebuild drops the user's hot balance, if unchanged since it was read,
// and initialises it from MySQL as after a Redis loss.
func (j *BalanceSync) rebuild(ctx context.Context, row store.Activity, h store.HotBalance, why string, res *BalanceResult) error {
	dropped, err := j.balances.Reset(ctx, row.Username, h)
	if err != nil {
		return err
	}
	if !dropped {
		res.Busy++ // the user moved meanwhile; the next run looks again
		return nil
	}
	if _, err := j.balances.Ensure(ctx, row.Username); err != nil {
		// The balance stays missing (the next request initialises it);
		// this user's failure is not the others'.
		res.Errors++
		j.log.Error("hot balance dropped to be rebuilt, but not initialised again", "user", row.Username, "why", why, "err", err)
		return nil
	}
	res.Rebuilt++
	j.log.Warn("hot balance rebuilt from MySQL", "user", row.Username, "why", why, "redis_was", h.Balance, "mysql", row.BalanceFen)
	return nil
}

// adjust brings MySQL down to a quiet Redis balance with an ADJUST row,
// written only if the account did not move since it was read.
func (j *BalanceSync) adjust(ctx context.Context, row store.Activity, hotBal decimal.Decimal, t0 time.Time, res *BalanceResult) {
	delta := hotBal.Sub(row.BalanceFen)
	reason := fmt.Sprintf("balance-sync: redis %s, mysql %s", hotBal.StringFixed(store.MoneyScale), row.BalanceFen.StringFixed(store.MoneyScale))
	_, err := j.ledger.Adjust(ctx, row.Username, fmt.Sprintf("sync:%d", t0.UnixMilli()), delta, row.BalanceFen, row.LedgerSeq, reason)
	switch {
	case errors.Is(err, store.ErrChanged):
		res.Busy++
	case err != nil:
		res.Errors++
		j.log.Error("could not adjust a drift", "user", row.Username, "err", err)
	default:
		res.Adjustments++
		j.log.Warn("balance drift corrected with an ADJUST ledger row", "user", row.Username, "delta", delta, "reason", reason)
	}
}
