package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/eisland/isle/store"
	"github.com/eisland/isle/store/keys"
	"gorm.io/gorm"
)

// Defaults of BalanceSyncConfig.
const (
	PendingAgeDefault = 5 * time.Minute
	QuietDefault      = 2 * time.Minute
	BatchDefault      = 500
	lateAge           = time.Minute
	progressEvery     = 10 * time.Second
	debitChunk        = 100 // pending deductions per ledger transaction
)

// BalanceSyncConfig tunes the balance-sync job. Zero fields take the defaults.
type BalanceSyncConfig struct {
	PendingAge time.Duration // pending deductions older than this are applied here (their message is late or lost)
	Quiet      time.Duration // users with ledger entries newer than this are not compared
	Batch      int           // users per SCAN batch, pipeline and SQL statement
}

// BalanceSync is the balance-sync job (SPEC 6; seed: every 30 minutes). It
// never copies a Redis balance into MySQL as the seed did: it
//  1. applies pending deductions older than PendingAge through the ledger
//     (exactly once, whoever else applies them) and clears them;
//  2. settles ledger entries older than PendingAge whose Redis side a crash
//     or a Redis error left undone;
//  3. compares each quiet user's Redis and MySQL balances (no pending
//     deduction, no unsettled or recent ledger entry) and corrects a drift
//     with an ADJUST ledger row naming both values;
//  4. drops what Redis re-initialisations no longer need.
type BalanceSync struct {
	db      *gorm.DB
	rdb     *store.Redis
	cfg     BalanceSyncConfig
	metrics *Metrics
	log     *slog.Logger
	now     func() time.Time
}

// NewBalanceSync returns the job.
func NewBalanceSync(db *gorm.DB, rdb *store.Redis, cfg BalanceSyncConfig, m *Metrics, log *slog.Logger) *BalanceSync {
	cfg.PendingAge = cmp.Or(cfg.PendingAge, PendingAgeDefault)
	cfg.Quiet = cmp.Or(cfg.Quiet, QuietDefault)
	cfg.Batch = cmp.Or(cfg.Batch, BatchDefault)
	return &BalanceSync{db: db, rdb: rdb, cfg: cfg, metrics: m, log: log, now: time.Now}
}

// Name is "balance-sync".
func (j *BalanceSync) Name() string { return "balance-sync" }

// BalanceResult is what one balance-sync run did.
type BalanceResult struct {
	UsersScanned   int // Redis balances compared or considered
	PendingApplied int // pending deductions this run wrote to the ledger
	PendingCleared int // pending deductions already in the ledger, cleared
	Refunded       int // second charges of a request id (taken after Redis forgot the first) given back
	Settled        int // ledger entries whose Redis side this run finished
	DriftFound     int // quiet users whose Redis and MySQL balances differed
	Adjustments    int // ADJUST ledger rows written
	Busy           int // users skipped: pending deductions or recent ledger activity
	LateCleaned    int // leftovers of Redis re-initialisations removed
	Unreadable     int // users skipped because their Redis data cannot be read (each logged with the key's value)
	Errors         int
}

// counter is one count of a result: its metric item name, its words in
// the printed result, and its value.
type counter struct {
	name, label string
	n           int
}

// items lists the counters in report order.
func (r BalanceResult) items() []counter {
	return []counter{
		{"users_scanned", "users scanned", r.UsersScanned}, {"pending_applied", "pending applied", r.PendingApplied},
		{"pending_cleared", "pending cleared", r.PendingCleared}, {"refunded", "refunded", r.Refunded}, {"settled", "settled", r.Settled},
		{"drift_found", "drift found", r.DriftFound}, {"adjustments", "adjustments", r.Adjustments},
		{"busy", "busy", r.Busy}, {"late_cleaned", "late cleaned", r.LateCleaned}, {"unreadable", "unreadable", r.Unreadable},
		{"errors", "errors", r.Errors},
	}
}

