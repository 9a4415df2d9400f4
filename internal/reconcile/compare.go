package reconcile

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
)

// compare brings MySQL to each quiet user's Redis balance with an ADJUST row.
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
			h := hot[row.Username]
			h.Balance = h.Balance.Round(store.MoneyScale) // MySQL holds 8 places; more would be drift no ADJUST can write
			switch {
			case h.Malformed != "":
				j.unreadable(res, row.Username, fmt.Errorf("balance %.40q: %w", h.Malformed, store.ErrBalanceMalformed))
				continue
			case !h.Present:
				continue
			case h.Pending > 0, row.Unsettled, row.Last != nil && row.Last.After(t0.Add(-j.cfg.Quiet)):
				res.Busy++
				continue
			case h.Balance.Equal(row.BalanceFen):
				continue
			}
			res.DriftFound++
			delta := h.Balance.Sub(row.BalanceFen)
			reason := fmt.Sprintf("balance-sync: redis %s, mysql %s", h.Balance.StringFixed(store.MoneyScale), row.BalanceFen.StringFixed(store.MoneyScale))
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
		}
		if time.Since(lastProgress) > progressEvery {
			lastProgress = time.Now()
			j.log.Info("balance-sync progress", "users_scanned", res.UsersScanned, "drift_found", res.DriftFound)
		}
		return nil
	})
}
