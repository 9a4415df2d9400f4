package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"github.com/shopspring/decimal"
)

// compare checks each quiet user's Redis side against MySQL, the record
// (SPEC 6.5, 6.7). Quiet: no pending deduction, no unsettled ledger entry,
// no ledger entry newer than Quiet. Then:
//   - Redis behind: its count of reflected ledger entries is below MySQL's
//     hot_entries, or unknown. It came back from an older snapshot (or was
//     set by someone else): it is rebuilt from MySQL, whatever its balance.
//   - every entry reflected, Redis above MySQL: Redis forgot a deduction
//     MySQL has (a producer's own, lost with Redis), or took less for a
//     retry after a loss. Rebuilt too: MySQL is never corrected up to it.
//   - every entry reflected, Redis below MySQL: Redis took deductions MySQL
//     never got (a producer's message lost). MySQL is brought down to it
//     with an ADJUST ledger row naming both values.
//   - Redis reflecting more entries than MySQL holds: MySQL went back (a
//     restored backup?); reported, nothing changed.
func (j *BalanceSync) compare(ctx context.Context, res *BalanceResult) error {
	lastProgress := time.Now()
	return j.rdb.ScanUsers(ctx, keys.AgentBalance, j.cfg.Batch, func(users []string) error {
		t0 := j.now()
		hot, err := j.rdb.HotBalances(ctx, users)
		if err != nil {
			return err
		}
		rows, err := store.AccountActivity(ctx, j.db, users)
		if err != nil {
			return fmt.Errorf("reconcile: %w", err)
		}
		for _, row := range rows {
			res.UsersScanned++
			if err := j.compareOne(ctx, row, hot[row.Username], t0, res); err != nil {
				return err
			}
		}
		if time.Since(lastProgress) > progressEvery {
			lastProgress = time.Now()
			j.log.Info("balance-sync progress", "users_scanned", res.UsersScanned, "drift_found", res.DriftFound)
		}
		return nil
	})
}

func (j *BalanceSync) compareOne(ctx context.Context, row store.Activity, h store.HotBalance, t0 time.Time, res *BalanceResult) error {
	switch {
	case h.Malformed != "":
		j.unreadable(res, row.Username, fmt.Errorf("balance %.40q: %w", h.Malformed, store.ErrBalanceMalformed))
		return nil
	case !h.Present:
		return nil
	case h.Pending > 0, row.Unsettled, row.Last != nil && row.Last.After(t0.Add(-j.cfg.Quiet)):
		res.Busy++
		return nil
	}
	hotBal := h.Balance.Round(store.MoneyScale) // MySQL holds 8 places; more would be drift no ADJUST can write
	differ := !hotBal.Equal(row.BalanceFen)
	if differ {
		res.DriftFound++
	}
	switch {
	case !h.EntriesKnown:
		return j.rebuild(ctx, row, h, "Redis does not say which ledger entries its balance reflects", res)
	case h.Entries < row.HotEntries:
		return j.rebuild(ctx, row, h, fmt.Sprintf("Redis is behind MySQL: its balance reflects %d of %d ledger entries", h.Entries, row.HotEntries), res)
	case h.Entries > row.HotEntries:
		res.Errors++
		j.log.Error("Redis reflects more ledger entries than MySQL holds (was MySQL restored from an older backup?); nothing changed",
			"user", row.Username, "redis_entries", h.Entries, "mysql_entries", row.HotEntries, "redis", hotBal, "mysql", row.BalanceFen)
		return nil
	case !differ:
		return nil
	case hotBal.GreaterThan(row.BalanceFen):
		return j.rebuild(ctx, row, h, "Redis is above MySQL: it forgot a deduction MySQL has", res)
	}
	return j.adjust(ctx, row, hotBal, t0, res)
}

// rebuild drops the user's hot balance, if unchanged since it was read,
// and initialises it from MySQL as after a Redis loss.
func (j *BalanceSync) rebuild(ctx context.Context, row store.Activity, h store.HotBalance, why string, res *BalanceResult) error {
	dropped, err := j.rdb.ResetBalance(ctx, row.Username, h)
	if err != nil || !dropped {
		return err // dropped false: the user moved meanwhile; the next run looks again
	}
	if _, err := store.EnsureBalance(ctx, j.db, j.rdb, row.Username); err != nil {
		return err // the balance stays missing: the next request initialises it
	}
	res.Rebuilt++
	j.log.Warn("hot balance rebuilt from MySQL", "user", row.Username, "why", why, "redis_was", h.Balance, "mysql", row.BalanceFen)
	return nil
}

// adjust brings MySQL down to a quiet Redis balance with an ADJUST row,
// written only if the account did not move since it was read.
func (j *BalanceSync) adjust(ctx context.Context, row store.Activity, hotBal decimal.Decimal, t0 time.Time, res *BalanceResult) error {
	delta := hotBal.Sub(row.BalanceFen)
	reason := fmt.Sprintf("balance-sync: redis %s, mysql %s", hotBal.StringFixed(store.MoneyScale), row.BalanceFen.StringFixed(store.MoneyScale))
	_, err := store.Adjust(ctx, j.db, row.Username, fmt.Sprintf("sync:%d", t0.UnixMilli()), delta, row.BalanceFen, row.LedgerSeq, reason)
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
	return nil
}