// Count returns the count the logs name name ("users_scanned", ...), or 0.
func (r BalanceResult) Count(name string) int {
	for _, it := range r.items() {
		if it.name == name {
			return it.n
		}
	}
	return 0
}

func (r BalanceResult) String() string {
	parts := make([]string, 0, 9)
	for _, it := range r.items() {
		parts = append(parts, fmt.Sprintf("%s %d", it.label, it.n))
	}
	return strings.Join(parts, ", ")
}

// LogValue implements slog.LogValuer.
func (r BalanceResult) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 9)
	for _, it := range r.items() {
		attrs = append(attrs, slog.Int(it.name, it.n))
	}
	return slog.GroupValue(attrs...)
}

// RunOnce runs the four steps over every user with a Redis key.
func (j *BalanceSync) RunOnce(ctx context.Context) (Result, error) {
	var res BalanceResult
	err := errors.Join(j.applyPending(ctx, &res), j.settleLeftovers(ctx, &res), j.compare(ctx, &res), j.cleanLate(ctx, &res))
	for _, it := range res.items() {
		j.metrics.add(j.Name(), it.name, it.n)
	}
	return res, err
}

// applyPending applies the pending deductions older than PendingAge.
func (j *BalanceSync) applyPending(ctx context.Context, res *BalanceResult) error {
	cutoff := j.now().Add(-j.cfg.PendingAge)
	return j.rdb.ScanUsers(ctx, keys.AgentPending, j.cfg.Batch, func(users []string) error {
		pending, bad, err := j.rdb.PendingOf(ctx, users)
		if err != nil {
			return err
		}
		for user, err := range bad {
			j.unreadable(res, user, err)
		}
		var debits []store.Debit
		for user, entries := range pending {
			for _, e := range entries {
				if e.At.Before(cutoff) {
					debits = append(debits, pendingDebit(user, e))
				}
			}
		}
		for start := 0; start < len(debits); start += debitChunk {
			if err := j.applyDebits(ctx, debits[start:min(start+debitChunk, len(debits))], res); err != nil {
				return err
			}
		}
		return nil
	})
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
	results, err := store.ApplyDebits(ctx, j.db, debits)
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
	out, err := j.rdb.Resettle(ctx, store.SettleEntry{Username: d.Username, Kind: store.SettleDeduction, EntryID: d.ID,
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
	out, err := j.rdb.Settle(ctx, entries...)
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
		marks = append(marks, e.Key())
	}
	return len(marks), store.MarkSettled(ctx, j.db, marks...)
}

// unreadable reports a user whose Redis data cannot be read; the run goes
// on with the others. Each run reports it again until someone mends the key
// (deleting a malformed balance makes the next request initialise it from
// MySQL).
func (j *BalanceSync) unreadable(res *BalanceResult, user string, err error) {
	res.Unreadable++
	j.log.Error("user skipped: Redis data unreadable", "user", user, "err", err)
}

// settleLeftovers finishes the Redis side of ledger entries a crash or a
// Redis error left unsettled for longer than PendingAge. It pages past the
// entries it cannot settle (their users' Redis data is unreadable), so they
// cannot hold back the ones after them.
func (j *BalanceSync) settleLeftovers(ctx context.Context, res *BalanceResult) error {
	cutoff := j.now().Add(-j.cfg.PendingAge)
	var after uint64
	for {
		rows, err := store.Unsettled(ctx, j.db, cutoff, after, j.cfg.Batch)
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
		if err := store.MarkSettled(ctx, j.db, marks...); err != nil {
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

// cleanLate drops the late entries of balances still missing.
func (j *BalanceSync) cleanLate(ctx context.Context, res *BalanceResult) error {
	return j.rdb.ScanUsers(ctx, keys.AgentBalanceLate, j.cfg.Batch, func(users []string) error {
		n, err := j.rdb.CleanLate(ctx, users, lateAge, j.now())
		res.LateCleaned += n
		return err
	})
}
